"""PostgreSQL fixtures for the store tests: the test database of the `real_services` instance, migrated
as the owner (steward_owner), used as the application (steward_app), reset between tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text

from steward.config import Settings
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade
from tests.unit.store.contract import Tamper

APPEND_ONLY = ("events", "checkpoints")
RESET = ("events", "checkpoints", "snapshots", "snapshot_checks", "consumer_offsets", "processed_messages",
         "relay_positions", "leader_leases",
         "proj_allocations", "proj_nodes", "proj_jobs")


def store_test_urls() -> tuple[str, str]:
    app, owner = Settings().postgres_urls()
    return app.rsplit("/", 1)[0] + "/steward_test", owner.rsplit("/", 1)[0] + "/steward_test"


def owner_sql(engine: Engine, *statements: str, params: dict[str, Any] | None = None) -> None:
    """Run statements as the owner with the append-only triggers off (as an attacker with the owner's
    password could)."""
    with engine.begin() as conn:
        for t in APPEND_ONLY:
            conn.execute(text(f"ALTER TABLE {t} DISABLE TRIGGER USER"))
        for s in statements:
            conn.execute(text(s), params or {})
        for t in APPEND_ONLY:
            conn.execute(text(f"ALTER TABLE {t} ENABLE TRIGGER USER"))


@pytest.fixture(scope="session")
def pg_owner(real_services: None) -> Iterator[Engine]:
    """The test database from scratch, migrated to the head as its owner."""
    _, owner_url = store_test_urls()
    engine = create_engine(owner_url, pool_pre_ping=True)
    with engine.begin() as conn:
        tables = [r[0] for r in conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))]
        for t in tables:
            conn.execute(text(f'DROP TABLE IF EXISTS "{t}" CASCADE'))
        conn.execute(text("DROP FUNCTION IF EXISTS steward_refuse_event_change() CASCADE"))
    upgrade(owner_url)
    yield engine
    engine.dispose()


@pytest.fixture()
def pg_store(pg_owner: Engine) -> Iterator[EventStore]:
    owner_sql(pg_owner, f"TRUNCATE {', '.join(RESET)}")
    store = EventStore.from_url(store_test_urls()[0])
    yield store
    store.engine.dispose()


@pytest.fixture()
def pg_tamper(pg_owner: Engine) -> Tamper:
    def run(sql: str, params: dict[str, Any] | None) -> None:
        owner_sql(pg_owner, sql, params=params)

    return run
