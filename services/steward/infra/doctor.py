"""`steward doctor`: is each part reachable, which version, and one line on how to fix it."""

from __future__ import annotations

import asyncio
import re
import socket
from typing import Any

from steward.config import Settings


def _result(ok: bool, version: str | None = None, fix: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"ok": ok, "version": version, "fix": None if ok else fix} | extra


def _port_open(hostport: str, timeout: float = 1.0) -> bool:
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def check_kafka(settings: Settings) -> dict[str, Any]:
    fix = "start it with `make up` (infra/kafka.sh start); its log is in .run/logs/kafka.log"
    if not _port_open(settings.kafka_bootstrap):
        return _result(False, fix=fix)
    try:
        # lazy: a part that cannot load is a failed check with its fix, not an ImportError of `steward doctor`
        from kafka import KafkaAdminClient

        from steward.bus.kafka import client_options

        admin = KafkaAdminClient(**client_options(settings), request_timeout_ms=5000)
        topics = set(admin.list_topics())
        admin.close()
    except Exception as err:
        return _result(False, fix=f"{fix} ({err.__class__.__name__})")
    version = None
    libs = settings.run_dir / "kafka" / "libs"
    for jar in sorted(libs.glob("kafka_2.13-*.jar")) if libs.exists() else []:
        m = re.match(r"kafka_2\.13-([\d.]+)\.jar$", jar.name)
        if m:
            version = m.group(1)
    missing = [t for t in ("commands", "events", "deadletter") if settings.topic(t) not in topics]
    if missing:
        return _result(False, version, "create the topics with `infra/kafka.sh topics`")
    return _result(True, version)


def check_postgres(settings: Settings) -> dict[str, Any]:
    app_url, _ = settings.postgres_urls()
    fix = "start it with `make up` (infra/postgres.sh start); its log is in .run/postgres/logs/postgres.log"
    try:
        import psycopg

        dsn = app_url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return _result(True, str(row[0]) if row else None)
    except Exception as err:
        return _result(False, fix=f"{fix} ({err.__class__.__name__})")


def check_temporal(settings: Settings) -> dict[str, Any]:
    fix = "start it with `make up` (infra/temporal.sh start); its log is in .run/logs/temporal.log"
    if not _port_open(settings.temporal_address):
        return _result(False, fix=fix)

    async def info() -> str:
        from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
        from temporalio.client import Client

        client = await asyncio.wait_for(Client.connect(settings.temporal_address), 5)
        resp = await client.workflow_service.get_system_info(GetSystemInfoRequest())
        return str(resp.server_version)

    try:
        return _result(True, asyncio.run(info()))
    except Exception as err:
        return _result(False, fix=f"{fix} ({err.__class__.__name__})")


def check_store(settings: Settings) -> dict[str, Any]:
    # lazy: a part that cannot load is a failed check with its fix, not an ImportError of `steward doctor`
    from sqlalchemy import text

    from steward.store.eventstore import make_engine

    url = settings.resolved_store_url
    kind = "postgresql" if url.startswith("postgresql") else "sqlite"
    try:
        engine = make_engine(url)
        with engine.connect() as conn:
            rev = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            head = conn.execute(text("SELECT COALESCE(MAX(position), 0) FROM events")).scalar()
            conn.rollback()
        engine.dispose()
    except Exception as err:
        reason = str(err).splitlines()[0][:200]
        return _result(False, fix=f"run `steward migrate` (or `make up`): {reason}", kind=kind)
    return _result(True, f"schema {rev}", kind=kind, head=int(head or 0))


def run_all(settings: Settings) -> dict[str, dict[str, Any]]:
    return {
        "kafka": check_kafka(settings),
        "postgres": check_postgres(settings),
        "temporal": check_temporal(settings),
        "store": check_store(settings),
    }
