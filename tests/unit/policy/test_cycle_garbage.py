"""Per-cycle work leaves no reference-cyclic garbage, and the tree sums it uses add in the tree's order.

docs/benchmarks.md "Simulator", round 5: recursive closures in `ordering.subtree_sums` and
`standing`, and the nested functions of `make_reservation`, made every cycle's plan cyclic garbage;
the collector's passes over it were ≈ 9 % of a compiled simulation.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.domain.policy_settings import PolicySettings
from steward.policy.cycle import schedule
from steward.policy.model import AllocationTree, Snapshot
from steward.policy.ordering import post_order, standing, subtree_sums
from tests.unit.policy.builders import HOUR, NOW, nested, nodes, pending, running, snapshot, tree


@contextmanager
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def reference_sums(t: AllocationTree, values: Mapping[str, float]) -> dict[str, float]:
    """The definition: a project its own value, an allocation the sum over its children in order."""
    out: dict[str, float] = {}

    def visit(node: str) -> float:
        kids = t.children(node)
        total = sum(visit(c) for c in kids) if kids else float(values.get(node, 0.0))
        out[node] = total
        return total

    for top in t.children(None):
        visit(top)
    return out


def reserving_snapshot(settings: PolicySettings | None) -> Snapshot:
    """A cycle's input that orders, reserves for a blocked gang (make_reservation) and places."""
    ns = nodes(4, per_block=2)
    jobs = [
        running("b0", "b", 6, on="n0", started_at=NOW - 2 * HOUR, protected_for=1 * HOUR),
        running("b1", "b", 6, on="n1", started_at=NOW, protected_for=2 * HOUR),
        running("b2", "b", 8, on="n2", started_at=NOW, protected_for=5 * HOUR),
        running("b3", "b", 8, on="n3", started_at=NOW, protected_for=6 * HOUR),
    ]
    waiting = [
        pending("gang", "a", 16, submitted_at=0),
        pending("small", "a", 4, submitted_at=1),
        pending("short", "a", 2, submitted_at=2, min_runtime_s=HOUR / 2),
    ]
    return snapshot(nodes=ns, tree=tree(a=0.5, b=0.5), usage={"a": 0, "b": 1e9}, running=jobs,
                             pending=waiting, settings=settings, levels=("block",))


@pytest.mark.parametrize(("settings", "reserves"), [(None, True), (PolicySettings.ai2(), False)])
def test_a_cycle_leaves_no_reference_cycles(settings: PolicySettings | None, reserves: bool) -> None:
    snap = reserving_snapshot(settings)  # building the tree itself is not the cycle's work
    result = schedule(snap)
    assert (result.reservation is not None) == reserves and result.placements
    with collector_off():
        result = schedule(snap)
        del result
        assert gc.collect() == 0


def test_standing_leaves_no_reference_cycles() -> None:
    t = nested({"r": {"share": 0.6, "children": {"x": 0.5, "y": 0.5}}, "z": {"share": 0.4}})
    standing(t, {}, 64, PolicySettings())
    with collector_off():
        stand = standing(t, {"x": 3.0, "y": 1.0, "z": 2.0}, 64, PolicySettings(), {"x": 8.0, "z": 4.0})
        assert set(stand.leaf_order) == {"x", "y", "z"}
        del stand
        assert gc.collect() == 0


@pytest.mark.parametrize(
    ("spec", "values", "expected"),
    [
        ({"a": {"share": 0.5}, "b": {"share": 0.5}}, {"a": 1.5}, {"a": 1.5, "b": 0.0}),
        (
            {"r": {"share": 0.6, "children": {"x": 0.5, "y": 0.5}}, "z": {"share": 0.4}},
            {"x": 1.0, "y": 2.0, "z": 4.0, "r": 100.0},  # an inner allocation's own value is ignored
            {"x": 1.0, "y": 2.0, "r": 3.0, "z": 4.0},
        ),
        (
            {"r": {"share": 1.0, "children": {"s": {"share": 1.0, "children": {"t": 1.0}}}}},
            {"t": 0.1},
            {"t": 0.1, "s": 0.1, "r": 0.1},
        ),
    ],
)
def test_subtree_sums(spec: dict[str, Any], values: dict[str, float], expected: dict[str, float]) -> None:
    got = subtree_sums(nested(spec), values)
    assert got == expected
    assert list(got) == [n for n, _ in post_order(nested(spec))]  # children before their parent


@st.composite
def deep_trees(draw: st.DrawFn) -> AllocationTree:
    triples: list[tuple[str, str | None, float]] = []
    frontier: list[str | None] = [None]
    for i in range(draw(st.integers(1, 14))):
        parent = draw(st.sampled_from(frontier))
        triples.append((f"n{i}", parent, 0.0))
        frontier.append(f"n{i}")
    return AllocationTree.build(triples)


@given(deep_trees(), st.lists(st.floats(0.0, 1e9) | st.just(0.1) | st.just(1e-17), min_size=14, max_size=14))
def test_subtree_sums_add_exactly_as_the_definition(t: AllocationTree, raw: list[float]) -> None:
    values = {f"n{i}": v for i, v in enumerate(raw)}
    got = subtree_sums(t, values)
    want = reference_sums(t, values)
    assert list(got.items()) == list(want.items())  # same floats, to the last bit, in the same order
    assert all(not math.isnan(v) for v in got.values())
    order = [n for n, _ in post_order(t)]
    assert sorted(order) == sorted(t.allocations)
    assert all(order.index(c) < order.index(n) for n, kids in post_order(t) for c in kids)
