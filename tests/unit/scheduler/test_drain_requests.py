"""Drain stops as commands: only for a running attempt, and once per attempt (not every cycle).

The soak (issue 9) killed node agents: jobs PLACED on their nodes (never started) got a drain
`RequestPreemption` every cycle, the ledger refused each ("PLACED, not running") and, a cycle that decided
something being followed at once by the next, the scheduler spun: 1,936 refusals in 3 minutes. A placement
that never started is the JobRun workflow's to report lost (`ReportJobLost`, once, when its executor never
takes the start); the scheduler asks to stop running attempts only, once each.

A node that is unhealthy (its agent lost an attempt and has not spoken since) takes no new work but keeps its
jobs (ADR 0059): nothing is asked of them, running or not.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from steward.domain.commands import (
    Command,
    DrainNode,
    PlaceJob,
    RegisterNode,
    ReportJobLost,
    ReportJobStarted,
    RequestPreemption,
)
from steward.domain.decide import decide_or_reject
from steward.domain.policy_settings import PolicySettings
from steward.domain.state import LedgerState, evolve
from steward.policy.cycle import schedule
from steward.scheduler.bridge import can_be_asked_to_stop, commands_of, snapshot_of
from tests.unit.domain.builders import apply, submit, tree

SETTINGS = PolicySettings.steward()
NOW = 10_000.0


def two_nodes() -> LedgerState:
    state = tree(cluster={"a": 0.5, "b": 0.5}, a={"a1": 1.0}, b={"b1": 1.0})
    # a cluster has one executor (ADR 0091): the two agents' nodes, one block of each's cluster
    return apply(state, RegisterNode("n0", 4, "V100", ["blk0", "n0"], executor="e0", cluster="c0"),
                 RegisterNode("n1", 4, "V100", ["blk0", "n1"], executor="e1", cluster="c1"))


def unhealthy(state: LedgerState, node_id: str) -> LedgerState:
    """As after `JobLost`: the dead agent's nodes take no new work until it heartbeats again."""
    return replace(state, nodes={**state.nodes, node_id: replace(state.nodes[node_id], state="unhealthy")})


def draining(state: LedgerState, node_id: str) -> LedgerState:
    return apply(state, DrainNode(node_id, "repair"), now=NOW - 1)


def placed(state: LedgerState, min_runtime_s: float = 0.0, funded: bool = False) -> LedgerState:
    return apply(state, submit("j", "a1", gpus=2, min_runtime_s=min_runtime_s),
                 PlaceJob("j", {"n0": [0, 1]}, funded=funded), now=NOW - 100)


def running(state: LedgerState) -> LedgerState:
    """Started 100 s ago with a 60 s protection: out of protection now."""
    state = placed(state, min_runtime_s=60.0, funded=True)
    return apply(state, ReportJobStarted("j", 1, 42, started_at=NOW - 100), now=NOW - 100)


def drain_requests(state: LedgerState, asked: set[tuple[str, int]] | None = None) -> list[RequestPreemption]:
    result = schedule(snapshot_of(state, {}, SETTINGS, NOW))
    cmds = commands_of(result, state, SETTINGS.preemption_grace_s, asked)
    return [c for c in cmds if isinstance(c, RequestPreemption) and c.reason == "drain"]


def ledger_outcome(state: LedgerState, command: Command) -> str:
    (event,) = decide_or_reject(state, command, NOW)[:1]
    return event.type


@dataclass(frozen=True)
class Case:
    name: str
    node: str  # unhealthy | draining
    job: str  # placed | running
    asked: int  # drain requests the scheduler publishes
    stopped: bool = True  # the policy wants the job off the node


CASES = [
    Case("placed on a dead agent's node", "unhealthy", "placed", 0, stopped=False),
    Case("placed on a draining node", "draining", "placed", 0),
    Case("running on a dead agent's node, out of protection", "unhealthy", "running", 0, stopped=False),
    Case("running on a draining node, out of protection", "draining", "running", 1),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_drain_stops_are_asked_only_for_running_attempts(case: Case) -> None:
    state = placed(two_nodes()) if case.job == "placed" else running(two_nodes())
    state = unhealthy(state, "n0") if case.node == "unhealthy" else draining(state, "n0")
    # a draining node's job goes (a placed, unfunded job is not protected); an unhealthy node's stays (ADR 0059)
    stops = schedule(snapshot_of(state, {}, SETTINGS, NOW)).stops
    assert [(s.job_id, s.reason) for s in stops] == ([("j", "drain")] if case.stopped else [])
    requests = drain_requests(state)
    assert len(requests) == case.asked
    # and what is asked, the ledger accepts (nothing asked that its rules refuse by construction)
    for request in requests:
        assert ledger_outcome(state, request) == "JobPreemptionRequested"
    if case.job == "placed":
        refused = RequestPreemption("j", "drain", 1, 0.0)
        assert ledger_outcome(state, refused) == "CommandRejected"


def test_a_drain_stop_is_asked_once_per_attempt_not_every_cycle() -> None:
    state = draining(running(two_nodes()), "n0")
    asked: set[tuple[str, int]] = set()
    per_cycle = [len(drain_requests(state, asked)) for _ in range(50)]
    assert per_cycle == [1] + [0] * 49
    assert asked == {("j", 1)}


def test_the_next_attempt_is_asked_again() -> None:
    state = draining(running(two_nodes()), "n0")
    asked: set[tuple[str, int]] = set()
    assert len(drain_requests(state, asked)) == 1
    # the attempt was lost and requeued, placed again on the same node (back in service) and started, and
    # the node is drained again
    state = apply(state, ReportJobLost("j", 1, "heartbeat timeout"), now=NOW)
    state = replace(state, nodes={**state.nodes, "n0": replace(state.nodes["n0"], state="ready")})
    state = apply(state, PlaceJob("j", {"n0": [0, 1]}, funded=True), now=NOW)
    state = apply(state, ReportJobStarted("j", 2, 43, started_at=NOW - 100), now=NOW)
    state = draining(state, "n0")
    (request,) = drain_requests(state, asked)
    assert request.attempt == 2


def test_a_placed_job_that_was_lost_is_requeued_once_by_the_ledger() -> None:
    """The path a never-started placement on a dead agent takes instead: its JobRun reports it lost
    once (evidence: the nodes and executors); a second report of the same attempt is refused."""
    state = unhealthy(placed(two_nodes()), "n0")
    events = decide_or_reject(state, ReportJobLost("j", 1, "executor 'e0' did not start the attempt"), NOW)
    assert [e.type for e in events] == ["JobLost", "JobRequeued"]
    assert events[0].payload["was"] == "PLACED" and events[0].payload["executors"] == ["e0"]
    for e in events:
        state = evolve(state, e, NOW)
    again = decide_or_reject(state, ReportJobLost("j", 1, "again"), NOW)
    assert [e.type for e in again] == ["CommandRejected"]
    assert drain_requests(state) == []


@pytest.mark.parametrize("state_name", ["QUEUED", "PLACED", "RUNNING"])
def test_only_a_running_attempt_without_a_pending_request_can_be_asked_to_stop(state_name: str) -> None:
    job = running(two_nodes()).jobs["j"]
    assert can_be_asked_to_stop(replace(job, state=state_name)) is (state_name == "RUNNING")
    assert not can_be_asked_to_stop(replace(job, preemption_requested_at=NOW))
