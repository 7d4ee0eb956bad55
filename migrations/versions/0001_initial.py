"""The event log, consumer offsets, dedup ids, outbox positions and the first projections.

On PostgreSQL the events table is append-only for everyone: a trigger refuses UPDATE, DELETE and
TRUNCATE, and the application role (steward_app) is granted only INSERT and SELECT on it.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

APP_ROLE = "steward_app"


def upgrade() -> None:
    big = sa.BigInteger().with_variant(sa.Integer, "sqlite")
    op.create_table(
        "events",
        sa.Column("position", big, primary_key=True, autoincrement=False),
        sa.Column("stream_id", sa.String(200), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("type", sa.String(100), nullable=False),
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("message_id", sa.String(100), nullable=True),
        sa.Column("recorded_at", sa.Float, nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("stream_id", "version", name="uq_events_stream_version"),
    )
    op.create_index("ix_events_message_id", "events", ["message_id"])
    op.create_index("ix_events_type", "events", ["type"])
    op.create_table(
        "consumer_offsets",
        sa.Column("consumer", sa.String(100), primary_key=True),
        sa.Column("topic", sa.String(200), primary_key=True),
        sa.Column("partition", sa.Integer, primary_key=True),
        sa.Column("next_offset", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "processed_messages",
        sa.Column("message_id", sa.String(100), primary_key=True),
        sa.Column("position", sa.BigInteger, nullable=True),
    )
    op.create_table(
        "relay_positions",
        sa.Column("relay", sa.String(100), primary_key=True),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "proj_allocations",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("parent", sa.String(200), nullable=False),
        sa.Column("share", sa.Float, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "proj_nodes",
        sa.Column("node_id", sa.String(200), primary_key=True),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("gpu_model", sa.String(100), nullable=False),
        sa.Column("path", sa.JSON, nullable=False),
        sa.Column("executor", sa.String(100), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "proj_jobs",
        sa.Column("job_id", sa.String(200), primary_key=True),
        sa.Column("project", sa.String(200), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("min_runtime_s", sa.Float, nullable=False),
        sa.Column("resumable", sa.Integer, nullable=False),
        sa.Column("job_class", sa.String(20), nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("command", sa.JSON, nullable=False),
        sa.Column("submitted_at", sa.Float, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("assignments", sa.JSON, nullable=False),
        sa.Column("funded", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Float, nullable=True),
        sa.Column("ended_at", sa.Float, nullable=True),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_proj_jobs_state", "proj_jobs", ["state"])
    op.create_index("ix_proj_jobs_project", "proj_jobs", ["project"])

    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            """
            CREATE FUNCTION steward_refuse_event_change() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              RAISE EXCEPTION 'the event log is append-only: % refused', TG_OP;
            END $$;
            """
        )
        op.execute(
            "CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events "
            "FOR EACH ROW EXECUTE FUNCTION steward_refuse_event_change()"
        )
        op.execute(
            "CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events "
            "FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_event_change()"
        )
        op.execute(
            f"""
            DO $$ BEGIN
              IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
                GRANT SELECT, INSERT ON events TO {APP_ROLE};
                GRANT SELECT ON alembic_version TO {APP_ROLE};
                GRANT SELECT, INSERT, UPDATE, DELETE ON consumer_offsets, processed_messages,
                  relay_positions, proj_allocations, proj_nodes, proj_jobs TO {APP_ROLE};
              END IF;
            END $$;
            """
        )


def downgrade() -> None:
    for table in (
        "proj_jobs", "proj_nodes", "proj_allocations", "relay_positions", "processed_messages",
        "consumer_offsets",
    ):
        op.drop_table(table)
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS events_append_only ON events")
        op.execute("DROP TRIGGER IF EXISTS events_no_truncate ON events")
    op.drop_table("events")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS steward_refuse_event_change()")
