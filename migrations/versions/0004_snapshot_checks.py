"""Snapshot checks: a full rebuild records the snapshot it proved equal to the live projections; and
snapshot blobs stored uncompressed by PostgreSQL (their parts are compressed one by one).

`steward audit rebuild --full` folds the whole log, proves the rebuilt tables equal the live ones, and
records here the snapshot of that state (position, digest) with per-table sums of row hashes; a later
`steward audit rebuild` starts from the newest recorded snapshot and folds only the tail. Append-only for
the application (INSERT and SELECT).

Revision ID: 0004_snapshot_checks
Revises: 0003_audit
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_snapshot_checks"
down_revision = "0003_audit"
branch_labels = None
depends_on = None

APP_ROLE = "steward_app"


def upgrade() -> None:
    big = sa.BigInteger().with_variant(sa.Integer, "sqlite")
    op.create_table(
        "snapshot_checks",
        sa.Column("position", big, primary_key=True, autoincrement=False),
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("format", sa.String(40), nullable=False),
        sa.Column("checked_at", sa.Float, nullable=False),
        sa.Column("checksum_of", sa.String(60), nullable=False),
        sa.Column("tables", sa.JSON, nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        # Snapshot parts are compressed one by one and read alone with substr: PostgreSQL must not compress
        # the blob as a whole (a substr of a compressed value decompresses it up to the slice).
        op.execute("ALTER TABLE snapshots ALTER COLUMN state SET STORAGE EXTERNAL")
        op.execute(
            f"""
            DO $$ BEGIN
              IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
                GRANT SELECT, INSERT ON snapshot_checks TO {APP_ROLE};
              END IF;
            END $$;
            """
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE snapshots ALTER COLUMN state SET STORAGE EXTENDED")
    op.drop_table("snapshot_checks")
