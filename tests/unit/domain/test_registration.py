"""Registering a node (ADR 0082): registering a registered node again keeps the state its operator gave it
(draining, retiring) whatever the registration changes, and a node has at most `MAX_NODE_GPUS` GPUs; both rules
are rules version 4, so a decision recorded under version 3 is decided as it was (ready, any count)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.domain import rules_version
from steward.domain.clusters import MAX_NODE_GPUS
from steward.domain.commands import (
    DrainNode,
    PlaceJob,
    RegisterNode,
    ReportJobExited,
    ReportNodeDrained,
    ResumeNode,
    RetireNode,
)
from steward.domain.decide import decide, decide_or_reject
from steward.domain.errors import InvalidCommand, InvalidTransition
from steward.domain.state import LedgerState, evolve
from steward.store.projector import Projector, node_row
from tests.unit.domain.builders import apply, events_of, running, small_cluster, submit

SAME = RegisterNode("n0", 8, "V100", ["b0", "n0"])  # n0 as `small_cluster` registered it

# what a registration may change about a node: each keeps the operator's state all the same
CHANGES: list[tuple[str, RegisterNode]] = [
    ("unchanged", SAME),
    ("gpus", replace(SAME, gpus=4)),
    ("model", replace(SAME, gpu_model="A100")),
    ("path", replace(SAME, path=["b9", "n0"])),
    ("cluster", replace(SAME, cluster="west")),
    ("executor", replace(SAME, executor="slurm-a")),
]


def draining() -> LedgerState:
    return apply(running(at=0.0), DrainNode("n0", "fan failing"), now=1.0)


def retiring() -> LedgerState:
    return apply(running(at=0.0), RetireNode("n0", "decommissioned", when_empty=True), now=1.0)


def unhealthy() -> LedgerState:
    state = small_cluster()
    return replace(state, nodes={**state.nodes, "n0": replace(state.nodes["n0"], state="unhealthy")})


# (the node's state before, how to get there, its state after a registration, the payload's `state`)
STATES: list[tuple[str, Any, str, str | None]] = [
    ("ready", small_cluster, "ready", None),
    ("draining", draining, "draining", "draining"),
    ("retiring", retiring, "retiring", "retiring"),
    ("unhealthy", unhealthy, "ready", None),  # the executor's view, not an operator's: as before
]


@pytest.mark.parametrize(("before", "build", "after", "recorded"), STATES, ids=[s[0] for s in STATES])
@pytest.mark.parametrize(("what", "command"), CHANGES, ids=[c[0] for c in CHANGES])
def test_a_registration_keeps_the_operator_s_state_and_changes_what_the_node_is(
        before: str, build: Any, after: str, recorded: str | None, what: str, command: RegisterNode) -> None:
    state = build()
    assert state.nodes["n0"].state == before
    (ev,) = decide(state, command, 2.0)
    assert ev.type == "NodeRegistered" and ev.payload.get("state") == recorded
    node = evolve(state, ev, 2.0).nodes["n0"]
    assert node.state == after
    assert (node.gpus, node.gpu_model, list(node.path), node.executor) == (
        command.gpus, command.gpu_model, command.path, command.executor)
    assert node.cluster == (command.cluster or "default")


@pytest.mark.parametrize(("before", "build", "after", "recorded"), STATES, ids=[s[0] for s in STATES])
def test_under_rules_3_a_registration_makes_the_node_ready_as_it_did(
        before: str, build: Any, after: str, recorded: str | None) -> None:
    """A log recorded before ADR 0082 replays as it was decided: the payload without `state`, the node ready."""
    (ev,) = decide(build(), SAME, 2.0, rules=3)
    assert ev.payload == {"node_id": "n0", "gpus": 8, "gpu_model": "V100", "path": ["b0", "n0"], "executor": "local"}
    assert evolve(build(), ev, 2.0).nodes["n0"].state == "ready"


def test_a_drained_node_registered_again_takes_no_work_until_it_is_resumed() -> None:
    """The defect: `steward cluster apply` (or an executor's changed registration) un-drained a node drained for
    repair, and the scheduler placed on it."""
    state = apply(draining(), ReportJobExited("j1", 1, 0), ReportNodeDrained("n0"), submit("j2"), now=2.0)
    state = apply(state, SAME, replace(SAME, gpus=4), now=3.0)
    assert state.nodes["n0"].state == "draining"
    with pytest.raises(InvalidTransition, match="takes no new work"):
        decide(state, PlaceJob("j2", {"n0": [0]}, funded=True), 4.0)
    state = apply(state, ResumeNode("n0", "fan replaced"), now=5.0)
    assert state.nodes["n0"].state == "ready"
    assert events_of(state, PlaceJob("j2", {"n0": [0]}, funded=True), 6.0) == ["JobPlaced"]


def test_a_retiring_node_registered_again_is_still_retired_by_its_last_attempt_s_end() -> None:
    state = apply(retiring(), replace(SAME, gpus=4, path=["b9", "n0"]), now=2.0)
    assert state.nodes["n0"].state == "retiring"
    assert events_of(state, ReportJobExited("j1", 1, 0), 3.0) == ["JobCompleted", "NodeRetired"]


def test_a_retired_node_registered_again_comes_back_new_and_ready() -> None:
    state = apply(draining(), ReportJobExited("j1", 1, 0), RetireNode("n0", "gone"), now=2.0)
    (ev,) = decide(state, SAME, 3.0)
    assert "state" not in ev.payload and evolve(state, ev, 3.0).nodes["n0"].state == "ready"


def test_the_projector_s_node_row_agrees_with_the_fold() -> None:
    """The nodes table is the domain's fold (the projector calls `evolve`): a kept state is in the row."""
    proj = Projector()
    state = LedgerState()
    commands = [RegisterNode("n0", 8, "V100", ["b0", "n0"]), DrainNode("n0", "repair"), replace(SAME, gpus=4)]
    for pos, cmd in enumerate(commands, 1):
        for ev in decide(state, cmd, float(pos)):
            state = evolve(state, ev, float(pos))
            proj.apply(ev, float(pos), pos)
    assert node_row(proj.nodes["n0"], 3) == node_row(state.nodes["n0"], 3)
    assert node_row(proj.nodes["n0"], 3)["state"] == "draining" and proj.nodes["n0"].gpus == 4


BOUND: list[tuple[int, bool]] = [(1, True), (8, True), (MAX_NODE_GPUS, True), (MAX_NODE_GPUS + 1, False),
                                 (80_000, False), (2**31 - 1, False), (2**63, False)]


@pytest.mark.parametrize(("gpus", "accepted"), BOUND)
def test_a_node_has_at_most_the_bound_of_gpus(gpus: int, accepted: bool) -> None:
    (ev,) = decide_or_reject(LedgerState(), RegisterNode("big", gpus, "H100", ["b0", "big"]), 1.0)
    if accepted:
        assert ev.type == "NodeRegistered" and ev.payload["gpus"] == gpus
    else:
        assert ev.type == "CommandRejected" and ev.payload["code"] == InvalidCommand.code
        assert ev.payload["reason"] == (f"node 'big' has {gpus:,} GPUs: a node has at most 1,024 GPUs (servers hold "
                                        "8 to 16; GPU sharing may advertise more, up to this bound): check the count")


@pytest.mark.parametrize(("gpus", "accepted"), BOUND)
def test_under_rules_3_any_count_of_gpus_was_registered(gpus: int, accepted: bool) -> None:
    (ev,) = decide_or_reject(LedgerState(), RegisterNode("big", gpus, "H100", ["b0", "big"]), 1.0, rules=3)
    assert ev.type == "NodeRegistered"


def test_a_refused_count_leaves_the_registered_node_as_it_was() -> None:
    state = draining()
    (ev,) = decide_or_reject(state, replace(SAME, gpus=80_000), 2.0)
    assert ev.type == "CommandRejected" and "80,000 GPUs" in ev.payload["reason"]


@given(gpus=st.integers(min_value=-(2**64), max_value=2**64))
def test_a_count_is_registered_exactly_when_it_is_between_1_and_the_bound(gpus: int) -> None:
    (ev,) = decide_or_reject(LedgerState(), RegisterNode("n", gpus, "H100", ["b", "n"]), 1.0)
    assert (ev.type == "NodeRegistered") is (1 <= gpus <= MAX_NODE_GPUS)


@pytest.mark.parametrize("name", ["registration_keeps_state", "node_gpus_bounded"])
def test_both_changes_are_rules_version_4(name: str) -> None:
    assert not rules_version.patched(name, 3) and rules_version.patched(name, 4)
    assert rules_version.CURRENT >= 4 and rules_version.LAST_UNRECORDED == 3
