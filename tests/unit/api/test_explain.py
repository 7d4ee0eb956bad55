"""whyPending / whyPreempted: recorded explanations win over derived ones; derived ones name the gang's
shortfall and the place in the queue."""

from __future__ import annotations

from typing import Any

import pytest

from steward.api.explain import why_pending, why_preempted
from steward.api.readmodel import ReadView
from steward.store.eventstore import RecordedEvent

NODES = [{"node_id": "n1", "gpus": 8, "state": "ready"}, {"node_id": "n2", "gpus": 8, "state": "ready"}]


def job(job_id: str, gpus: int, state: str = "QUEUED", submitted: float = 1.0, **kw: Any) -> dict[str, Any]:
    return {"job_id": job_id, "project": "p", "gpus": gpus, "state": state, "priority": 0,
            "submitted_at": submitted, "assignments": {}, **kw}


def rec(position: int, type_: str, payload: dict[str, Any]) -> RecordedEvent:
    return RecordedEvent(position, "job-x", position, type_, 1, payload, {}, None, 0.0, "", "")


def snap(*jobs: dict[str, Any]) -> ReadView:
    return ReadView(10, [], NODES, list(jobs))


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
    assert (why.reason, why.source, why.evidence["victim_rank"]) == ("fair_share", "recorded", 1)
    assert why.evidence["preemption"]["beneficiary_job_id"] == "y"
    assert why_preempted(job("x", 1), []).reason == "not_preempted"


SCHEDULER_REQUEST = {"job_id": "x", "attempt": 1, "reason": "fair_share", "for_job_id": "y", "requested_at": 100.0,
                     "grace_s": 120.0, "requeue": True,
                     "evidence": {"waiting": {"job_id": "y", "project": "a2", "gpus": 8},
                                  "churn": {"rule": "preemption_worth_its_cost", "gain_gpu_s": 28800.0,
                                            "cost_gpu_s": 3600.0},
                                  "lost_gpu_s": 3600.0}}
MOVE_REQUEST = {"job_id": "x", "attempt": 1, "reason": "unfunded", "for_job_id": "y", "requested_at": 100.0,
                "grace_s": 20.0, "requeue": True,
                "evidence": {"rule": "consolidate_idle_capacity",
                             "waiting": {"job_id": "y", "project": "guest01", "gpus": 8, "free_gpus_on_node": 7},
                             "churn": {"rule": "preemption_worth_its_cost", "gain_gpu_s": 14240.0,
                                       "cost_gpu_s": 120.0},
                             "lost_gpu_s": 60.0}}
MANAGER_REQUEST = {"job_id": "x", "attempt": 1, "reason": "operator", "for_job_id": "", "requested_at": 100.0,
                   "grace_s": 60.0, "requeue": True,
                   "evidence": {"requested_by": "maria", "role": "manager", "note": "room for the review"}}
STOPPED = {"job_id": "x", "attempt": 1, "reason": "fair_share", "requeue": True,
           "evidence": {"stopped_at": 220.0, "requested_at": 100.0, "for_job_id": "y"}}


@pytest.mark.parametrize(("events", "story", "words"), [
    ([("JobPreemptionRequested", SCHEDULER_REQUEST), ("JobPreempted", STOPPED)],
     {"beneficiary_job_id": "y", "beneficiary_allocation": "a2", "beneficiary_gpus": 8, "gain_gpu_s": 28800.0,
      "cost_gpu_s": 3600.0, "requested_at": 100.0, "stopped_at": 220.0, "note": None},
     ["job x was preempted (fair share)", "to make room for job y in allocation a2, 8 GPUs",
      "it gained 8.00 GPU-h of earlier start against 1.00 GPU-h of work lost here"]),
    ([("JobPreemptionRequested", SCHEDULER_REQUEST)],
     {"beneficiary_job_id": "y", "stopped_at": None, "grace_s": 120.0},
     ["job x is being preempted (fair share)", "job y in allocation a2"]),
    # a consolidation move (ADR 0034, 0044): moved, not preempted, and for whom
    ([("JobPreemptionRequested", MOVE_REQUEST), ("JobPreempted", STOPPED | {"reason": "unfunded"})],
     {"moved": True, "beneficiary_job_id": "y", "beneficiary_gpus": 8},
     ["job x was moved: it ran unfunded on idle capacity",
      "gathered for job y in allocation guest01 of 8 GPUs, which fitted on no node",
      "it restarts at once on idle GPUs of another node",
      "it gained 3.96 GPU-h of earlier start against 0.03 GPU-h of work lost here"]),
    ([("JobPreemptionRequested", MOVE_REQUEST)], {"moved": True, "stopped_at": None}, ["job x is being moved:"]),
    ([("JobPreemptionRequested", SCHEDULER_REQUEST), ("JobPreempted", STOPPED)], {"moved": False},
     ["job x was preempted (fair share)"]),
    ([("JobPreemptionRequested", MANAGER_REQUEST), ("JobPreempted", STOPPED | {"reason": "operator",
                                                                               "evidence": {"stopped_at": 160.0}})],
     {"beneficiary_job_id": None, "requested_by": "maria", "requested_role": "manager",
      "note": "room for the review", "stopped_at": 160.0},
     ['job x was preempted (operator)', 'asked by maria (manager): "room for the review"']),
])
def test_why_preempted_says_who_gained_by_how_much_and_the_note(
        events: list[tuple[str, dict[str, Any]]], story: dict[str, Any], words: list[str]) -> None:
    why = why_preempted(job("x", 1, "PREEMPTED"), [rec(i + 1, t, p) for i, (t, p) in enumerate(events)])
    got = why.evidence["preemption"]
    assert {k: got[k] for k in story} == story
    for w in words:
        assert w in why.text, why.text
    assert "100.0" not in why.text and "220" not in why.text  # no epoch floats in the words
