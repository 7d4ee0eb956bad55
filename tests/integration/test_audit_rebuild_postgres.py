"""The rebuild from a checked snapshot on PostgreSQL (server-side row hashes and sums)."""

from __future__ import annotations

import pytest

from steward.store.eventstore import EventStore
from tests.integration.pg import pg_owner, pg_store
from tests.unit.audit.rebuild_contract import RebuildContract

pytestmark = pytest.mark.integration

__all__ = ["pg_owner", "pg_store"]


@pytest.fixture()
def store(pg_store: EventStore) -> EventStore:
    return pg_store


class TestPostgresRebuild(RebuildContract):
    pass
