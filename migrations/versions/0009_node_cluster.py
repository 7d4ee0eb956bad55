"""The named cluster of each node in the nodes projection (issue 25, ADR 0057): `RegisterNode.cluster`, the
default cluster ("default") for every node registered before clusters had names. The API's `Node.cluster`
reads it.

The projection is rebuilt from the log like every other (`steward audit rebuild`); existing rows take the
default cluster, which is what their events say (a `NodeRegistered` without a cluster).

Revision ID: 0009_node_cluster
Revises: 0008_job_contract_times
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_node_cluster"
down_revision = "0008_job_contract_times"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("proj_nodes", sa.Column("cluster", sa.String(100), nullable=False, server_default="default"))


def downgrade() -> None:
    with op.batch_alter_table("proj_nodes") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("cluster")
