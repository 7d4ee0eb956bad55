"""The store contract on the embedded SQLite store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from steward.ledger.ledger import Ledger
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade
from tests.unit.store.contract import StoreContract, Tamper, sql_tamper


@pytest.fixture()
def store(tmp_path: Path) -> EventStore:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    return EventStore.from_url(url)


@pytest.fixture()
def tamper(store: EventStore) -> Tamper:
    return sql_tamper(store.engine.connect)


@pytest.fixture(params=["sqlite"])
def ledger_for(request: pytest.FixtureRequest) -> Callable[[EventStore], Ledger]:
    """The embedded store's one adapter (`steward.store.recorder.SQLiteTransaction`)."""
    def make(store: EventStore) -> Ledger:
        return Ledger(store)

    return make


class TestSQLiteStore(StoreContract):
    pass
