"""Sessions, draining and budget periods in the ledger (DESIGN.md "Interactive sessions", "Owed vs
delivered"; issue 3 "Draining")."""

from __future__ import annotations

from typing import Any

import pytest

from steward.domain.budget import Prices, period_bounds, period_figures, period_id
from steward.domain.commands import (
    CancelJob,
    ClosePeriod,
    DrainNode,
    OpenSession,
    PlaceJob,
    ReachSessionCap,
    RegisterNode,
    ReportCheckpointSaved,
    ReportJobExited,
    ReportJobLost,
    ReportJobPreempted,
    ReportJobStarted,
    ReportNodeDrained,
    ReportUtilisation,
    RequestPreemption,
    RestoreSession,
    ResumeNode,
    RetireNode,
    RevokeProtection,
    WarnSession,
)
from steward.domain.decide import decide
from steward.domain.errors import DomainError, InvalidCommand, InvalidTransition, UnknownNode
from steward.domain.state import LedgerState
from tests.unit.domain.builders import apply, events_of, running, small_cluster, submit


def session(at: float = 0.0, cap: float = 60.0, **over: Any) -> LedgerState:
    state = running(at=at, job_class="interactive", min_runtime_s=cap, resumable=True, **over)
    return apply(state, OpenSession("j1", 1, at + cap, [at + cap - 30, at + cap - 5]), now=at + 0.1)


def test_session_is_protected_for_its_cap_and_opened_once() -> None:
    state = session(at=10.0, cap=60.0)
    job = state.jobs["j1"]
    assert job.protected_until == 70.0 and job.session_cap_at == 70.0
    with pytest.raises(InvalidTransition, match="already open"):
        decide(state, OpenSession("j1", 1, 70.0, []), 11.0)


SESSION_CASES: list[tuple[str, Any, type[DomainError], str]] = [
    ("warning of unknown kind", WarnSession("j1", 1, "boredom", 5.0), InvalidCommand, "kind"),
    ("cap with unknown action", ReachSessionCap("j1", 1, "explode"), InvalidCommand, "action"),
    ("stale attempt", WarnSession("j1", 2, "cap", 5.0), InvalidTransition, "attempt"),
    ("revoke without reason", RevokeProtection("j1", 1, " "), InvalidCommand, "reason"),
    ("restore of a running session", RestoreSession("j1", "j2"), InvalidTransition, "RUNNING"),
]


@pytest.mark.parametrize(("name", "command", "error", "message"), SESSION_CASES, ids=[c[0] for c in SESSION_CASES])
def test_session_guards(name: str, command: Any, error: type[DomainError], message: str) -> None:
    with pytest.raises(error, match=message):
        decide(session(), command, 1.0)


def test_session_commands_are_refused_for_batch_jobs() -> None:
    with pytest.raises(InvalidTransition, match="not an interactive session"):
        decide(running(at=0.0), OpenSession("j1", 1, 60.0, []), 1.0)


def test_warnings_are_events_with_the_cap() -> None:
    (ev,) = decide(session(), WarnSession("j1", 1, "cap", 30.0), 30.0)
    assert ev.type == "SessionWarned" and ev.payload["cap_at"] == 60.0 and ev.payload["seconds_left"] == 30.0


def test_cap_ends_protection_and_the_stop_suspends_the_session() -> None:
    state = apply(session(), ReportCheckpointSaved("j1", 1, "/ck/j1", 59.0), ReachSessionCap("j1", 1, "stop"),
                  now=60.0)
    assert state.jobs["j1"].protected_until == 60.0
    with pytest.raises(InvalidTransition, match="already reached"):
        decide(state, ReachSessionCap("j1", 1, "stop"), 61.0)
    events = decide(state, ReportJobPreempted("j1", 1, "session_cap", 0), 62.0)
    assert [e.type for e in events] == ["JobPreempted"] and events[0].payload["requeue"] is False
    state = apply(state, ReportJobPreempted("j1", 1, "session_cap", 0), now=62.0)
    assert state.jobs["j1"].state == "SUSPENDED" and state.free_gpus("n0") == frozenset(range(8))


def test_a_session_cap_stop_before_the_cap_is_refused() -> None:
    with pytest.raises(InvalidTransition, match="not reached its cap"):
        decide(session(), ReportJobPreempted("j1", 1, "session_cap", 0), 10.0)


def test_restore_opens_a_new_session_linked_to_the_old_with_its_checkpoint_and_node() -> None:
    state = apply(session(), ReportCheckpointSaved("j1", 1, "/ck/j1", 59.0), ReachSessionCap("j1", 1, "stop"),
                  ReportJobPreempted("j1", 1, "session_cap", 0), now=60.0)
    events = decide(state, RestoreSession("j1", "j2"), 100.0)
    assert [(e.stream, e.type) for e in events] == [("job-j1", "SessionRestored"), ("job-j2", "JobSubmitted")]
    submitted = events[1].payload
    assert submitted["restored_from"] == "j1" and submitted["resume_from"] == "/ck/j1"
    assert submitted["preferred_node"] == "n0" and submitted["job_class"] == "interactive"
    state = apply(state, RestoreSession("j1", "j2"), now=100.0)
    assert state.jobs["j1"].state == "RESTORED" and state.jobs["j1"].restored_to == "j2"
    assert state.jobs["j2"].state == "QUEUED" and state.jobs["j2"].preferred_node == "n0"
    with pytest.raises(InvalidTransition, match="already restored"):
        decide(state, RestoreSession("j1", "j3"), 101.0)
    placed = decide(state, PlaceJob("j2", {"n0": [0]}, funded=True), 102.0)[0]
    assert placed.payload["resume_from"] == "/ck/j1" and placed.payload["restored_from"] == "j1"


def test_restore_refuses_a_taken_id() -> None:
    state = apply(session(), CancelJob("j1"), submit("j2"), now=5.0)
    with pytest.raises(InvalidCommand, match="already exists"):
        decide(state, RestoreSession("j1", "j2"), 6.0)


def test_idle_and_active_reports_are_recorded_on_change_only() -> None:
    state = session()
    assert events_of(state, ReportUtilisation("j1", 1, False, 3.0), 4.0) == []
    state = apply(state, ReportUtilisation("j1", 1, True, 3.0, cpu_percent=0.0, source="cpu"), now=4.0)
    assert state.jobs["j1"].idle_since == 3.0
    assert events_of(state, ReportUtilisation("j1", 1, True, 3.0), 5.0) == []
    assert events_of(state, ReportUtilisation("j1", 1, False, 6.0), 6.0) == ["SessionActive"]


def test_revoked_protection_makes_a_session_preemptible_and_stays_charged() -> None:
    state = apply(session(cap=3600), RevokeProtection("j1", 1, "idle", {"idle_since": 3.0}), now=100.0)
    job = state.jobs["j1"]
    assert job.protection_revoked and job.protected_until == 100.0 and job.funded
    assert events_of(state, RequestPreemption("j1", "fair_share"), 101.0) == ["JobPreemptionRequested"]
    with pytest.raises(InvalidTransition, match="already lost"):
        decide(state, RevokeProtection("j1", 1, "idle"), 102.0)


def test_drain_takes_no_new_work_and_is_drained_once_empty() -> None:
    state = running(at=0.0)
    (ev,) = decide(state, DrainNode("n0", "disk"), 1.0)
    assert ev.payload["jobs"] == ["j1"]
    state = apply(state, DrainNode("n0", "disk"), submit("j2"), now=1.0)
    assert state.nodes["n0"].state == "draining"
    with pytest.raises(InvalidTransition, match="takes no new work"):
        decide(state, PlaceJob("j2", {"n0": [1]}, funded=True), 2.0)
    with pytest.raises(InvalidTransition, match="still runs j1"):
        decide(state, ReportNodeDrained("n0"), 2.0)
    state = apply(state, ReportJobExited("j1", 1, 0), now=3.0)
    assert events_of(state, ReportNodeDrained("n0"), 4.0) == ["NodeDrained"]
    state = apply(state, ReportNodeDrained("n0"), ResumeNode("n0", "fixed"), now=5.0)
    assert state.nodes["n0"].state == "ready"


def test_a_retired_node_leaves_the_state_once_empty_and_registering_it_again_brings_it_back() -> None:
    """ADR 0078: refused while an attempt holds it (drain first); then gone (never placed on, its GPUs out of
    the used map); a second retirement names it unknown; `RegisterNode` brings it back, ready."""
    state = running(at=0.0)
    with pytest.raises(InvalidTransition, match="still runs j1: drain it first"):
        decide(state, RetireNode("n0", "decommissioned"), 1.0)
    state = apply(state, DrainNode("n0", "decommission"), ReportJobExited("j1", 1, 0), now=2.0)
    (ev,) = decide(state, RetireNode("n0", "decommissioned"), 3.0)
    assert (ev.stream, ev.type) == ("node-n0", "NodeRetired")
    assert ev.payload == {"node_id": "n0", "reason": "decommissioned", "executor": "local", "cluster": "default",
                          "gpus": state.nodes["n0"].gpus, "was": "draining", "retired_at": 3.0}
    state = apply(state, submit("j2"), RetireNode("n0", "decommissioned"), now=3.0)
    assert "n0" not in state.nodes and "n0" not in state.used
    with pytest.raises(UnknownNode):
        decide(state, PlaceJob("j2", {"n0": [0]}, funded=True), 4.0)
    with pytest.raises(UnknownNode):
        decide(state, RetireNode("n0", "again"), 4.0)
    state = apply(state, RegisterNode("n0", 8, "A100", ["z", "n0"]), now=5.0)
    assert state.nodes["n0"].state == "ready"
    assert events_of(state, PlaceJob("j2", {"n0": [0]}, funded=True), 6.0) == ["JobPlaced"]


def two_on_n0() -> LedgerState:
    """j1 and j2 running on n0 (GPUs 0 and 1), j3 running on n1."""
    state = apply(small_cluster(), RegisterNode("n1", 8, "V100", ["b0", "n1"]))
    state = running(state, "j1", at=10.0)
    state = apply(state, submit("j2"), PlaceJob("j2", {"n0": [1]}, funded=True), now=11.0)
    state = apply(state, ReportJobStarted("j2", 1, 4243, started_at=11.0), now=11.0)
    state = apply(state, submit("j3"), PlaceJob("j3", {"n1": [0]}, funded=True), now=12.0)
    return apply(state, ReportJobStarted("j3", 1, 4244, started_at=12.0), now=12.0)


# every way an attempt ends (the commands before the last one lead up to it): the decision that ends the last attempt
# on a retiring node retires it
ENDINGS: list[tuple[str, Any]] = [
    ("completed", lambda job: [ReportJobExited(job, 1, 0)]),
    ("failed", lambda job: [ReportJobExited(job, 1, 3)]),
    ("lost", lambda job: [ReportJobLost(job, 1, "executor stopped answering")]),
    ("cancelled", lambda job: [CancelJob(job, "not needed")]),
    ("preempted", lambda job: [RequestPreemption(job, "drain", 1), ReportJobPreempted(job, 1, "drain", 143)]),
]


@pytest.mark.parametrize(("name", "ending"), ENDINGS, ids=[e[0] for e in ENDINGS])
def test_a_node_retired_when_empty_is_retiring_until_its_last_attempt_ends(name: str, ending: Any) -> None:
    """ADR 0081: `RetireNode(when_empty=True)` on a busy node records `NodeRetirementPending` (the jobs it waits
    for); the node takes no new work; the first attempt's end retires nothing, the last one's end retires it in
    the same decision, whatever ended it (after protection: a preemption needs it); another node's attempts are
    not looked at."""
    state = two_on_n0()
    (ev,) = decide(state, RetireNode("n0", "gone from the Kubernetes inventory", when_empty=True), 20.0)
    assert (ev.stream, ev.type) == ("node-n0", "NodeRetirementPending")
    assert ev.payload == {"node_id": "n0", "reason": "gone from the Kubernetes inventory", "executor": "local",
                          "cluster": "default", "jobs": ["j1", "j2"], "was": "ready", "requested_at": 20.0}
    state = apply(state, RetireNode("n0", "gone", when_empty=True), submit("j4"), now=20.0)
    assert state.nodes["n0"].state == "retiring"
    with pytest.raises(InvalidTransition, match="takes no new work"):
        decide(state, PlaceJob("j4", {"n0": [2]}, funded=True), 21.0)
    with pytest.raises(InvalidTransition, match="already retiring"):
        decide(state, RetireNode("n0", "again", when_empty=True), 21.0)
    with pytest.raises(InvalidTransition, match="not ready"):
        decide(state, DrainNode("n0", "x"), 21.0)
    assert events_of(state, ReportJobExited("j3", 1, 0), 22.0) == ["JobCompleted"]  # n1 is not retiring
    *lead, end = ending("j1")
    state = apply(state, *lead, now=700.0)
    assert "NodeRetired" not in events_of(state, end, 700.0)  # j2 still holds n0
    state = apply(state, end, now=700.0)
    *lead, end = ending("j2")
    for lead_command in lead:  # a preemption's request ends nothing: no retirement yet
        assert "NodeRetired" not in events_of(state, lead_command, 701.0)
        state = apply(state, lead_command, now=701.0)
    last = decide(state, end, 701.0)
    assert [e.type for e in last][-1] == "NodeRetired" and [e.type for e in last].count("NodeRetired") == 1
    retired = last[-1]
    assert retired.stream == "node-n0" and retired.payload["was"] == "retiring"
    assert retired.payload["retired_at"] == 701.0 and "NodeRetirementPending" in retired.payload["reason"]
    state = apply(state, end, now=701.0)
    assert "n0" not in state.nodes and "n0" not in state.used and "n1" in state.nodes  # (a loss marks n1 unhealthy)


def test_a_retirement_when_empty_of_an_idle_node_retires_it_at_once_and_without_it_is_refused_as_before() -> None:
    state = running(at=0.0)
    with pytest.raises(InvalidTransition, match=r"drain it first .* or retire it when its last attempt ends"):
        decide(state, RetireNode("n0", "decommissioned"), 1.0)
    state = apply(state, ReportJobExited("j1", 1, 0), now=2.0)
    assert events_of(state, RetireNode("n0", "decommissioned", when_empty=True), 3.0) == ["NodeRetired"]


def test_no_retiring_node_leaves_every_decision_as_it_was() -> None:
    """The post-step adds nothing where no node is retiring (every log written before ADR 0081)."""
    state = two_on_n0()
    for command in (ReportJobExited("j1", 1, 0), ReportJobLost("j2", 1, "x"), CancelJob("j3", "y")):
        assert "NodeRetired" not in events_of(state, command, 30.0)


NODE_CASES: list[tuple[str, Any, type[DomainError]]] = [
    ("unknown node", DrainNode("n9", "x"), UnknownNode),
    ("retire an unknown node", RetireNode("n9", "x"), UnknownNode),
    ("retire without a reason", RetireNode("n0", " "), InvalidCommand),
    ("no reason", DrainNode("n0", ""), InvalidCommand),
    ("resume a ready node", ResumeNode("n0", "x"), InvalidTransition),
    ("drained when not draining", ReportNodeDrained("n0"), InvalidTransition),
]


@pytest.mark.parametrize(("name", "command", "error"), NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_node_guards(name: str, command: Any, error: type[DomainError]) -> None:
    with pytest.raises(error):
        decide(small_cluster(), command, 0.0)


def _history() -> list[tuple[str, dict[str, Any], float]]:
    """Two projects sharing 8 GPUs 50/50 (a1 via a at 0.6 × 1.0 -> share .6; b1 .4 × .5 = .2)."""
    return [
        ("AllocationsSet", {"parent": "cluster", "shares": {"a": 0.6, "b": 0.4}}, 0.0),
        ("AllocationsSet", {"parent": "a", "shares": {"a1": 1.0}}, 0.0),
        ("AllocationsSet", {"parent": "b", "shares": {"b1": 0.5}}, 0.0),
        ("NodeRegistered", {"node_id": "n0", "gpus": 8}, 0.0),
        ("JobSubmitted", {"job_id": "x", "project": "a1", "gpus": 8}, 0.0),
        ("JobStarted", {"job_id": "x"}, 1800.0),
        ("JobCompleted", {"job_id": "x"}, 5400.0),
        ("JobSubmitted", {"job_id": "y", "project": "b1", "gpus": 2}, 3600.0),
        ("JobStarted", {"job_id": "y"}, 5400.0),
    ]


def test_owed_is_min_of_entitled_and_demand_per_hour_and_delivered_is_what_ran() -> None:
    figures, capacity = period_figures(_history(), 0.0, 7200.0)
    assert capacity == 8 * 7200
    a1, b1 = figures["a1"], figures["b1"]
    # a1: demand 8 GPUs for 1.5 h (0 .. 5400); entitled 0.6 × 8 = 4.8 GPUs per hour
    assert a1["demand_gpu_s"] == pytest.approx(8 * 5400)
    assert a1["owed_gpu_s"] == pytest.approx(4.8 * 3600 + min(4.8 * 3600, 8 * 1800))
    assert a1["delivered_gpu_s"] == pytest.approx(8 * 3600)
    # b1: wants 2 GPUs from 1 h, runs from 1.5 h; entitled 0.2 × 8 = 1.6 per hour
    assert b1["owed_gpu_s"] == pytest.approx(1.6 * 3600)
    assert b1["delivered_gpu_s"] == pytest.approx(2 * 1800)
    assert figures["a"]["delivered_gpu_s"] == a1["delivered_gpu_s"]  # inner nodes sum their projects


def test_a_retired_node_s_gpus_leave_the_entitlement_from_its_retirement() -> None:
    """ADR 0078: a second node of 8 GPUs retired after the first hour counts for that hour only."""
    history = [*_history()[:4], ("NodeRegistered", {"node_id": "n1", "gpus": 8}, 0.0),
               ("NodeRetired", {"node_id": "n1", "reason": "gone"}, 3600.0),
               ("NodeRetired", {"node_id": "n9", "reason": "never registered"}, 3600.0),
               ("JobSubmitted", {"job_id": "x", "project": "a1", "gpus": 16}, 0.0)]
    figures, _ = period_figures(history, 0.0, 7200.0)
    assert figures["a1"]["entitled_gpu_s"] == pytest.approx(0.6 * 16 * 3600 + 0.6 * 8 * 3600)


def test_a_place_whose_last_node_is_retired_no_longer_values_demand() -> None:
    """ADR 0078: demand is valued at the cheapest place with registered capacity; a (cluster, model) whose last
    node is retired leaves that set from the retirement (another node of it keeps it), and comes back with a
    node registered again; a past placement on the retired node keeps its place."""
    prices = Prices()
    for node, model in (("a1", "A100"), ("a2", "A100"), ("h1", "H100")):
        prices.see("NodeRegistered", {"node_id": node, "gpus": 8, "gpu_model": model}, 0.0)
    prices.see("NodeRetired", {"node_id": "a1"}, 10.0)
    prices.see("NodeRetired", {"node_id": "a2"}, 20.0)
    prices.see("NodeRetired", {"node_id": "zz"}, 25.0)  # never registered: nothing changes
    prices.see("NodeRegistered", {"node_id": "a2", "gpus": 8, "gpu_model": "A100"}, 30.0)
    both, h100 = frozenset({("default", "A100"), ("default", "H100")}), frozenset({("default", "H100")})
    assert [(lo, hi, places) for lo, hi, _, places in prices.segments(0.0, 40.0)] == [
        (0.0, 20.0, both), (20.0, 30.0, h100), (30.0, 40.0, both)]
    assert prices.nodes["a1"] == ("default", "A100")


def test_period_close_is_recorded_with_the_aggregate_ratio() -> None:
    figures, capacity = period_figures(_history(), 0.0, 7200.0)
    (ev,) = decide(small_cluster(), ClosePeriod("p1", 0.0, 7200.0, capacity, figures), 7300.0)
    assert ev.type == "PeriodClosed" and 0 < ev.payload["delivered_of_owed"] <= 1


@pytest.mark.parametrize(("name", "command", "message"), [
    ("empty period", ClosePeriod("p", 5.0, 5.0, 0.0, {}), "after its start"),
    ("negative figure", ClosePeriod("p", 0.0, 1.0, 1.0, {"a1": {"owed_gpu_s": -1, "delivered_gpu_s": 0}}),
     "negative"),
    ("missing figure", ClosePeriod("p", 0.0, 1.0, 1.0, {"a1": {"owed_gpu_s": 1}}), "delivered_gpu_s"),
])
def test_period_guards(name: str, command: ClosePeriod, message: str) -> None:
    with pytest.raises(InvalidCommand, match=message):
        decide(small_cluster(), command, 0.0)


def test_periods_are_aligned_so_every_closer_agrees() -> None:
    assert period_bounds(90_000.0, 86_400.0) == (0.0, 86_400.0)
    assert period_id(0.0, 86_400.0) == "19700101T000000Z-19700102T000000Z"


def test_an_allocation_counts_from_its_event_time_within_the_hour() -> None:
    history: list[tuple[str, dict[str, Any], float]] = [("NodeRegistered", {"node_id": "n0", "gpus": 8}, 0.0),
                                                        ("AllocationsSet", {"parent": "cluster", "shares": {"a1": 0.5}},
                                                         1800.0)]
    figures, capacity = period_figures(history, 0.0, 3600.0)
    assert capacity == 8 * 3600 and figures["a1"]["entitled_gpu_s"] == pytest.approx(0.5 * 8 * 1800)
