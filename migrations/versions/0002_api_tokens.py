"""Identity: API tokens (stored as SHA-256 digests, scoped, expiring, revocable) and the record of
access denials. The application role may read, insert and revoke tokens, and only read and insert
denials (a denial record is not changed or removed by the application).

Revision ID: 0002_api_tokens
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002_api_tokens"
down_revision = "0001"
branch_labels = None
depends_on = None

APP_ROLE = "steward_app"


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("token_id", sa.String(32), primary_key=True),
        sa.Column("secret_sha256", sa.String(64), nullable=False),
        sa.Column("subject", sa.String(200), nullable=False),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("scopes", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("expires_at", sa.Float, nullable=True),
        sa.Column("revoked_at", sa.Float, nullable=True),
        sa.Column("revoked_by", sa.String(200), nullable=True),
    )
    op.create_table(
        "access_denials",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("subject", sa.String(200), nullable=False),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("token_id", sa.String(32), nullable=True),
        sa.Column("operation", sa.String(100), nullable=False),
        sa.Column("target", sa.String(300), nullable=False),
        sa.Column("reason", sa.String(300), nullable=False),
        sa.Column("client", sa.String(100), nullable=False),
    )
    op.create_index("ix_access_denials_at", "access_denials", ["at"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"""
            DO $$ BEGIN
              IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
                GRANT SELECT, INSERT ON api_tokens, access_denials TO {APP_ROLE};
                GRANT UPDATE (revoked_at, revoked_by) ON api_tokens TO {APP_ROLE};
                GRANT USAGE, SELECT ON SEQUENCE access_denials_id_seq TO {APP_ROLE};
              END IF;
            END $$;
            """
        )


def downgrade() -> None:
    op.drop_index("ix_access_denials_at", table_name="access_denials")
    op.drop_table("access_denials")
    op.drop_table("api_tokens")
