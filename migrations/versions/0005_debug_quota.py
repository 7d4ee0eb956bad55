"""Debug quotas: the manager-set debug quota of each allocation in the allocations projection.

DESIGN.md "Debug quota and the time-to-first-GPU SLO": each allocation has a debug quota (GPUs that may run
debug jobs and sessions ahead of the fair-share order), set by its parent's manager in `AllocationsSet` v2
(`debug_quotas`). NULL is the default that follows the share. The projection is rebuilt from the log like
every other; the column is nullable, so existing rows need no backfill (no event before v2 set a quota).

Revision ID: 0005_debug_quota
Revises: 0004_snapshot_checks
"""

import sqlalchemy as sa
from alembic import op

revision = "0005_debug_quota"
down_revision = "0004_snapshot_checks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("proj_allocations", sa.Column("debug_quota_gpus", sa.Integer, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("proj_allocations") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("debug_quota_gpus")
