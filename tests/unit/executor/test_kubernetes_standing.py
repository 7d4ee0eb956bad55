"""What the Kubernetes executor reads back from Steward (ADR 0054, ADR 0056): the recorded namespace mappings,
each waiting job's position and reason and the submissions the ledger rejected, and how a pod is told (only
when it changed)."""

from __future__ import annotations

from typing import Any

import pytest

from steward.executor.kubernetes_pods import JOB_LABEL, MESSAGE_MAX, queued_message, rejected_message, waiting_pods
from steward.executor.kubernetes_steward import Rejection, Standing, Waiting, standing_of


@pytest.mark.parametrize(("args", "expected"), [
    (("j",), "queued in Steward as job j; evidence: steward explain j"),
    (("j", 3, 12), "queued in Steward as job j: position 3 of 12; evidence: steward explain j"),
    (("j", 1, 1, "insufficient_capacity", "needs 4 more GPUs in one node"),
     "queued in Steward as job j: position 1 of 1; insufficient_capacity: needs 4 more GPUs in one node; "
     "evidence: steward explain j"),
    (("j", 2, 5, "over_budget"),
     "queued in Steward as job j: position 2 of 5; over_budget; evidence: steward explain j"),
])
def test_a_waiting_pod_is_told_its_place_reason_and_the_evidence(args: tuple[Any, ...], expected: str) -> None:
    assert queued_message(*args) == expected


def test_a_long_reason_is_cut_and_the_pointer_kept() -> None:
    message = queued_message("j", 1, 2, "r", "x" * 5000)
    assert len(message) <= MESSAGE_MAX and message.endswith("...; evidence: steward explain j")


def _pod(name: str, job: str = "", node: str = "", phase: str = "Pending", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "team", "labels": {JOB_LABEL: job} if job else {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def test_only_submitted_unbound_live_pods_wait() -> None:
    pods = [_pod("a", "j1"), _pod("b"), _pod("c", "j3", node="n1"), _pod("d", "j4", phase="Failed"),
            _pod("e", "j5", deleting=True)]
    assert [(p["metadata"]["name"], j) for p, j in waiting_pods(pods)] == [("a", "j1")]


@pytest.mark.parametrize(("data", "expected"), [
    ({}, Standing()),
    ({"namespaceMappings": [{"namespace": "team-a", "project": "vision"}, {"namespace": "x", "project": ""}],
      "queue": {"waiting": 7, "entries": [
          {"position": 1, "job": None, "reason": None, "text": None},  # another tenant's: not shown to us
          {"position": 2, "job": {"id": "k8s.team.a"}, "reason": "insufficient_capacity", "text": "needs 2"}]}},
     Standing({"team-a": "vision"}, {"k8s.team.a": Waiting(2, 7, "insufficient_capacity", "needs 2")})),
])
def test_the_apis_answer_is_read(data: dict[str, Any], expected: Standing) -> None:
    assert standing_of(data) == expected


def _rejected(stream: str, actor: str = "executor:k8s", command: str = "SubmitJob", code: str = "namespace_not_mapped",
              reason: str = "namespace team of cluster k8s is not mapped to a project") -> dict[str, Any]:
    return {"node": {"streamId": stream, "payload": {"command": command, "code": code, "reason": reason},
                     "metadata": {"actor": actor}}}


@pytest.mark.parametrize(("page", "expected", "cursor"), [
    (None, {}, None),
    ({"edges": [], "pageInfo": {"endCursor": "ZXY6MTI="}}, {}, "ZXY6MTI="),
    ({"edges": [_rejected("job-k8s.team.a"),
                _rejected("job-k8s.team.b", code="unknown_project", reason="unknown project 'ghost'"),
                _rejected("job-k8s.team.c", actor="alice"),  # a user's job that happens to share the prefix
                _rejected("job-k8s.team.d", command="CancelJob"),  # a cancel refused: no submission rejected
                ], "pageInfo": {"endCursor": "c2"}},
     {"k8s.team.a": Rejection("namespace_not_mapped", "namespace team of cluster k8s is not mapped to a project"),
      "k8s.team.b": Rejection("unknown_project", "unknown project 'ghost'")}, "c2"),
])
def test_the_executors_rejected_submissions_are_read(page: dict[str, Any] | None, expected: dict[str, Rejection],
                                                     cursor: str | None) -> None:
    """ADR 0056: the `CommandRejected` events of the executor's own `SubmitJob`s, by job id, and where to read on."""
    standing = standing_of({"rejected": page}, "executor:k8s")
    assert (standing.rejected, standing.cursor) == (expected, cursor)


def test_a_rejected_pod_is_told_why_and_what_to_do_within_an_events_length() -> None:
    assert rejected_message("k8s.team.a", "namespace_not_mapped", "namespace team is not mapped") == (
        "Steward rejected job k8s.team.a: namespace team is not mapped (namespace_not_mapped); fix it and create "
        "the pod again")
    long = rejected_message("j", "invalid_input", "x" * 5000)
    assert len(long) <= MESSAGE_MAX and long.endswith("... (invalid_input); fix it and create the pod again")
