"""Ordering (DESIGN.md "Ordering (hierarchical fair share)")."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.ordering import active_entitlement, demand_gpus, demand_of, order_pending, standing, usage_ratio
from tests.unit.policy.builders import nested, pending, running, snapshot, tree

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


# --- ADR 0016: an inner allocation's entitlement counts only what its projects' demand can use -------

PRODUCT_PLATFORM = {  # the shape of philly.yaml's product and platform (ADR 0016)
    "product": {"share": 0.6, "children": {"b4": 0.4, "62": 0.35, "11": 0.25}},
    "platform": {"share": 0.4, "children": {"28": 0.5, "6c": 0.5}},
}
W = 7 * 86400.0


@pytest.mark.parametrize(
    ("pending_jobs", "running_jobs", "settings", "expected"),
    [
        ([pending("w1", "a", gpus=2), pending("w2", "a", gpus=3)], [], S, {"a": 5.0}),
        ([pending("w", "a", gpus=4, min_runtime_s=0.0)], [], S, {}),  # asked for no protection
        ([pending("s", "a", gpus=1, min_runtime_s=0.0, klass="interactive")], [], S, {"a": 1.0}),  # a session
        ([], [running("r", "a", gpus=3, min_runtime_s=600.0),
              running("u", "b", gpus=2, funded=False, min_runtime_s=600.0)],
         S, {"a": 3.0, "b": 2.0}),  # running counts, funded or not, while it asked for funding
        ([], [running("r0", "a", gpus=3, min_runtime_s=0.0, funded=False)], S, {}),
        ([pending("w", "a", gpus=4, min_runtime_s=0.0)], [], PolicySettings.fifo_priority(), {"a": 4.0}),
    ],
    ids=["waiting", "no-protection-is-not-demand", "session", "running", "running-unfunded-by-request",
         "no-funding-everything-counts"],
)
def test_demand_is_funded_asking_work_waiting_or_running(pending_jobs, running_jobs, settings, expected):
    assert demand_gpus(pending_jobs, running_jobs, settings) == expected


@pytest.mark.parametrize(
    ("demand", "expected"),
    [
        ({"b4": 100, "62": 100, "11": 100, "28": 100, "6c": 100},
         {"product": 0.6, "b4": 0.24, "62": 0.21, "11": 0.15, "platform": 0.4}),  # all busy: in full
        ({"b4": 100, "62": 100, "28": 100, "6c": 100}, {"product": 0.45, "11": 0.0}),  # 11 idle: lent
        ({"b4": 100, "62": 100, "11": 5, "28": 100, "6c": 100}, {"product": 0.5, "11": 0.05}),  # 5 of 15 GPUs
        ({"28": 10}, {"product": 0.0, "platform": 0.1, "28": 0.1, "6c": 0.0}),
    ],
    ids=["everyone-busy", "idle-child-lends", "small-demand-counts-up-to-its-demand", "only-one-project"],
)
def test_active_entitlement_is_capped_by_demand(demand, expected):
    active = active_entitlement(nested(PRODUCT_PLATFORM), demand, CAP)
    for node, value in expected.items():
        assert active[node] == pytest.approx(value), node


def ranked(usage, demand, settings=S):
    """The order of one job each of b4, 62 (product) and 28 (platform); b4 and 62 tie, 62 first by id."""
    t = nested(PRODUCT_PLATFORM)
    stand = standing(t, usage, CAP, settings, demand)
    jobs = [pending(f"j{p}", p) for p in ("b4", "62", "28")]
    return [j.id for j in order_pending(jobs, stand, usage, settings).jobs], stand


# product delivered 0.8 of its full entitlement, platform 0.86 (the philly case, ADR 0016)
USAGE = {"b4": 0.6 * 0.6 * 0.8 * CAP * W, "62": 0.4 * 0.6 * 0.8 * CAP * W, "11": 0.0,
         "28": 0.5 * 0.4 * 0.86 * CAP * W, "6c": 0.5 * 0.4 * 0.86 * CAP * W}
BUSY = {"b4": 100.0, "62": 100.0, "28": 100.0, "6c": 100.0}


@pytest.mark.parametrize(
    ("demand", "expected"),
    [
        (None, ["j62", "jb4", "j28"]),  # DESIGN.md as written: product 0.80 < platform 0.86
        ({**BUSY, "11": 100.0}, ["j62", "jb4", "j28"]),  # 11 has demand: its share counts
        (BUSY, ["j28", "j62", "jb4"]),  # 11 idle: product is 0.80 / 0.75 = 1.07 > 0.86
        ({**BUSY, "11": 9.0}, ["j28", "j62", "jb4"]),  # 9 of its 15 GPUs: product 0.80 × 0.6 / 0.54 = 0.89
        ({**BUSY, "11": 12.0}, ["j62", "jb4", "j28"]),  # 12 of 15: 0.80 × 0.6 / 0.57 = 0.84 < 0.86
    ],
    ids=["in-full", "idle-child-has-demand", "idle-child-lends", "small-demand-lends-the-rest", "lends-too-little"],
)
def test_an_idle_child_does_not_make_its_parent_look_under_served(demand, expected):
    assert ranked(USAGE, demand)[0] == expected


def test_delivered_of_a_project_without_demand_does_not_count_for_its_parent():
    usage = {**USAGE, "11": 1e9}  # 11 ran a lot this week and has nothing to run now
    order, stand = ranked(usage, BUSY)
    assert order == ["j28", "j62", "jb4"]
    assert stand.delivered["product"] == pytest.approx(USAGE["b4"] + USAGE["62"] + 1e9)  # the figure
    assert stand.ranked_delivered["product"] == pytest.approx(USAGE["b4"] + USAGE["62"])  # the rank
    assert stand.ranked_delivered["11"] == 1e9  # a project is its own usage


def test_a_project_is_ranked_against_its_whole_entitlement_among_its_siblings():
    _, stand = ranked(USAGE, {**BUSY, "b4": 1.0})  # b4 wants 1 GPU of its 24
    assert stand.ranked_entitled["b4"] == pytest.approx(0.24 * CAP * W)
    assert stand.ranked_entitled["product"] == pytest.approx((0.01 + 0.21) * CAP * W)


def test_evidence_shows_the_active_entitlement_level_by_level():
    _, stand = ranked(USAGE, BUSY)
    levels = stand.evidence(nested(PRODUCT_PLATFORM), "b4")["levels"]
    top = levels[0]
    assert top["allocation"] == "product" and top["entitlement"] == pytest.approx(0.6)
    assert top["active"]["entitlement"] == pytest.approx(0.45)
    assert top["active"]["demand_gpus"] == 200.0
    assert top["active"]["entitled_gpu_s"] == pytest.approx(0.45 * CAP * W)
    assert top["ratio"] == pytest.approx(0.8 * 0.6 / 0.45)
    _, in_full = ranked(USAGE, None)
    assert "active" not in in_full.evidence(nested(PRODUCT_PLATFORM), "b4")["levels"][0]


@pytest.mark.parametrize(
    ("settings", "counts_by_demand"),
    [(PolicySettings.steward(), True), (PolicySettings.ai2(), False), (PolicySettings.fair_tree(), False),
     (PolicySettings.fifo_priority(), False), (PolicySettings.steward(active_entitlement=False), False)],
    ids=["steward", "ai2", "fair-tree", "fifo-priority", "steward-switched-off"],
)
def test_only_steward_ranks_by_demand(settings, counts_by_demand):
    snap = snapshot(pending=[pending("w", "a", gpus=2)], settings=settings)
    assert (demand_of(snap) is not None) == counts_by_demand


def test_a_callers_demand_count_wins_over_the_snapshots_jobs():
    """The simulator hands the cycle a trimmed queue and the whole queue's demand (Snapshot.demand)."""
    snap = snapshot(pending=[pending("w", "a", gpus=2)])
    assert demand_of(snap) == {"a": 2.0}
    assert demand_of(replace(snap, demand={"a": 40.0, "b": 1.0})) == {"a": 40.0, "b": 1.0}
