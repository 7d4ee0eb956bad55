"""The audit of a log that holds debug quotas (DESIGN.md "Debug quota"; AllocationsSet v2): the replay through
today's `decide` reproduces every decision, including the refused ones and the allocation changes an older
ledger wrote at v1; the chain verifies; and the projections rebuilt from the log equal the live ones, quotas
included."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from steward.audit.rebuild import rebuild_full
from steward.audit.replay import replay
from steward.audit.verify import verify
from steward.domain import events
from steward.domain.commands import SetAllocations
from steward.store import schema
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade
from tests.unit.api.harness import record


@pytest.fixture()
def store(tmp_path: Path) -> EventStore:
    url = f"sqlite:///{tmp_path / 's.db'}"
    upgrade(url)
    return EventStore.from_url(url)


def test_a_log_with_old_allocation_events_and_new_debug_quotas_replays_and_verifies(
        store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # an older ledger wrote AllocationsSet at v1 (no debug quotas in the schema)
    with monkeypatch.context() as old:
        old.setitem(events.EVENT_TYPES, "AllocationsSet", 1)
        record(store, [SetAllocations("cluster", {"research": 0.6, "ops": 0.4}, "setup"),
                       SetAllocations("research", {"a1": 0.5, "a2": 0.5}, "setup")])
    record(store, [
        SetAllocations("research", {}, "debug week", {"a1": 3}),
        SetAllocations("research", {"a2": 0.4}, "smaller a2, quota with it", {"a2": 1}),
        SetAllocations("research", {}, "negative", {"a1": -1}),        # refused: a CommandRejected
        SetAllocations("ops", {}, "not a child of ops", {"a1": 2}),    # refused
        SetAllocations("research", {}, "a1 back to the default", {"a1": None}),
    ], actor="maria")
    rows = store.read()
    now = events.EVENT_TYPES["AllocationsSet"]  # v2 brought debug quotas, v3 display names (ADR 0055)
    assert now >= 2 and [r.schema_version for r in rows if r.type == "AllocationsSet"] == [1, 1, now, now, now]
    assert [r.type for r in rows].count("CommandRejected") == 2

    replayed = replay(store)
    assert replayed["ok"], replayed
    assert (replayed["decisions"], replayed["reproduced"], replayed["different"]) == (7, 7, 0)
    assert verify(store)["ok"]

    rebuilt = rebuild_full(store)
    assert rebuilt["ok"], rebuilt
    with store.engine.connect() as conn:
        quotas: dict[str, int | None] = {r[0]: r[1] for r in conn.execute(select(
            schema.proj_allocations.c.name, schema.proj_allocations.c.debug_quota_gpus))}
    assert quotas == {"research": None, "ops": None, "a1": None, "a2": 1}


def test_an_altered_quota_in_the_log_shows_as_a_difference(store: EventStore) -> None:
    """The replay can fail: an accepted quota the rules refuse (the command is read back from the event) is
    named; and the chain no longer verifies."""
    record(store, [SetAllocations("cluster", {"a1": 1.0}, "setup"), SetAllocations("cluster", {}, "x", {"a1": 2})])
    last = store.read()[-1]
    with store.engine.begin() as conn:
        conn.execute(schema.events.update().where(schema.events.c.position == last.position)
                     .values(payload={**last.payload, "debug_quotas": {"a1": -5}}))
    replayed = replay(store)
    assert not replayed["ok"] and replayed["different"] == 1
    assert replayed["differences"][0]["position"] == last.position
    assert replayed["differences"][0]["replayed"][0]["type"] == "CommandRejected"
    assert replayed["differences"][0]["first_difference"].startswith(
        "event 1: recorded AllocationsSet on allocation-cluster, replayed CommandRejected")
    assert not verify(store)["ok"]
