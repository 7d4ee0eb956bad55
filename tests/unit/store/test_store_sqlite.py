"""The store contract on the embedded SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

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


class TestSQLiteStore(StoreContract):
    pass
