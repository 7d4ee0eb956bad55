"""Allocations pinned to a cluster (issue 25, ADR 0067): the cluster each node of the org tree is pinned to
(`AllocationsSet` v4 `pins`; NULL: unpinned, the only value any log recorded before).

The projections are rebuilt from the log like every other (`steward audit rebuild`); existing rows take NULL.
The number is 0014 (helpers of session 15 took 0014-0016 in parallel); it follows 0013 on main, and the lead
re-chains `down_revision` at merge if another lands first.

Revision ID: 0014_allocation_pins
Revises: 0013_leader_leases
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_allocation_pins"
down_revision = "0013_leader_leases"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("proj_allocations", sa.Column("pin", sa.String(100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("proj_allocations") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("pin")
