"""Foreign load: the GPUs of each node held by work another scheduler placed (issue 23, a Slurm job submitted
outside Steward), in the nodes projection.

An executor's heartbeat names them (`ExecutorHeartbeat.foreign`); Steward counts them busy and never preempts
them. The projection is rebuilt from the log like every other; no event before this one named foreign load, so
existing rows take 0.

Revision ID: 0006_foreign_load
Revises: 0005_debug_quota
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_foreign_load"
down_revision = "0005_debug_quota"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("proj_nodes", sa.Column("foreign_gpus", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("proj_nodes") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("foreign_gpus")
