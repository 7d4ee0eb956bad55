"""The allocation tree's figures: entitlement, usage in the window, owed vs delivered, burn; fed by the
budget arithmetic of `steward.domain.budget` over the log's events (issue 19: one set of books)."""

from __future__ import annotations

from typing import Any

import pytest

from steward.api.figures import HOUR, AllocationFigures, OverviewFold, compute, depth_first, entitlements
from steward.domain import budget

ALLOCS = [{"name": "a", "parent": "cluster", "share": 0.5}, {"name": "b", "parent": "cluster", "share": 0.5},
          {"name": "a1", "parent": "a", "share": 0.5}, {"name": "a2", "parent": "a", "share": 0.5}]
NOW = 1_000_000.0
WINDOW = 24 * HOUR


class Log:
    """Events in log order (the fold and the domain's `period_figures` read the same ones)."""

    def __init__(self, capacity: int = 16) -> None:
        self.fold = OverviewFold()
        self.history: list[tuple[str, dict[str, Any], float]] = []
        t0 = NOW - 200 * HOUR
        self.ev(t0, "AllocationsSet", parent="cluster", shares={"a": 0.5, "b": 0.5})
        self.ev(t0, "AllocationsSet", parent="a", shares={"a1": 0.5, "a2": 0.5})
        self.ev(t0, "NodeRegistered", node_id="n1", gpus=capacity)

    def ev(self, at: float, kind: str, **payload: Any) -> Log:
        self.history.append((kind, payload, at))
        self.fold.apply(len(self.history), kind, payload, at)
        return self

    def job(self, job: str, project: str, gpus: int, submitted: float, started: float | None = None,
            ended: float | None = None) -> Log:
        self.ev(submitted, "JobSubmitted", job_id=job, project=project, gpus=gpus, submitted_at=submitted)
        if started is not None:
            self.ev(started, "JobStarted", job_id=job)
        if ended is not None:
            self.ev(ended, "JobCompleted", job_id=job)
        return self

    def figures(self, active: list[dict[str, Any]], capacity: int = 16) -> dict[str, AllocationFigures]:
        w0, w1 = budget.window_bounds(NOW, WINDOW)
        books = self.fold.period_figures(w0, w1, NOW)
        return {f.name: f for f in compute(ALLOCS, active, capacity, NOW, WINDOW, books)}


def test_entitlement_is_the_product_of_shares_and_order_is_depth_first() -> None:
    parents = {str(a["name"]): str(a["parent"]) for a in ALLOCS}
    ents = entitlements(parents, {str(a["name"]): float(str(a["share"])) for a in ALLOCS})
    assert ents == {"a": 0.5, "b": 0.5, "a1": 0.25, "a2": 0.25}
    assert depth_first(parents) == [("a", 1), ("a1", 2), ("a2", 2), ("b", 1)]


def test_owed_is_capped_by_demand_and_delivered_counts_the_window_only() -> None:
    log = (Log()
           .job("j1", "a1", 2, NOW - 2 * HOUR, NOW - 2 * HOUR)  # ran 2 GPUs for the last 2 hours
           .job("j2", "a2", 4, NOW - HOUR)  # waited 4 GPUs for the last hour and never ran
           .job("j3", "b", 8, NOW - 100 * HOUR, NOW - 99 * HOUR, NOW - 50 * HOUR))  # before the window
    figs = log.figures([{"project": "a1", "gpus": 2, "state": "RUNNING"},
                        {"project": "a2", "gpus": 4, "state": "QUEUED"}])
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
    assert (a1.window_start, a1.window_end) == (NOW - WINDOW, NOW)


def test_owed_per_hour_is_capped_by_entitlement() -> None:
    f = Log().job("j", "a1", 16, NOW - HOUR).figures([])["a1"]  # wants 16 GPUs, entitled to 4
    assert f.owed == pytest.approx(4 * HOUR) and f.demand_in_window == pytest.approx(16 * HOUR)


def test_a_ratio_above_one_is_shown_as_it_is_and_marked_as_over_delivery() -> None:
    # a1 is entitled to 4 GPUs and ran 8 for the last hour while it was the only demand: owed is what it
    # was entitled to (4 GPU-h), delivered 8 GPU-h; the old figures capped the overview's ratio at 1
    f = Log().job("j", "a1", 8, NOW - HOUR, NOW - HOUR).figures([])["a1"]
    assert f.owed == pytest.approx(4 * HOUR) and f.delivered == pytest.approx(8 * HOUR)
    assert f.delivered_over_owed == pytest.approx(2.0) and f.over_delivered


def test_every_run_counts_not_only_the_latest() -> None:
    # the projections keep one run per job (its latest start): the tree's figures used to count only that
    log = (Log().job("j", "a1", 2, NOW - 6 * HOUR, NOW - 6 * HOUR)
           .ev(NOW - 4 * HOUR, "JobPreempted", job_id="j", requeue=True)
           .ev(NOW - 4 * HOUR, "JobRequeued", job_id="j")
           .ev(NOW - 2 * HOUR, "JobStarted", job_id="j"))
    assert log.figures([])["a1"].delivered == pytest.approx(2 * (2 + 2) * HOUR)


def test_the_tree_figures_are_the_domain_period_figures_of_the_window() -> None:
    log = (Log().job("j1", "a1", 2, NOW - 30 * HOUR, NOW - 20 * HOUR, NOW - 3 * HOUR)
           .job("j2", "a2", 12, NOW - 10.5 * HOUR, NOW - 5.25 * HOUR)
           .job("j3", "b", 6, NOW - 7 * HOUR, None))
    expected, _cap = budget.period_figures(log.history, NOW - WINDOW, NOW)
    for name, f in log.figures([]).items():
        e = expected.get(name, dict.fromkeys(budget.FIGURES, 0.0))
        assert (f.owed, f.delivered, f.demand_in_window, f.entitled_in_window) == pytest.approx(
            (e["owed_gpu_s"], e["delivered_gpu_s"], e["demand_gpu_s"], e["entitled_gpu_s"])), name
