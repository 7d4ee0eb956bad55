"""The store's tables: the immutable event log, consumer offsets, and the projections (read models)."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

events = Table(
    "events",
    metadata,
    Column("position", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False),
    Column("stream_id", String(200), nullable=False),
    Column("version", Integer, nullable=False),
    Column("type", String(100), nullable=False),
    Column("schema_version", Integer, nullable=False),
    Column("payload", JSON, nullable=False),
    Column("metadata", JSON, nullable=False),
    Column("message_id", String(100), nullable=True),
    Column("recorded_at", Float, nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    UniqueConstraint("stream_id", "version", name="uq_events_stream_version"),
    Index("ix_events_message_id", "message_id"),
    Index("ix_events_type", "type"),
    Index("ix_events_recorded_at", "recorded_at"),
)

# Signed RFC 6962 Merkle checkpoints over the event hashes (append-only, like the events).
checkpoints = Table(
    "checkpoints",
    metadata,
    Column("tree_size", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False),
    Column("root", String(64), nullable=False),
    Column("head_hash", String(64), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("key_id", String(16), nullable=False),
    Column("public_key", Text, nullable=False),
    Column("signature", Text, nullable=False),
    Column("frontier", JSON, nullable=False),
)

# Projection snapshots (a cache: derived from the log, checked by digest, rebuilt when unreadable).
snapshots = Table(
    "snapshots",
    metadata,
    Column("position", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False),
    Column("recorded_at", Float, nullable=False),
    Column("head_hash", String(64), nullable=False),
    Column("format", String(40), nullable=False),
    Column("digest", String(64), nullable=False),
    Column("state", LargeBinary, nullable=False),
    Index("ix_snapshots_recorded_at", "recorded_at"),
)

# Snapshots a full rebuild proved equal to the live projections, with per-table sums of row hashes (the
# starting points of `steward audit rebuild` without --full; migration 0004_snapshot_checks).
snapshot_checks = Table(
    "snapshot_checks",
    metadata,
    Column("position", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False),
    Column("digest", String(64), primary_key=True),
    Column("format", String(40), nullable=False),
    Column("checked_at", Float, nullable=False),
    Column("checksum_of", String(60), nullable=False),
    Column("tables", JSON, nullable=False),
)

consumer_offsets = Table(
    "consumer_offsets",
    metadata,
    Column("consumer", String(100), primary_key=True),
    Column("topic", String(200), primary_key=True),
    Column("partition", Integer, primary_key=True),
    Column("next_offset", BigInteger, nullable=False),
)

processed_messages = Table(
    "processed_messages",
    metadata,
    Column("message_id", String(100), primary_key=True),
    Column("position", BigInteger, nullable=True),
)

relay_positions = Table(
    "relay_positions",
    metadata,
    Column("relay", String(100), primary_key=True),
    Column("position", BigInteger, nullable=False),
)

# who of an active process and its standbys may write (ADR 0060, steward.store.leases): one row per role
leader_leases = Table(
    "leader_leases",
    metadata,
    Column("role", String(50), primary_key=True),
    Column("holder", String(200), nullable=False),
    Column("epoch", BigInteger, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("backend_pid", Integer, nullable=True),
    Column("taken_at", Float, nullable=False),
)

proj_allocations = Table(
    "proj_allocations",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("parent", String(200), nullable=False),
    Column("share", Float, nullable=False),
    Column("position", BigInteger, nullable=False),
    # the manager-set debug quota in GPUs; NULL: the default that follows the share (migration 0005)
    Column("debug_quota_gpus", Integer, nullable=True),
    # what people call it, set by the parent's manager (AllocationsSet v3); NULL: its id (migration 0011)
    Column("display_name", String(200), nullable=True),
    # the cluster its jobs run on (AllocationsSet v4 pins, ADR 0067); NULL: unpinned (migration 0014)
    Column("pin", String(100), nullable=True),
)

proj_nodes = Table(
    "proj_nodes",
    metadata,
    Column("node_id", String(200), primary_key=True),
    Column("gpus", Integer, nullable=False),
    Column("gpu_model", String(100), nullable=False),
    Column("path", JSON, nullable=False),
    Column("executor", String(100), nullable=False),
    Column("state", String(20), nullable=False),
    Column("position", BigInteger, nullable=False),
    # GPUs held by work another scheduler placed, as the executor's last heartbeat said (migration 0006)
    Column("foreign_gpus", Integer, nullable=False, server_default="0"),
    # the named cluster it belongs to (migration 0009; ADR 0057)
    Column("cluster", String(100), nullable=False, server_default="default"),
)

proj_jobs = Table(
    "proj_jobs",
    metadata,
    Column("job_id", String(200), primary_key=True),
    Column("project", String(200), nullable=False),
    Column("state", String(20), nullable=False),
    Column("gpus", Integer, nullable=False),
    Column("min_runtime_s", Float, nullable=False),
    Column("resumable", Integer, nullable=False),
    Column("job_class", String(20), nullable=False),
    Column("priority", Integer, nullable=False),
    Column("command", JSON, nullable=False),
    Column("submitted_at", Float, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("assignments", JSON, nullable=False),
    Column("funded", Integer, nullable=False),
    Column("started_at", Float, nullable=True),
    Column("ended_at", Float, nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("position", BigInteger, nullable=False),
    # the current attempt's contract times as recorded (JobStarted, SessionOpened; migration 0008)
    Column("protected_until", Float, nullable=True),
    Column("session_cap_at", Float, nullable=True),
    Column("session_warnings_at", JSON(none_as_null=True), nullable=True),
    # the address the current attempt of a running session published (SessionAddressPublished; migration 0011)
    Column("session_address", String(300), nullable=True),
    Index("ix_proj_jobs_state", "state"),
    Index("ix_proj_jobs_project", "project"),
)

PROJECTION_TABLES = (proj_allocations, proj_nodes, proj_jobs)
