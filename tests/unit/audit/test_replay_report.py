"""`steward audit replay`'s report (issue 19): every decision is counted as reproduced, different or
unreplayable, however many; the listed ones say where (position, command), what (recorded and replayed
events) and the first field where they part, or why the decision cannot be replayed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from steward.audit.replay import first_difference, replay, replay_records
from steward.domain.events import Event
from steward.store.eventstore import EventStore, RecordedEvent
from steward.store.migrate import upgrade
from tests.unit.store.contract import run_history


@pytest.fixture()
def log(tmp_path: Path) -> list[RecordedEvent]:
    url = f"sqlite:///{tmp_path / 's.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    run_history(store, jobs=12)
    assert replay(store)["ok"]
    return store.read()


def _edit(rec: RecordedEvent, **changes: Any) -> RecordedEvent:
    return dataclasses.replace(rec, **changes)


def test_a_difference_names_its_position_command_events_and_first_field(log: list[RecordedEvent]) -> None:
    i, placed = next((i, r) for i, r in enumerate(log) if r.type == "JobPlaced")
    # the command is read back from the event, but its attempt is the ledger's to decide
    log[i] = _edit(placed, payload=placed.payload | {"attempt": 7})
    rep = replay_records(log)
    # the job's next decisions were taken on attempt 1: they differ too, each listed
    assert (rep["ok"], rep["different"], rep["unreplayable"]) == (False, 3, 0)
    assert rep["reproduced"] == rep["decisions"] - 3 and len(rep["differences"]) == 3
    diff = rep["differences"][0]
    assert diff["position"] == placed.position and diff["command"] == "PlaceJob"
    assert diff["first_difference"] == "event 1 (JobPlaced) payload.attempt: recorded 7, replayed 1"
    assert diff["recorded"][0]["payload"]["attempt"] == 7 and diff["replayed"][0]["payload"]["attempt"] == 1
    assert diff["replayed"][0]["type"] == "JobPlaced"


def test_an_unreplayable_decision_says_why_and_every_one_is_counted(log: list[RecordedEvent]) -> None:
    broken = 0
    for i, rec in enumerate(log):
        if rec.type == "JobCompleted":  # the exit code is the command's: without it, no command
            log[i] = _edit(rec, payload={k: v for k, v in rec.payload.items() if k != "exit_code"})
            broken += 1
    assert broken > 3
    rep = replay_records(log, limit=2)
    assert rep["unreplayable"] == broken and rep["different"] == 0  # counted beyond the two listed
    assert rep["reproduced"] + rep["unreplayable"] == rep["decisions"]
    first, _ = rep["unreplayable_decisions"]
    assert first["command"] == "ReportJobExited" and first["position"] == next(
        r.position for r in log if r.type == "JobCompleted")
    assert first["reason"] == "ReportJobExited: missing field 'exit_code'"


def test_an_event_that_cannot_be_folded_is_named_not_a_traceback(log: list[RecordedEvent]) -> None:
    i, submitted = next((i, r) for i, r in enumerate(log) if r.type == "JobSubmitted")
    log[i] = _edit(submitted, payload={k: v for k, v in submitted.payload.items() if k != "project"})
    rep = replay_records(log)
    assert not rep["ok"] and rep["unreplayable"] >= 1
    assert rep["unreplayable_decisions"][0] == {
        "position": submitted.position, "message_id": submitted.message_id, "command": "SubmitJob",
        "recorded_at": submitted.recorded_at, "reason": "SubmitJob: missing field 'project'"}
    assert rep["unfolded"] == 1
    assert rep["unfolded_events"] == [{"position": submitted.position, "type": "JobSubmitted",
                                       "reason": "KeyError: 'project'"}]


def test_a_decision_the_policy_now_refuses_says_so() -> None:
    recorded = [Event("job-j", "JobPlaced", {"job_id": "j"})]
    replayed = [Event("job-j", "CommandRejected", {"reason": "GPUs [0] on 'n1' are not free"})]
    assert first_difference(recorded, replayed) == \
        "event 1: recorded JobPlaced on job-j, replayed CommandRejected on job-j (GPUs [0] on 'n1' are not free)"
    assert first_difference(recorded * 2, recorded) == "recorded 2 events, replayed 1: not replayed JobPlaced"
    assert first_difference([], recorded) == "recorded 0 events, replayed 1: replayed besides JobPlaced"
    assert first_difference([Event("s", "T", {"a": [1, 2]})], [Event("s", "T", {"a": [1, 3], "b": 1})]) == \
        'event 1 (T) payload.a[1]: recorded 2, replayed 3'
    assert first_difference([Event("s", "T", {"a": 1})], [Event("s", "T", {"a": 1, "b": None})]) == \
        'event 1 (T) payload.b: recorded "(absent)", replayed null'
