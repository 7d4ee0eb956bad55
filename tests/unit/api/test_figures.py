"""The allocation tree's figures: entitlement, usage in the window, owed vs delivered, burn."""

from __future__ import annotations

import pytest

from steward.api.figures import HOUR, compute, depth_first, entitlements

ALLOCS = [{"name": "a", "parent": "cluster", "share": 0.5}, {"name": "b", "parent": "cluster", "share": 0.5},
          {"name": "a1", "parent": "a", "share": 0.5}, {"name": "a2", "parent": "a", "share": 0.5}]
NOW = 1_000_000.0


def job(project: str, gpus: int, submitted: float, started: float | None, ended: float | None,
        state: str) -> dict[str, object]:
    return {"project": project, "gpus": gpus, "submitted_at": submitted, "started_at": started, "ended_at": ended,
            "state": state}


def test_entitlement_is_the_product_of_shares_and_order_is_depth_first() -> None:
    parents = {str(a["name"]): str(a["parent"]) for a in ALLOCS}
    ents = entitlements(parents, {str(a["name"]): float(str(a["share"])) for a in ALLOCS})
    assert ents == {"a": 0.5, "b": 0.5, "a1": 0.25, "a2": 0.25}
    assert depth_first(parents) == [("a", 1), ("a1", 2), ("a2", 2), ("b", 1)]


def test_owed_is_capped_by_demand_and_delivered_counts_the_window_only() -> None:
    jobs = [
        # a1 ran 2 GPUs for the last 2 hours (its demand = what it ran)
        job("a1", 2, NOW - 2 * HOUR, NOW - 2 * HOUR, None, "RUNNING"),
        # a2 waited 4 GPUs for the last hour and never ran
        job("a2", 4, NOW - HOUR, None, None, "QUEUED"),
        # b finished long before the window: not counted
        job("b", 8, NOW - 100 * HOUR, NOW - 99 * HOUR, NOW - 50 * HOUR, "COMPLETED"),
    ]
    figs = {f.name: f for f in compute(ALLOCS, jobs, capacity=16, now=NOW, window_s=24 * HOUR)}
    a1, a2, a, b = figs["a1"], figs["a2"], figs["a"], figs["b"]
    assert a1.delivered == pytest.approx(2 * 2 * HOUR)
    assert a1.owed == pytest.approx(2 * 2 * HOUR)  # entitled 4 GPUs/h > demand 2 GPUs/h
    assert a1.delivered_over_owed == pytest.approx(1.0)
    assert a2.owed == pytest.approx(4 * HOUR) and a2.delivered == 0 and a2.delivered_over_owed == 0
    assert a.owed == pytest.approx(a1.owed + a2.owed)  # 6 GPUs demand < 8 entitled
    assert a.running_gpus == 2 and a.waiting_jobs == 1 and a.waiting_gpus == 4
    assert a1.burn == pytest.approx(2 / 4) and a.burn == pytest.approx(2 / 8)
    assert b.delivered == 0 and b.owed == 0 and b.delivered_over_owed is None
    assert a.entitled_in_window == pytest.approx(0.5 * 16 * 24 * HOUR)


def test_owed_per_hour_is_capped_by_entitlement() -> None:
    jobs = [job("a1", 16, NOW - HOUR, None, None, "QUEUED")]  # wants 16 GPUs, entitled to 4
    f = {x.name: x for x in compute(ALLOCS, jobs, capacity=16, now=NOW, window_s=24 * HOUR)}["a1"]
    assert f.owed == pytest.approx(4 * HOUR) and f.demand_in_window == pytest.approx(16 * HOUR)
