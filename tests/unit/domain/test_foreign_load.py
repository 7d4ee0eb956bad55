"""Issue 23 / DESIGN.md "Executors": work another scheduler placed (a job submitted to Slurm outside Steward) is
foreign load. An executor's heartbeat names the GPUs it holds per node (`foreign`); the ledger counts them busy
(no placement on them, the policy sees the node without them) until a heartbeat no longer names the node, and
Steward never preempts them (they are no job of its)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.domain.commands import PlaceJob, ReportHeartbeat
from steward.domain.decide import decide
from steward.domain.errors import CapacityConflict, InvalidCommand
from steward.domain.state import LedgerState
from steward.scheduler.bridge import policy_node
from tests.unit.domain.builders import apply, place, submit, tree, with_nodes


def cluster() -> LedgerState:
    return with_nodes(tree(cluster={"a": 1.0}, a={"a1": 1.0}), count=2)


def beat(foreign: dict[str, Any], executor: str = "local") -> ReportHeartbeat:
    return ReportHeartbeat(executor, {}, [], [], foreign)


def test_foreign_gpus_are_busy_until_a_heartbeat_no_longer_names_the_node() -> None:
    state = apply(cluster(), beat({"n0": 6}), submit("j1", gpus=4), now=10.0)
    assert {n.node_id: n.foreign_gpus for n in state.nodes.values()} == {"n0": 6, "n1": 0}
    assert state.free_gpus("n0") == frozenset({0, 1})  # 8 - 6: the lowest indices stay Steward's
    assert (policy_node(state.nodes["n0"]).gpus, policy_node(state.nodes["n1"]).gpus) == (2, 8)
    with pytest.raises(CapacityConflict, match=r"GPUs \[2, 3\] on 'n0' are not free"):
        decide(state, PlaceJob("j1", {"n0": [0, 1, 2, 3]}, funded=True), 11.0)
    state = apply(state, beat({}), now=20.0)  # the foreign job ended: the next heartbeat names no node
    assert state.nodes["n0"].foreign_gpus == 0 and state.free_gpus("n0") == frozenset(range(8))
    apply(state, PlaceJob("j1", {"n0": [0, 1, 2, 3]}, funded=True), now=21.0)


def test_foreign_load_beside_steward_s_own_jobs_leaves_only_what_both_do_not_hold() -> None:
    state = apply(cluster(), submit("j1", gpus=3), place("j1", n0=[0, 1, 2]), beat({"n0": 4}), now=10.0)
    assert state.free_gpus("n0") == frozenset({3})
    state = apply(state, beat({"n0": 8}), now=11.0)  # more than is left (Slurm's view is a moment later)
    assert state.free_gpus("n0") == frozenset()


@pytest.mark.parametrize(("foreign", "executor", "match"), [
    ({"n9": 1}, "local", "not its own"),
    ({"n0": 1}, "other", "not its own"),
    ({"n0": 9}, "local", "which has 8"),
    ({"n0": -1}, "local", "which has 8"),
    ({"n0": 1.5}, "local", "which has 8"),
    ({"n0": True}, "local", "which has 8"),
])
def test_a_heartbeat_reports_foreign_load_only_on_its_own_nodes_and_within_them(
        foreign: dict[str, Any], executor: str, match: str) -> None:
    with pytest.raises(InvalidCommand, match=match):
        decide(cluster(), beat(foreign, executor), 10.0)


def test_a_heartbeat_without_foreign_load_keeps_its_recorded_form() -> None:
    (event,) = decide(cluster(), beat({"n0": 0}), 10.0)
    assert "foreign" not in event.payload
    (event,) = decide(cluster(), beat({"n1": 2, "n0": 0}), 10.0)
    assert event.payload["foreign"] == {"n1": 2}


def test_a_heartbeat_of_another_executor_leaves_this_one_s_foreign_load() -> None:
    state = apply(cluster(), beat({"n0": 5}), now=10.0)
    state = apply(state, ReportHeartbeat("elsewhere", {}), now=11.0)
    assert state.nodes["n0"].foreign_gpus == 5


@given(st.lists(st.integers(0, 8), min_size=2, max_size=2), st.sets(st.integers(0, 7)))
def test_free_gpus_never_exceed_what_neither_steward_nor_foreign_load_holds(
        foreign: list[int], held: set[int]) -> None:
    state = cluster()
    if held:
        state = apply(state, submit("j1", gpus=len(held)), PlaceJob("j1", {"n0": sorted(held)}, funded=True))
    state = apply(state, beat({f"n{i}": f for i, f in enumerate(foreign)}))
    for i, f in enumerate(foreign):
        node = f"n{i}"
        used = held if i == 0 else set()
        free = state.free_gpus(node)
        assert not free & used
        assert len(free) == max(0, 8 - len(used) - f)
