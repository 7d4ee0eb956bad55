"""Placement (DESIGN.md "Placement") on the capacity index."""

from __future__ import annotations

import pytest

from steward.policy.placement import CapacityIndex, fragmentation
from tests.unit.policy.builders import node, nodes


def index(used: dict[str, int], ns=None, mode="best_fit") -> CapacityIndex:
    return CapacityIndex(ns or nodes(4), used, mode)


def chosen(idx: CapacityIndex, gpus: int, depth=None):
    fit = idx.find(gpus, depth)
    return None if fit is None else tuple((idx.ids[i], g) for i, g in fit.nodes)


@pytest.mark.parametrize(
    ("used", "gpus", "mode", "expected"),
    [
        ({"n0": 2, "n1": 5, "n2": 0}, 3, "best_fit", (("n1", 3),)),  # fewest free that still fit
        ({"n0": 2, "n1": 5, "n2": 0}, 3, "first_fit", (("n0", 3),)),  # first in topology order
        ({"n0": 2, "n1": 5, "n2": 0}, 7, "best_fit", (("n2", 7),)),
        ({"n0": 8, "n1": 8, "n2": 8, "n3": 8}, 1, "best_fit", None),
    ],
)
def test_single_node_fit(used, gpus, mode, expected):
    assert chosen(index(used, mode=mode), gpus) == expected


@pytest.mark.parametrize(
    ("used", "gpus", "expected"),
    [
        ({}, 16, (("n0", 8), ("n1", 8))),  # smallest domain: one block of 2 nodes
        ({"n0": 1}, 16, (("n2", 8), ("n3", 8))),  # b0 has a busy node → b1
        ({"n0": 1, "n2": 1}, 16, (("n1", 8), ("n3", 8))),  # no block fits → spans the cluster
        ({"n0": 1, "n2": 1, "n3": 1}, 16, None),  # all-or-nothing: never partial nodes
        ({}, 12, (("n0", 8), ("n1", 4))),  # whole nodes beyond one node's GPUs
    ],
)
def test_gangs_take_whole_nodes_in_the_smallest_domain(used, gpus, expected):
    assert chosen(index(used), gpus) == expected


def test_best_fit_prefers_the_tightest_domain():
    ns = nodes(8, per_block=4)
    idx = CapacityIndex(ns, {"n0": 8, "n1": 8}, "best_fit")  # b0 has 2 free nodes, b1 has 4
    assert chosen(idx, 16) == (("n2", 8), ("n3", 8))


def test_hard_topology_constraint():
    ns = nodes(8, per_block=2, blocks_per_spine=2)  # paths (s, b)
    idx = CapacityIndex(ns, {"n0": 1, "n2": 1, "n5": 1, "n7": 1}, "best_fit")
    # 4 whole nodes: n1, n3 (spine s0) and n4, n6 (spine s1); 16 fits a spine, not a block
    assert chosen(idx, 16) == (("n1", 8), ("n3", 8))
    assert chosen(idx, 16, depth=2) is None  # must be inside one block
    assert chosen(idx, 32, depth=1) is None  # must be inside one spine
    assert chosen(idx, 32) is not None  # unconstrained: spans spines


def test_take_mask_and_most_free():
    idx = index({"n0": 6})
    idx.take(idx.pos["n1"], 3)
    assert idx.free[idx.pos["n1"]] == 5 and idx.total_free == 2 + 5 + 8 + 8
    idx.mask(idx.pos["n2"])
    assert idx.total_free == 2 + 5 + 8 and idx.ids[idx.most_free(1)] == "n3"
    idx.unmask(idx.pos["n2"])
    assert idx.whole_free == 16


def test_draining_nodes_are_invisible():
    ns = (node("n0", path=("b0",), state="draining"), node("n1", path=("b0",)))
    idx = CapacityIndex(ns, {}, "best_fit")
    assert chosen(idx, 8) == (("n1", 8),)
    assert chosen(idx, 16) is None


@pytest.mark.parametrize(
    ("used", "gang", "expected"),
    [
        ({"n0": 6, "n1": 6, "n2": 8, "n3": 8}, 4, 4 / 32),  # 2+2 free, a 4-GPU gang fits nowhere
        ({"n0": 4, "n1": 6, "n2": 8, "n3": 8}, 4, 2 / 32),  # n1's 2 free are unusable, n0's 4 are not
        ({"n0": 1, "n2": 8, "n3": 8}, 16, (7 + 8) / 32),  # one whole node cannot hold 16: all unusable
        ({"n0": 1, "n3": 8}, 16, 7 / 32),  # n1+n2 hold 16; n0's 7 are on a busy node
        ({}, 0, 0.0),
    ],
)
def test_fragmentation_is_free_gpus_the_largest_gang_cannot_use(used, gang, expected):
    assert fragmentation(index(used), gang) == pytest.approx(expected)
