"""The rebuild from a checked snapshot on the embedded SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade
from tests.unit.audit.rebuild_contract import RebuildContract


@pytest.fixture()
def store(tmp_path: Path) -> EventStore:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    return EventStore.from_url(url)


class TestSQLiteRebuild(RebuildContract):
    pass
