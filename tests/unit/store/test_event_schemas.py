"""Versioned event schemas: what the domain writes matches schema/events/, and every version ever
stored still loads (validated at its version, upcast, folded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from steward.domain.events import EVENT_TYPES, Event
from steward.domain.state import LedgerState, evolve
from steward.store import upcasting
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade
from steward.store.upcasting import SchemaError, stored_versions, upcast, validate
from tests.unit.store.contract import run_history

HISTORIES = Path(__file__).parent / "histories"


def stored_examples() -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(HISTORIES.glob("*.ndjson")) for line in f.read_text().splitlines()]


def test_every_event_type_has_a_schema_at_its_current_version() -> None:
    versions = stored_versions()
    for event_type, version in EVENT_TYPES.items():
        assert version in versions.get(event_type, []), f"schema/events/{event_type}/v{version}.json is missing"


def test_what_the_ledger_records_matches_the_schemas(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    run_history(store, jobs=15)
    kinds = set()
    for rec in store.read():
        validate(rec.type, rec.schema_version, rec.payload)
        kinds.add(rec.type)
    assert {"AllocationsSet", "NodeRegistered", "JobSubmitted", "JobPlaced", "JobStarted", "JobCompleted",
            "JobFailed", "JobCancelled", "CommandRejected"} <= kinds


def test_a_job_asking_for_models_and_clusters_matches_its_schema(tmp_path: Path) -> None:
    """`JobSubmitted` carries `gpu_models` and `clusters` when a job names any (ADR 0057), and `NodeRegistered`
    its `cluster`: the schemas said neither, and no recorded history here had them."""
    from steward.bus.envelope import command_envelope
    from steward.domain.commands import RegisterNode, SetAllocations, SubmitJob
    from steward.ledger.ledger import Ledger

    url = f"sqlite:///{tmp_path / 's.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    commands = [SetAllocations("cluster", {"p": 1.0}, "test"),
                RegisterNode("j1", 8, "a100", ["jupiter", "j1"], cluster="jupiter"),
                SubmitJob("p-1", "p", 2, 600, ["true"], gpu_models=["a100"], clusters=["jupiter"])]
    Ledger(store, consumer_name="t").process(
        [("t", command_envelope(c, actor="alice", role="admin").encode()) for c in commands], {})
    recorded = {rec.type: rec for rec in store.read()}
    assert recorded["JobSubmitted"].payload["gpu_models"] == ["a100"]
    for rec in recorded.values():
        validate(rec.type, rec.schema_version, rec.payload)


def test_every_event_of_the_recorded_logs_matches_its_schema() -> None:
    """The logs recorded by real runs (tests/replay/logs: the demo's, and the releases' before a rules change)
    against the schemas at the versions they were recorded at: a JobPreempted without a checkpoint
    (`checkpoint_at: null`) broke its schema unnoticed, as did JobLost's `unhealthy` and JobSubmitted's models."""
    import gzip

    logs = sorted((Path(__file__).parents[2] / "replay" / "logs").glob("*.ndjson.gz"))
    assert logs
    seen = 0
    for log in logs:
        with gzip.open(log, "rt") as lines:
            for line in lines:
                row = json.loads(line)
                if row.get("kind") == "event":
                    validate(row["type"], row["schema_version"], row["payload"])
                    seen += 1
    assert seen > 1000


def test_every_stored_version_has_an_example_that_still_loads() -> None:
    examples = stored_examples()
    covered = {(e["type"], e["schema_version"]) for e in examples}
    for event_type, versions in stored_versions().items():
        for v in versions:
            assert (event_type, v) in covered, f"add a stored {event_type} v{v} to {HISTORIES}"
    for ex in examples:
        validate(ex["type"], ex["schema_version"], ex["payload"])
        current = upcast(ex["type"], ex["schema_version"], ex["payload"])
        validate(ex["type"], EVENT_TYPES[ex["type"]], current)
        evolve(LedgerState(), Event(ex["stream_id"], ex["type"], current), 0.0)


def test_a_payload_that_breaks_its_schema_is_named() -> None:
    with pytest.raises(SchemaError, match="gpus"):
        validate("JobSubmitted", 1, {"job_id": "j", "project": "p", "gpus": "two", "min_runtime_s": 0,
                                     "command": ["x"], "resumable": False, "job_class": "batch", "priority": 0,
                                     "submitted_at": 0})


def test_old_versions_are_upcast_one_step_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(EVENT_TYPES, "Demo", 3)
    monkeypatch.setitem(upcasting.UPCASTERS, ("Demo", 1), lambda p: p | {"b": p["a"] * 2})
    monkeypatch.setitem(upcasting.UPCASTERS, ("Demo", 2), lambda p: {"sum": p["a"] + p["b"]})
    assert upcast("Demo", 1, {"a": 1}) == {"sum": 3}
    assert upcast("Demo", 3, {"sum": 5}) == {"sum": 5}
    monkeypatch.delitem(upcasting.UPCASTERS, ("Demo", 2))
    with pytest.raises(SchemaError, match="no upcaster for Demo v2"):
        upcast("Demo", 1, {"a": 1})


def test_an_event_written_against_its_schema_fails_the_test_that_writes_it(tmp_path: Path) -> None:
    """tests/conftest.py checks every event the ledger's batch transaction writes: a payload its schema does not
    allow is refused at the write (and kept, so the run fails even if the code under test swallowed the error)."""
    from steward.store.encoding import PendingAppend, encode_events
    from steward.store.hashing import GENESIS
    from steward.store.recorder import EventRecorder, SQLiteTransaction
    from tests import conftest

    url = f"sqlite:///{tmp_path / 's.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    bad = Event("job-j", "JobSubmitted", {"job_id": "j", "project": "p", "gpus": "two", "min_runtime_s": 0,
                                         "command": ["true"]})
    records, texts = encode_events([PendingAppend([bad], {}, "m-1")], 0, GENESIS, {}, 0.0)
    before = len(conftest.SCHEMA_VIOLATIONS)
    with store.engine.begin() as conn, pytest.raises(SchemaError, match="JobSubmitted"):
        SQLiteTransaction(EventRecorder(store), conn).append(records, texts, [])
    assert len(conftest.SCHEMA_VIOLATIONS) == before + 1
    del conftest.SCHEMA_VIOLATIONS[before:]  # this test's violation is the point, not a failure of the run
    assert list(store.read()) == []
