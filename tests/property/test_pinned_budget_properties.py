"""Allocations pinned to a cluster in the books (ADR 0067; steward.domain.budget): an allocation's pin never
changes the figures of the allocations outside its subtree's path, nor anyone's delivered (every GPU-second
that ran is charged where it ran); a pinned allocation is owed at most what its pin's cluster could deliver
at its weights; its delivered is on its cluster when its jobs ran there (as routing places them); and the
API's fold computes the same figures as the domain."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.property.test_weighted_budget_properties import END, JOB, NODES, WEIGHTS, Event, _log

from steward.domain import budget

CLUSTERS = sorted({c for c, _m, _g in NODES.values()})


def _pinned(log: list[Event], pins: dict[str, str | None], at: float) -> list[Event]:
    """`log` with an `AllocationsSet` recording `pins` (children of "t") at `at`."""
    event: Event = ("AllocationsSet", {"parent": "t", "shares": {}, "pins": pins}, at)
    k = next((i for i, e in enumerate(log) if e[2] > at), len(log))
    return [*log[:k], event, *log[k:]]


def _capacity(cluster: str) -> float:
    return sum(g * WEIGHTS[m] for c, m, g in NODES.values() if c == cluster)


@settings(max_examples=30, deadline=None)
@given(st.lists(JOB, max_size=12), st.sampled_from(CLUSTERS), st.integers(0, 12000), st.integers(0, 10000),
       st.integers(600, 14000))
def test_a_pin_changes_no_delivered_and_nothing_outside_its_path(jobs: list[dict[str, Any]], pin: str, at: int,
                                                                 start: int, length: int) -> None:
    log = _log(jobs, WEIGHTS)
    lo, hi = float(start), float(start + length)
    before, cap_before = budget.period_figures(log, lo, hi)
    after, cap_after = budget.period_figures(_pinned(log, {"a": pin}, float(at)), lo, hi)
    empty, _ = budget.period_figures(_pinned(log, {}, float(at)), lo, hi)
    assert empty == before  # a payload pinning no one is the books before pins, to the bit
    assert cap_after == pytest.approx(cap_before, rel=1e-12)
    for name in ("b", "c"):  # unpinned, outside the pinned node's path: unchanged (demand and delivered to the
        # bit; entitled and owed up to rounding, the pin's event time cutting the hour's capacity in two sums)
        assert after[name]["demand_gpu_s"] == before[name]["demand_gpu_s"], name
        assert after[name] == pytest.approx(before[name], rel=1e-12, abs=1e-9), name
    for name, row in before.items():  # delivered is where jobs ran: a pin never drops nor adds any
        assert after[name]["delivered_gpu_s"] == row["delivered_gpu_s"], name
        assert after[name]["entitled_gpu_s"] == pytest.approx(row["entitled_gpu_s"], rel=1e-12), name


@settings(max_examples=30, deadline=None)
@given(st.lists(JOB, max_size=12), st.sampled_from(CLUSTERS), st.integers(0, 10000), st.integers(600, 14000))
def test_a_pinned_allocation_is_owed_at_most_what_its_cluster_could_deliver(
        jobs: list[dict[str, Any]], pin: str, start: int, length: int) -> None:
    log = _pinned(_log([j | {"project": "a", "gpus": 4} for j in jobs], WEIGHTS), {"a": pin}, 0.0)
    lo, hi = float(start), float(start + length)
    figures, _ = budget.period_figures(log, lo, hi)
    a = figures["a"]
    assert a["owed_gpu_s"] <= _capacity(pin) * (hi - lo) + 1e-6
    assert a["owed_gpu_s"] <= min(a["entitled_gpu_s"], a["demand_gpu_s"]) + 1e-6


@settings(max_examples=30, deadline=None)
@given(st.lists(JOB, max_size=12), st.sampled_from(CLUSTERS), st.integers(0, 10000), st.integers(600, 14000))
def test_a_pinned_allocation_s_delivered_is_only_on_its_cluster(jobs: list[dict[str, Any]], pin: str, start: int,
                                                                length: int) -> None:
    # as routing places them: a's jobs on a node of its pin's cluster only
    mine = sorted(n for n, (c, _m, _g) in NODES.items() if c == pin)
    placed = [j | {"node": mine[k % len(mine)], "clusters": ()} if j["project"] == "a" else j
              for k, j in enumerate(jobs)]
    log = _pinned(_log(placed, WEIGHTS), {"a": pin}, 0.0)
    split: budget.Split = {}
    budget.period_figures(log, float(start), float(start + length), split=split)
    for (cluster, _model), (_owed, delivered, _demand) in split.get("a", {}).items():
        if cluster != pin:
            assert delivered == pytest.approx(0.0, abs=1e-9), cluster


def test_a_pinned_allocation_s_owed_hand_computed() -> None:
    """a (share 0.5 of 13.4 weighted GPUs: 6.7) pinned to jupiter (8 A100 × 0.55 + 4 V100 × 0.25 = 5.4) wants
    12 V100-or-A100 GPUs for the hour: valued at V100's 0.25 (3.0 per s) it is owed 3.0 per s; wanting 12 A100
    (6.6 per s) it is owed 5.4 per s, the cluster's whole capacity, not its 6.7 entitlement."""
    hour = 3600.0
    for models, owed in (((), 3.0), (("A100",), 5.4)):
        log = _log([], WEIGHTS)
        log.append(("JobSubmitted", {"job_id": "x", "project": "a", "gpus": 12, "gpu_models": list(models)}, 0.0))
        log = _pinned(log, {"a": "jupiter"}, 0.0)
        figures, _ = budget.period_figures(log, 0.0, hour)
        assert figures["a"]["entitled_gpu_s"] == pytest.approx(6.7 * hour)
        assert figures["a"]["owed_gpu_s"] == pytest.approx(owed * hour), models
        unpinned, _ = budget.period_figures(_pinned(log, {"a": None}, 0.0), 0.0, hour)
        assert unpinned["a"]["owed_gpu_s"] >= figures["a"]["owed_gpu_s"]


@settings(max_examples=30, deadline=None)
@given(st.lists(JOB, max_size=12), st.sampled_from(CLUSTERS), st.integers(0, 12000), st.integers(0, 10000),
       st.integers(600, 14000))
def test_the_api_s_fold_computes_pinned_figures_as_the_domain_does(jobs: list[dict[str, Any]], pin: str, at: int,
                                                                   start: int, length: int) -> None:
    from steward.api.figures import OverviewFold

    log = _pinned(_log(jobs, WEIGHTS), {"a": pin}, float(at))
    fold = OverviewFold()
    for position, (kind, p, t) in enumerate(log, 1):
        fold.apply(position, kind, p, t)
    lo, hi = float(start), float(start + length)
    expected, _cap = budget.period_figures(log, lo, hi)
    got = fold.period_figures(lo, hi, hi + 1.0)
    assert set(got) == set(expected)
    for name, row in expected.items():
        assert got[name] == pytest.approx(row, rel=1e-9, abs=1e-6), name


assert END > 0
