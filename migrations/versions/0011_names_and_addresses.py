"""What people read instead of ids (issue 24, ADR 0055): the display name of each node of the org tree
(`AllocationsSet` v3 `display_names`, NULL: shown by its id) and the address a running session published
(`SessionAddressPublished` of the job's current attempt, NULL: none published, or the attempt is over).

The projections are rebuilt from the log like every other (`steward audit rebuild`); existing rows take NULL,
which is what the log says of them until a name or an address is recorded.

The number is 0011 because 0009 and 0010 were taken by work merged at the same time (docs/adr/0055): it
follows 0009 (clusters), so the chain stays one line (0010 was not needed).

The revision id is short: Alembic's `alembic_version.version_num` is 32 characters on PostgreSQL.

Revision ID: 0011_names_and_addresses
Revises: 0009_node_cluster
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_names_and_addresses"
down_revision = "0009_node_cluster"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("proj_allocations", sa.Column("display_name", sa.String(200), nullable=True))
    op.add_column("proj_jobs", sa.Column("session_address", sa.String(300), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("proj_jobs") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("session_address")
    with op.batch_alter_table("proj_allocations") as batch:
        batch.drop_column("display_name")
