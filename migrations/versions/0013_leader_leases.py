"""Standbys (issue 22, ADR 0060): one lease row per role (`ledger`, `scheduler`) naming the active process, its
fencing epoch and when the lease expires. The ledger's batch transaction reads the epoch under the head lock and
is refused when it is not its own, so a paused-then-resumed old active never writes after a takeover. Nothing
here is part of the log: a lost row is taken again by whichever process asks first.

The number is 0013 (helpers of session 14 took 0012-0014 in parallel); it follows 0011 on main. If 0012 lands
first, this revision's `down_revision` moves to it (one line of revisions).

Revision ID: 0013_leader_leases
Revises: 0011_names_and_addresses
"""

import sqlalchemy as sa
from alembic import op

revision = "0013_leader_leases"
down_revision = "0011_names_and_addresses"
branch_labels = None
depends_on = None

APP_ROLE = "steward_app"


def upgrade() -> None:
    op.create_table(
        "leader_leases",
        sa.Column("role", sa.String(50), primary_key=True),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("epoch", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
        sa.Column("backend_pid", sa.Integer, nullable=True),
        sa.Column("taken_at", sa.Float, nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"""
            DO $$ BEGIN
              IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
                GRANT SELECT, INSERT, UPDATE ON leader_leases TO {APP_ROLE};
              END IF;
            END $$;
            """
        )


def downgrade() -> None:
    op.drop_table("leader_leases")
