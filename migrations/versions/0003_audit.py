"""Audit: signed Merkle checkpoints, projection snapshots, and an index for time travel.

Checkpoints are append-only like the events (trigger plus INSERT/SELECT grants only); snapshots are a
cache the application may prune.

Revision ID: 0003_audit
Revises: 0002_api_tokens
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_audit"
down_revision = "0002_api_tokens"
branch_labels = None
depends_on = None

APP_ROLE = "steward_app"


def upgrade() -> None:
    big = sa.BigInteger().with_variant(sa.Integer, "sqlite")
    op.create_index("ix_events_recorded_at", "events", ["recorded_at"])
    op.create_table(
        "checkpoints",
        sa.Column("tree_size", big, primary_key=True, autoincrement=False),
        sa.Column("root", sa.String(64), nullable=False),
        sa.Column("head_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("key_id", sa.String(16), nullable=False),
        sa.Column("public_key", sa.Text, nullable=False),
        sa.Column("signature", sa.Text, nullable=False),
        sa.Column("frontier", sa.JSON, nullable=False),
    )
    op.create_table(
        "snapshots",
        sa.Column("position", big, primary_key=True, autoincrement=False),
        sa.Column("recorded_at", sa.Float, nullable=False),
        sa.Column("head_hash", sa.String(64), nullable=False),
        sa.Column("format", sa.String(40), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("state", sa.LargeBinary, nullable=False),
    )
    op.create_index("ix_snapshots_recorded_at", "snapshots", ["recorded_at"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE TRIGGER checkpoints_append_only BEFORE UPDATE OR DELETE ON checkpoints "
            "FOR EACH ROW EXECUTE FUNCTION steward_refuse_event_change()"
        )
        op.execute(
            "CREATE TRIGGER checkpoints_no_truncate BEFORE TRUNCATE ON checkpoints "
            "FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_event_change()"
        )
        op.execute(
            f"""
            DO $$ BEGIN
              IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
                GRANT SELECT, INSERT ON checkpoints TO {APP_ROLE};
                GRANT SELECT, INSERT, DELETE ON snapshots TO {APP_ROLE};
              END IF;
            END $$;
            """
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS checkpoints_append_only ON checkpoints")
        op.execute("DROP TRIGGER IF EXISTS checkpoints_no_truncate ON checkpoints")
    op.drop_table("snapshots")
    op.drop_table("checkpoints")
    op.drop_index("ix_events_recorded_at", "events")
