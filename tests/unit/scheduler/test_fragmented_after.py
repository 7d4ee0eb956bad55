"""The scheduler's fragmentation after a cycle (`scheduler.metrics.fragmented_after`): the cycle's placements hold
their GPUs and are no longer waiting, and each cluster is measured by the policy's per-cluster rule
(`policy.placement.unusable_by_cluster` against `policy.routing.largest_waiting_by_cluster`), as the API's."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from steward.policy.model import AllocationTree, CycleResult, Node, PendingJob, Placement, RunningJob, Snapshot
from steward.policy.placement import unusable_by_cluster
from steward.scheduler.metrics import fragmented_after

NOW = 1000.0
NODES = (Node("a0", 8, path=("x",), cluster="alpha"), Node("a1", 8, path=("x",), cluster="alpha"),
         Node("b0", 4, path=("y",), cluster="beta"), Node("b1", 4, path=("y",), state="draining", cluster="beta"))


def cycle(placements: list[tuple[str, tuple[tuple[str, int], ...]]]) -> CycleResult:
    return CycleResult(NOW, tuple(Placement(j, "p", a, True, NOW, {}) for j, a in placements), (), (),
                       MappingProxyType({}), None, 0.0, (), {})


# (case, running (node, GPUs), waiting jobs' GPUs, the cycle's placements, want per cluster)
CASES: list[tuple[str, list[tuple[str, int]], list[int], list[tuple[str, tuple[tuple[str, int], ...]]],
                  dict[str, int]]] = [
    ("nothing waits", [("a0", 2)], [], [], {"alpha": 0, "beta": 0}),
    ("a one-node job: partly free nodes too small", [("a0", 6), ("b0", 1)], [4], [], {"alpha": 2, "beta": 3}),
    ("placed: no longer waiting, its GPUs held", [("a0", 6)], [4], [("w0", (("a1", 4),))], {"alpha": 0, "beta": 0}),
    ("the next gang is measured, after the placement", [("a0", 6)], [4, 8], [("w0", (("a1", 4),))],
     {"alpha": 6, "beta": 4}),  # beta's 8 GPUs hold the 8-GPU job (b1 may come back); b0's 4 free are too few
    ("a gang too big for beta is measured on alpha alone", [("a0", 1), ("b0", 1)], [16], [],
     {"alpha": 15, "beta": 0}),
    ("a draining node's GPUs are not free", [], [4], [], {"alpha": 0, "beta": 0}),
]


@pytest.mark.parametrize(("case", "busy", "waiting", "placed", "want"), CASES, ids=[c[0] for c in CASES])
def test_fragmented_after_a_cycle(case: str, busy: list[tuple[str, int]], waiting: list[int],
                                  placed: list[tuple[str, tuple[tuple[str, int], ...]]], want: dict[str, int]) -> None:
    running = tuple(RunningJob(f"r{i}", "p", g, ((n, g),), NOW - 1, NOW, True) for i, (n, g) in enumerate(busy))
    pending = tuple(PendingJob(f"w{i}", "p", g, 0.0) for i, g in enumerate(waiting))
    snap = Snapshot(NOW, NODES, AllocationTree.flat({"p": 1.0}), {}, running, pending)
    assert fragmented_after(snap, cycle(placed)) == want, case


def test_a_cluster_without_a_waiting_gang_has_none() -> None:
    assert unusable_by_cluster(NODES, {"a0": 3}, {"alpha": 0}) == {"alpha": 0, "beta": 0}
