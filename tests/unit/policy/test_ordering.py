"""Ordering (DESIGN.md "Ordering (hierarchical fair share)")."""

from __future__ import annotations

import math

import pytest

from steward.policy.ordering import order_pending, standing, usage_ratio
from steward.policy.settings import PolicySettings
from tests.unit.policy.builders import nested, pending, tree

S = PolicySettings()
CAP = 100


def order_of(t, usage, jobs, settings=S):
    stand = standing(t, usage, CAP, settings)
    return [j.id for j in order_pending(jobs, stand, usage, settings).jobs]


@pytest.mark.parametrize(
    ("shares", "usage", "expected"),
    [
        ({"a": 0.5, "b": 0.5}, {"a": 10, "b": 0}, ["jb", "ja"]),  # lowest delivered/entitled first
        ({"a": 0.8, "b": 0.2}, {"a": 40, "b": 20}, ["ja", "jb"]),  # 40/.8 = 50 < 20/.2 = 100
        ({"a": 0.5, "b": 0.5}, {"a": 0, "b": 0}, ["ja", "jb"]),  # tie: by id
        ({"a": 0.5, "b": 0.0}, {"a": 1e9, "b": 0}, ["ja", "jb"]),  # no share: never ahead of a share
    ],
    ids=["under-served-first", "ratio-not-usage", "tie-by-id", "zero-share-last"],
)
def test_siblings_by_delivered_over_entitled(shares, usage, expected):
    jobs = [pending("ja", "a"), pending("jb", "b")]
    assert order_of(tree(**shares), usage, jobs) == expected


def test_hierarchical_walk_orders_levels_first():
    t = nested(
        {
            "x": {"share": 0.5, "children": {"x1": 0.5, "x2": 0.5}},
            "y": {"share": 0.5, "children": {"y1": 0.5, "y2": 0.5}},
        }
    )
    # x as a whole is more served than y, although x1 alone used nothing.
    usage = {"x1": 0.0, "x2": 100.0, "y1": 30.0, "y2": 30.0}
    jobs = [pending(f"j{p}", p) for p in ("x1", "x2", "y1", "y2")]
    assert order_of(t, usage, jobs) == ["jy1", "jy2", "jx1", "jx2"]
    stand = standing(t, usage, CAP, S)
    assert stand.level_rank["x"] == (2, 2) and stand.level_rank["x1"] == (1, 2)
    ev = stand.evidence(t, "x1")
    assert [lvl["rank"] for lvl in ev["levels"]] == [2, 1]


def test_priority_only_inside_a_project_then_submit_time_then_id():
    jobs = [
        pending("a-late-hi", "a", submitted_at=50, priority=5),
        pending("a-early", "a", submitted_at=10),
        pending("a-early2", "a", submitted_at=10),
        pending("b-hi", "b", submitted_at=0, priority=100),
    ]
    # a is under-served: all of a goes first; b's priority does not jump projects
    assert order_of(tree(a=0.5, b=0.5), {"a": 0, "b": 10}, jobs) == ["a-late-hi", "a-early", "a-early2", "b-hi"]


def test_unknown_projects_go_last():
    jobs = [pending("z", "nobody"), pending("a1", "a")]
    assert order_of(tree(a=0.5), {"a": 1e12}, jobs) == ["a1", "z"]


def test_fifo_priority_baseline_ignores_the_tree():
    jobs = [pending("b1", "b", submitted_at=1), pending("a1", "a", submitted_at=2), pending("c", "b", 1, 3, priority=1)]
    s = PolicySettings.fifo_priority()
    assert order_of(tree(a=0.5, b=0.5), {"a": 0, "b": 1e9}, jobs, s) == ["c", "b1", "a1"]


def test_usage_ratio_rules():
    assert usage_ratio(10, 0) == math.inf
    assert usage_ratio(0, 5) == 0
