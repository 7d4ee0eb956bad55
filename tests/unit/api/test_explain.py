"""whyPending / whyPreempted: recorded explanations win over derived ones; derived ones name the gang's
shortfall and the place in the queue."""

from __future__ import annotations

from typing import Any

from steward.api.explain import why_pending, why_preempted
from steward.api.readmodel import Snapshot
from steward.store.eventstore import RecordedEvent

NODES = [{"node_id": "n1", "gpus": 8, "state": "ready"}, {"node_id": "n2", "gpus": 8, "state": "ready"}]


def job(job_id: str, gpus: int, state: str = "QUEUED", submitted: float = 1.0, **kw: Any) -> dict[str, Any]:
    return {"job_id": job_id, "project": "p", "gpus": gpus, "state": state, "priority": 0,
            "submitted_at": submitted, "assignments": {}, **kw}


def rec(position: int, type_: str, payload: dict[str, Any]) -> RecordedEvent:
    return RecordedEvent(position, "job-x", position, type_, 1, payload, {}, None, 0.0, "", "")


def snap(*jobs: dict[str, Any]) -> Snapshot:
    return Snapshot(10, [], NODES, list(jobs))


def test_derived_shortfall_on_one_node_and_position() -> None:
    running = job("r", 6, "RUNNING", assignments={"n1": [0, 1, 2, 3, 4, 5]})
    other = job("o", 4, "RUNNING", assignments={"n2": [0, 1, 2, 3]})
    w = job("w", 8, submitted=2.0)
    why = why_pending(w, [], snap(running, other, job("first", 1), w))
    assert (why.reason, why.blocking_gpus, why.blocking_scope, why.position, why.source) == \
        ("insufficient_capacity", 4, "one node", 2, "derived")
    assert "needs 4 more GPUs in one node" in why.text


def test_derived_too_large_and_room_exists() -> None:
    assert why_pending(job("big", 40), [], snap(job("big", 40))).reason == "too_large"
    assert why_pending(job("s", 2), [], snap(job("s", 2))).reason == "waiting_for_cycle"
    assert why_pending(job("done", 2, "COMPLETED"), [], snap()).reason == "not_waiting"


def test_recorded_explanation_wins_while_it_is_the_latest_word() -> None:
    w = job("w", 8)
    explained = rec(5, "JobDeferred", {"job_id": "w", "explanation": {
        "reason": "outranked", "text": "allocation p ranked 3 of 4", "blocking_gpus": 8, "blocking_scope": "one node",
        "blocking_until": 99.0, "position": 7, "position_in_project": 2, "evidence": {"rank": {"of": 4}}}})
    why = why_pending(w, [rec(1, "JobSubmitted", {}), explained], snap(w))
    # the reason and the amount blocking are the scheduler's as recorded; the position is the queue's now
    # (the recorded one, 7, was true when recorded: an explanation is re-recorded only when its reason moves)
    assert (why.reason, why.text, why.source, why.blocking_gpus, why.position, why.evidence) == \
        ("outranked", "allocation p ranked 3 of 4", "recorded", 8, 1, {"rank": {"of": 4}})
    later = rec(6, "JobRequeued", {"job_id": "w"})
    assert why_pending(w, [explained, later], snap(w)).source == "derived"


def test_preemption_evidence_from_the_recorded_event() -> None:
    events = [rec(3, "JobPreemptionRequested", {"job_id": "x", "reason": "fair_share", "for_job_id": "y",
                                                "evidence": {"victim_rank": 1}})]
    why = why_preempted(job("x", 1, "RUNNING"), events)
    assert (why.reason, why.source, why.evidence) == ("fair_share", "recorded", {"victim_rank": 1})
    assert why_preempted(job("x", 1), []).reason == "not_preempted"
