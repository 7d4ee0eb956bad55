"""The simulator's owed and delivered are the books' (issue 25, ADR 0066): for a generated small run of the
two-clusters family under any weights, each project's owed and delivered per period equal what
`steward.domain.budget.period_figures` gives on an event log of the same usage (submits, placements, starts,
preemptions, completions, the nodes, the tree and the weights); with every weight 1 the figures are those of the
run without weights, and the plain GPU-hours integrated by hand."""

from __future__ import annotations

import dataclasses
import math
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steward.domain import budget
from steward.domain.commands import ROOT
from steward.sim.generate import generate
from steward.sim.metrics import Hourly, Recorder
from steward.sim.run import simulate
from steward.sim.scenario import Scenario, load_scenario

Event = tuple[str, dict[str, Any], float]


@lru_cache(maxsize=8)
def scenario(seed: int) -> Scenario:
    tmp = Path(tempfile.mkdtemp(prefix="sim-books-"))
    sc = load_scenario(generate("two-clusters", seed, {"nodes": 4, "jobs": 40, "load": 2.0}).write(tmp))
    # periods of a few hours, so that several periods (and period edges) are compared
    return dataclasses.replace(sc, metrics=dataclasses.replace(sc.metrics, owed_period_days=0.25))


def with_weights(sc: Scenario, weights: dict[str, float] | None) -> Scenario:
    overrides = {k: v for k, v in sc.settings_overrides.items() if k != "gpu_model_weights"}
    if weights is not None:
        overrides["gpu_model_weights"] = weights
    return dataclasses.replace(sc, settings_overrides=overrides)


def history(sc: Scenario, rec: Recorder, weights: dict[str, float]) -> list[Event]:
    """The event log of the run's usage, as the ledger would record it."""
    timed: list[tuple[float, int, int, Event]] = []
    for a in sc.allocations.values():
        timed.append((0.0, 0, len(timed), ("AllocationsSet", {"parent": a.parent or ROOT, "shares": {a.name: a.share}},
                                           0.0)))
    node_at: dict[tuple[str, str], str] = {}
    for n in sc.nodes:
        node_at.setdefault((n.cluster, n.gpu_model), n.name)
        timed.append((0.0, 0, len(timed), ("NodeRegistered", {"node_id": n.name, "gpus": n.gpus,
                                                               "gpu_model": n.gpu_model, "cluster": n.cluster}, 0.0)))
    if weights:
        timed.append((0.0, 0, len(timed), ("PolicySet", {"changed": {"gpu_model_weights": weights}}, 0.0)))
    for idx, book in rec.books.items():
        job_id = sc.jobs[idx].job_id
        mine: list[tuple[float, Event]] = []
        ((start, end),) = book.demand  # one demand interval: submit to done
        models, clusters = book.request
        sub = {"job_id": job_id, "project": book.project, "gpus": book.gpus}
        if models:
            sub["gpu_models"] = list(models)
        if clusters:
            sub["clusters"] = list(clusters)
        mine.append((start, ("JobSubmitted", sub, start)))
        for k, (a, b, placement) in enumerate(book.runs):
            assignments = {node_at[(c, m)]: list(range(g)) for c, m, g in placement}
            mine.append((a, ("JobPlaced", {"job_id": job_id, "assignments": assignments}, a)))
            mine.append((a, ("JobStarted", {"job_id": job_id}, a)))
            last = k == len(book.runs) - 1 and b == end
            if not last:
                mine.append((b, ("JobPreempted", {"job_id": job_id, "requeue": True}, b)))
        mine.append((end, ("JobCompleted", {"job_id": job_id}, end)))
        for order, (t, ev) in enumerate(mine):
            timed.append((t, 1, order + 1000 * idx, ev))
    timed.sort(key=lambda x: (x[0], x[2] // 1000 if x[1] else -1, x[2]))
    return [ev for *_, ev in timed]


WEIGHT = st.sampled_from([0.1, 0.25, 0.5, 0.55, 1.0, 1.5, 2.0])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 5), h100=WEIGHT, a100=WEIGHT, v100=WEIGHT)
def test_the_simulators_owed_and_delivered_are_the_books(seed: int, h100: float, a100: float, v100: float) -> None:
    weights = {"H100": h100, "A100": a100, "V100": v100}
    sc = with_weights(scenario(seed), weights)
    rec = simulate(sc, "steward").recorder
    log = history(sc, rec, weights)
    compared = 0
    for row in rec.owed_delivered_table():
        if not row["project"]:
            continue
        lo, hi = row["start_day"] * 86400.0, row["end_day"] * 86400.0
        figures, _cap = budget.period_figures(log, lo, hi)
        books = figures.get(row["allocation"], dict.fromkeys(budget.FIGURES, 0.0))
        assert row["owed_gpu_h"] * 3600 == pytest.approx(books["owed_gpu_s"], rel=1e-9, abs=1e-6), row
        assert row["delivered_gpu_h"] * 3600 == pytest.approx(books["delivered_gpu_s"], rel=1e-9, abs=1e-6), row
        assert row["demand_gpu_h"] * 3600 == pytest.approx(books["demand_gpu_s"], rel=1e-9, abs=1e-6), row
        compared += books["owed_gpu_s"] > 0
    assert compared > 0


def plain_table(sc: Scenario, rec: Recorder) -> dict[tuple[str, int], tuple[float, float]]:
    """The unweighted figures by hand: GPUs × seconds hour by hour, owed = min(entitlement × GPUs, demand)."""
    hours, per = rec.hours, max(1, round(rec.owed_period_days * 24))
    out: dict[tuple[str, int], tuple[float, float]] = {}
    demand: dict[str, Hourly] = {p: Hourly() for p in rec.projects}
    delivered: dict[str, Hourly] = {p: Hourly() for p in rec.projects}
    for book in rec.books.values():
        for a, b in book.demand:
            demand[book.project].add(a, b, book.gpus)
        for a, b, _ in book.runs:
            delivered[book.project].add(a, b, book.gpus)
    for p in rec.projects:
        d, r = demand[p].padded(hours), delivered[p].padded(hours)
        cap_h = rec.entitlement[p] * sc.capacity * 3600.0
        for k in range(math.ceil(hours / per)):
            lo, hi = k * per, min(hours, (k + 1) * per)
            out[(p, k)] = (sum(min(cap_h, x) for x in d[lo:hi]), sum(r[lo:hi]))
    return out


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 5))
def test_with_every_weight_1_the_figures_are_the_unweighted_ones(seed: int) -> None:
    ones = simulate(with_weights(scenario(seed), {"H100": 1.0, "A100": 1.0, "V100": 1.0}), "steward")
    none = simulate(with_weights(scenario(seed), None), "steward")
    assert ones.recorder.owed_delivered_table() == none.recorder.owed_delivered_table()  # to the bit
    assert ones.figures["owed_delivered_min"] == none.figures["owed_delivered_min"]
    plain = plain_table(none.scenario, none.recorder)
    for row in none.recorder.owed_delivered_table():
        if row["project"]:
            owed, got = plain[(row["allocation"], row["period"])]
            assert row["owed_gpu_h"] * 3600 == pytest.approx(owed, rel=1e-12, abs=1e-9)
            assert row["delivered_gpu_h"] * 3600 == pytest.approx(got, rel=1e-12, abs=1e-9)
