"""Budgets in weighted GPU-hours (ADR 0062): the books of `steward.domain.budget` over several clusters and GPU
models. With every weight 1.0 the figures are exactly those of the same log without models, clusters or
requests (the books before weights); weighted delivery is each run's GPU-seconds × the weight of the model it
ran on, at the weight in force then, and the split by (cluster, model) sums to the totals."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steward.domain import budget

NODES = {"ceres-n0": ("ceres", "H100", 8), "jupiter-n0": ("jupiter", "A100", 8), "jupiter-n1": ("jupiter", "V100", 4)}
WEIGHTS = {"H100": 1.0, "A100": 0.55, "V100": 0.25}
END = 4 * 3600.0

Event = tuple[str, dict[str, Any], float]

JOB = st.fixed_dictionaries({
    "project": st.sampled_from(["a", "b", "c"]),
    "gpus": st.integers(1, 4),
    "submit": st.integers(0, 10000),
    "wait": st.integers(0, 4000),
    "run": st.integers(1, 6000),
    "started": st.booleans(),
    "node": st.sampled_from(sorted(NODES)),
    "models": st.sampled_from([(), ("H100",), ("A100", "V100"), ("V100",)]),
    "clusters": st.sampled_from([(), ("ceres",), ("jupiter",)]),
})


def _log(jobs: list[dict[str, Any]], weights: dict[str, float] | None, weights_at: float = 0.0,
         plain: bool = False) -> list[Event]:
    """A log of these jobs; `plain`: without models, clusters or requests (the books before weights)."""
    timed: list[tuple[float, int, Event]] = [
        (0.0, 0, ("AllocationsSet", {"parent": "cluster", "shares": {"t": 1.0}}, 0.0)),
        (0.0, 1, ("AllocationsSet", {"parent": "t", "shares": {"a": 0.5, "b": 0.3, "c": 0.2}}, 0.0))]
    for k, (node, (cluster, model, gpus)) in enumerate(sorted(NODES.items())):
        p: dict[str, Any] = {"node_id": node, "gpus": gpus}
        if not plain:
            p |= {"gpu_model": model, "cluster": cluster}
        timed.append((0.0, 2 + k, ("NodeRegistered", p, 0.0)))
    if weights is not None and not plain:
        timed.append((weights_at, 10, ("PolicySet", {"changed": {"gpu_model_weights": weights}}, weights_at)))
    for n, j in enumerate(jobs):
        job, at = f"j{n}", float(j["submit"])
        sub: dict[str, Any] = {"job_id": job, "project": j["project"], "gpus": j["gpus"]}
        if not plain:
            sub |= {k: list(j[k]) for k in ("models", "clusters") if j[k]}
            sub = {("gpu_models" if k == "models" else k): v for k, v in sub.items()}
        seq = 100 + 10 * n
        timed.append((at, seq, ("JobSubmitted", sub, at)))
        if j["started"]:
            start, stop = at + j["wait"], at + j["wait"] + j["run"]
            placed = {"job_id": job, "assignments": {j["node"]: list(range(j["gpus"]))}}
            timed.append((start, seq + 1, ("JobPlaced", placed, start)))
            timed.append((start, seq + 2, ("JobStarted", {"job_id": job}, start)))
            timed.append((stop, seq + 3, ("JobCompleted", {"job_id": job}, stop)))
    return [e for _t, _s, e in sorted(timed, key=lambda x: (x[0], x[1]))]


@settings(max_examples=60, deadline=None)
@given(st.lists(JOB, max_size=12), st.sampled_from([None, "set"]), st.integers(0, 8000))
def test_with_every_weight_1_the_figures_are_exactly_the_unweighted_ones(
        jobs: list[dict[str, Any]], set_weights: str | None, weights_at: int) -> None:
    ones = dict.fromkeys(WEIGHTS, 1.0) if set_weights else None
    weighted, cap = budget.period_figures(_log(jobs, ones, float(weights_at)), 0.0, END)
    plain, plain_cap = budget.period_figures(_log(jobs, None, plain=True), 0.0, END)
    assert weighted == plain
    assert cap == plain_cap


def _delivered(jobs: list[dict[str, Any]], weights: dict[str, float], lo: float, hi: float) -> dict[str, float]:
    """The oracle: Σ GPUs × overlap × the weight of the node's model, per project."""
    out: dict[str, float] = {}
    for j in jobs:
        if j["started"]:
            start = j["submit"] + j["wait"]
            overlap = max(0.0, min(hi, start + j["run"]) - max(lo, start))
            out[j["project"]] = out.get(j["project"], 0.0) + j["gpus"] * overlap * weights[NODES[j["node"]][1]]
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(JOB, max_size=12))
def test_weighted_delivery_and_the_split_sum_across_clusters_and_models(jobs: list[dict[str, Any]]) -> None:
    split: budget.Split = {}
    figs, cap = budget.period_figures(_log(jobs, WEIGHTS), 0.0, END, split=split)
    assert cap == pytest.approx(END * sum(g * WEIGHTS[m] for _c, m, g in NODES.values()))
    expected = _delivered(jobs, WEIGHTS, 0.0, END)
    for project in ("a", "b", "c"):
        assert figs[project]["delivered_gpu_s"] == pytest.approx(expected.get(project, 0.0), abs=1e-6)
    assert figs["t"]["delivered_gpu_s"] == pytest.approx(sum(expected.values()), abs=1e-6)
    for name, row in figs.items():
        places = split.get(name, {})
        for k, figure in enumerate(("owed_gpu_s", "delivered_gpu_s", "demand_gpu_s")):
            assert sum(r[k] for r in places.values()) == pytest.approx(row[figure], abs=1e-6), (name, figure)
        for (cluster, model), r in places.items():  # delivered only where a node of that model is
            assert r[1] == 0 or (cluster, model) in {(c, m) for c, m, _g in NODES.values()}
        assert row["owed_gpu_s"] <= row["demand_gpu_s"] + 1e-6


@settings(max_examples=40, deadline=None)
@given(st.lists(JOB, max_size=12), st.integers(1, 12000))
def test_a_weight_change_never_reprices_the_past(jobs: list[dict[str, Any]], change_at: int) -> None:
    before, _ = budget.period_figures(_log(jobs, None), 0.0, float(change_at))
    changed, _ = budget.period_figures(_log(jobs, WEIGHTS, float(change_at)), 0.0, float(change_at))
    assert changed == before
    after, _ = budget.period_figures(_log(jobs, WEIGHTS, float(change_at)), 0.0, END)
    ones = dict.fromkeys(WEIGHTS, 1.0)
    early, late = _delivered(jobs, ones, 0.0, change_at), _delivered(jobs, WEIGHTS, change_at, END)
    expected = {p: early.get(p, 0.0) + late.get(p, 0.0) for p in ("a", "b", "c")}
    for project, value in expected.items():
        assert after[project]["delivered_gpu_s"] == pytest.approx(value, abs=1e-6)


CASES = [
    # request (models, clusters), the weights, -> what an hour of 1 waiting GPU is owed at most (its demand)
    (((), ()), WEIGHTS, 0.25 * 3600),  # any model: the cheapest, V100
    ((("H100",), ()), WEIGHTS, 3600.0),
    ((("A100", "V100"), ()), WEIGHTS, 0.25 * 3600),
    (((), ("ceres",)), WEIGHTS, 3600.0),  # ceres has only H100
    (((), ("jupiter",)), WEIGHTS, 0.25 * 3600),
    ((("A100",), ()), {"H100": 1.0, "A100": 0.55, "V100": 0.25}, 0.55 * 3600),
    (((), ()), {}, 3600.0),  # no weights: plain GPU-seconds
]


@pytest.mark.parametrize(("request_", "weights", "demand"), CASES)
def test_waiting_demand_is_valued_at_the_cheapest_model_the_job_accepts(
        request_: tuple[tuple[str, ...], tuple[str, ...]], weights: dict[str, float], demand: float) -> None:
    job = {"project": "a", "gpus": 1, "submit": 0, "wait": 0, "run": 1, "started": False, "node": "ceres-n0",
           "models": request_[0], "clusters": request_[1]}
    figs, _ = budget.period_figures(_log([job], weights or None), 0.0, 3600.0)
    assert figs["a"]["demand_gpu_s"] == pytest.approx(demand)
    assert figs["a"]["owed_gpu_s"] == pytest.approx(demand)  # entitled to far more than one GPU


def test_a_running_job_s_demand_is_its_delivery_and_its_owed_split_is_where_it_ran() -> None:
    job = {"project": "a", "gpus": 2, "submit": 0, "wait": 1800, "run": 1800, "started": True, "node": "ceres-n0",
           "models": (), "clusters": ()}
    split: budget.Split = {}
    figs, _ = budget.period_figures(_log([job], WEIGHTS), 0.0, 3600.0, split=split)
    # waiting 1800 s valued at V100 (0.25), running 1800 s on H100 (1.0)
    assert figs["a"]["demand_gpu_s"] == pytest.approx(2 * 1800 * 0.25 + 2 * 1800 * 1.0)
    assert figs["a"]["delivered_gpu_s"] == pytest.approx(2 * 1800 * 1.0)
    assert split["a"][("ceres", "H100")][1] == pytest.approx(3600.0)
    assert split["a"][("jupiter", "V100")][2] == pytest.approx(900.0)
    assert split["t"][("ceres", "H100")][0] == pytest.approx(3600.0)  # inner nodes: their projects' split


@settings(max_examples=40, deadline=None)
@given(st.lists(JOB, max_size=12), st.integers(0, 12000), st.integers(0, 10000), st.integers(600, 14000))
def test_the_api_s_fold_prices_and_splits_as_the_domain_does(jobs: list[dict[str, Any]], change_at: int,
                                                              start: int, length: int) -> None:
    """The API's read model (`OverviewFold`, `period_figures_split`, `compute`) serves the domain's weighted
    figures and split, and a tree row's split sums to its figures."""
    from steward.api.figures import OverviewFold, compute

    log = _log(jobs, WEIGHTS, float(change_at))
    fold = OverviewFold()
    for position, (kind, p, at) in enumerate(log, 1):
        fold.apply(position, kind, p, at)
    lo, hi = float(start), float(start + length)
    split: budget.Split = {}
    expected, _cap = budget.period_figures(log, lo, hi, split=split)
    got, got_split = fold.period_figures_split(lo, hi, hi + 1.0)
    assert set(got) == set(expected)
    for name, row in expected.items():
        assert got[name] == pytest.approx(row, rel=1e-9, abs=1e-6), name
        mine, theirs = got_split.get(name, {}), split.get(name, {})
        for place in set(mine) | set(theirs):  # a place with nothing in the interval may be in one of them, as 0
            zero = [0.0, 0.0, 0.0]
            assert mine.get(place, zero) == pytest.approx(theirs.get(place, zero), rel=1e-9, abs=1e-6), (name, place)
    allocations = [{"name": "t", "parent": "cluster", "share": 1.0}] + [
        {"name": n, "parent": "t", "share": s} for n, s in (("a", 0.5), ("b", 0.3), ("c", 0.2))]
    for f in compute(allocations, [], 20, hi, hi - lo, got, got_split):
        assert sum(p.owed for p in f.split) == pytest.approx(f.owed, abs=1e-6)
        assert sum(p.delivered for p in f.split) == pytest.approx(f.delivered, abs=1e-6)
