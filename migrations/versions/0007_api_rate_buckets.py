"""API rate limits shared by every replica: one token bucket per key (steward.api.ratelimits, ADR 0047). The
application role reads, creates and updates buckets; nothing here is part of the log (a bucket is lost
with no harm: it refills).

Revision ID: 0007_api_rate_buckets
Revises: 0006_foreign_load
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_api_rate_buckets"
down_revision = "0006_foreign_load"
branch_labels = None
depends_on = None

APP_ROLE = "steward_app"


def upgrade() -> None:
    op.create_table(
        "api_rate_buckets",
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("tokens", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"""
            DO $$ BEGIN
              IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
                GRANT SELECT, INSERT, UPDATE, DELETE ON api_rate_buckets TO {APP_ROLE};
              END IF;
            END $$;
            """
        )


def downgrade() -> None:
    op.drop_table("api_rate_buckets")
