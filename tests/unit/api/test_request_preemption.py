"""`requestPreemption(job, reason)`: published as RequestPreemption, answered with the ledger's outcome.

Admins may ask for any job, managers for jobs in their subtree; the ledger still refuses inside a job's
protection (a manager cannot break the contract). A refusal of the caller reads the same whether the job
exists or not, and is audited."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from steward.domain.commands import PlaceJob, ReportJobStarted, SubmitJob
from tests.unit.api.harness import Server, serve

MUTATION = """mutation($id: ID!, $reason: String!, $grace: Float! = 30, $attempt: BigInt) {
  requestPreemption(job: $id, reason: $reason, graceS: $grace, attempt: $attempt) { __typename
    ... on PreemptionRequested { attempt requestedAt graceS requeue position job { id state attempt } }
    ... on Rejected { code reason } ... on NotAuthorised { message } ... on InvalidInput { field message } } }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(Path(tmp_path_factory.mktemp("preempt"))) as s:
        # unprotected running jobs (min_runtime 0, unfunded) in a2 (the manager's subtree) and in b1
        for job, project, node, gpus in (("a2-free-1", "a2", "n1", [4]), ("a2-free-2", "a2", "n1", [5]),
                                         ("b1-free", "b1", "n1", [6])):
            s.record([SubmitJob(job, project, 1, 0, ["sleep", "9"]),
                      PlaceJob(job, {node: gpus}, False, {"policy": "test"}),
                      ReportJobStarted(job, 1, 1, started_at=time.time() - 5)])
        yield s


def ask(server: Server, role: str, job: str, reason: str = "make room for the demo", **kw: Any) -> dict[str, Any]:
    body = server.gql(MUTATION, {"id": job, "reason": reason, **kw}, server.tokens[role])
    assert not body.get("errors"), body
    out: dict[str, Any] = body["data"]["requestPreemption"]
    return out


@pytest.mark.parametrize(("role", "job", "expected"), [
    ("admin", "a2-free-1", ("PreemptionRequested", None)),
    ("manager", "a2-free-2", ("PreemptionRequested", None)),  # a2 is in team-a, the manager's subtree
    ("manager", "b1-free", ("NotAuthorised", None)),  # outside the subtree
    ("researcher", "a1-run", ("NotAuthorised", None)),  # researchers cancel their jobs, they do not preempt
    ("auditor", "a1-run", ("NotAuthorised", None)),
    ("admin", "a1-run", ("Rejected", "protected")),  # funded, inside min_runtime: the ledger refuses
    ("manager", "a1-run", ("Rejected", "protected")),
    ("admin", "a1-wait", ("Rejected", "invalid_transition")),  # not running
    ("admin", "no-such-job", ("Rejected", "unknown_job")),
])
def test_who_may_ask_and_what_the_ledger_answers(server: Server, role: str, job: str,
                                                 expected: tuple[str, str | None]) -> None:
    res = ask(server, role, job)
    assert (res["__typename"], res.get("code")) == expected, res
    if res["__typename"] == "PreemptionRequested":
        assert (res["job"]["id"], res["graceS"], res["requeue"]) == (job, 30.0, True)
        events = server.store.stream(f"job-{job}")
        asked = next(e for e in events if e.type == "JobPreemptionRequested")
        assert asked.position == res["position"]
        assert asked.payload["reason"] == "operator"
        assert asked.payload["evidence"]["note"] == "make room for the demo"
        assert asked.metadata["role"] == role
        again = ask(server, "admin", job)  # the saga runs once per attempt
        assert (again["__typename"], again.get("code")) == ("Rejected", "invalid_transition")
    if res["__typename"] == "Rejected" and expected[1] == "protected":
        assert "protected for" in res["reason"]


def test_a_refusal_says_nothing_about_existence_and_is_audited(server: Server) -> None:
    head = server.store.head()
    foreign = ask(server, "manager", "b1-run")
    missing = ask(server, "manager", "no-such-job")
    assert foreign["__typename"] == missing["__typename"] == "NotAuthorised"
    assert foreign["message"].replace("b1-run", "X") == missing["message"].replace("no-such-job", "X")
    denied = [e.payload for e in server.store.read(head) if e.type == "AccessDenied"]
    assert [(d["operation"], d["target"]) for d in denied] == [("requestPreemption", "job:b1-run"),
                                                               ("requestPreemption", "job:no-such-job")]


@pytest.mark.parametrize(("variables", "field"), [({"reason": " "}, "reason"), ({"grace": -1.0}, "graceS"),
                                                  ({"grace": 1e9}, "graceS"), ({"attempt": 0}, "attempt")])
def test_bad_input_is_named(server: Server, variables: dict[str, Any], field: str) -> None:
    res = ask(server, "admin", "a1-run", **variables)
    assert (res["__typename"], res["field"]) == ("InvalidInput", field)


def test_decision_types_are_event_types_the_domain_records() -> None:
    from steward.api.types import DECISION_TYPES
    from steward.domain.events import EVENT_TYPES

    assert set(DECISION_TYPES) <= set(EVENT_TYPES)


def test_a_preemption_request_is_among_the_jobs_decisions_with_its_evidence(server: Server) -> None:
    job = "a2-free-3"
    server.record([SubmitJob(job, "a2", 1, 0, ["sleep", "9"]), PlaceJob(job, {"n1": [7]}, False, {"policy": "test"}),
                   ReportJobStarted(job, 1, 1, started_at=time.time() - 5)])
    assert ask(server, "manager", job)["__typename"] == "PreemptionRequested"
    decisions = server.gql('query($id: ID!) { job(id: $id) { decisions { type actor evidence } } }', {"id": job},
                           server.tokens["auditor"])["data"]["job"]["decisions"]
    assert [d["type"] for d in decisions] == ["JobPlaced", "JobPreemptionRequested"]
    assert decisions[1]["actor"] == "maria" and decisions[1]["evidence"]["note"] == "make room for the demo"


def test_a_request_pinned_to_an_attempt_is_refused_once_the_job_moved_on(server: Server) -> None:
    """Issue 22: `attempt` names the attempt the caller saw; asking again for it after that attempt ended and
    the next one started is refused, where an unpinned request would stop the next attempt."""
    from steward.domain.commands import RegisterNode, ReportHeartbeat, ReportJobLost

    job = "a2-moves-on"
    server.record([RegisterNode("n9", 1, "h100", ["zone-a", "block-9", "n9"])])
    server.record([SubmitJob(job, "a2", 1, 0, ["sleep", "9"]), PlaceJob(job, {"n9": [0]}, False, {"policy": "test"}),
                   ReportJobStarted(job, 1, 1, started_at=time.time() - 5)])
    first = ask(server, "admin", job, attempt=1)
    assert first["__typename"] == "PreemptionRequested", first
    assert (first["attempt"], first["job"]["attempt"]) == (1, 1)
    server.record([ReportJobLost(job, 1, "executor stopped answering"), ReportHeartbeat("local", {}),
                   PlaceJob(job, {"n9": [0]}, False, {"policy": "test"}),
                   ReportJobStarted(job, 2, 2, started_at=time.time())])
    pinned = ask(server, "admin", job, attempt=1)
    assert (pinned["__typename"], pinned["code"]) == ("Rejected", "invalid_transition")
    assert "attempt 2" in pinned["reason"]
    unpinned = ask(server, "admin", job)
    assert (unpinned["__typename"], unpinned["attempt"]) == ("PreemptionRequested", 2)
