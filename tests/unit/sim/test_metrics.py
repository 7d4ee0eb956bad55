"""The figure definitions of scenarios/README.md, on hand-made levels."""

from __future__ import annotations

import pytest

from steward.sim.metrics import HOUR_S, Hourly, Level, Recorder, percentile


def test_hourly_splits_at_hour_boundaries() -> None:
    h = Hourly()
    h.add(1800, 2 * HOUR_S + 900, 2.0)  # 30 min, 60 min, 15 min at 2 GPUs
    assert h.buckets == [3600.0, 7200.0, 1800.0]


def test_level_integrates_piecewise_constant() -> None:
    lvl = Level()
    lvl.add(0, 4)
    lvl.add(1800, -2)
    lvl.close(3600)
    assert lvl.hourly.buckets == [4 * 1800 + 2 * 1800]


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([], 50, None),
    ([7.0], 90, 7.0),
    ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
    ([0.0, 10.0], 90, 9.0),
    (list(range(11)), 90, 9.0),
])
def test_percentile_interpolates(values: list[float], q: float, expected: float | None) -> None:
    assert percentile(values, q) == expected


def recorder(capacity: int = 4) -> Recorder:
    return Recorder(capacity=capacity, entitlement={"a": 0.5, "b": 0.5}, parents={"a": None, "b": None},
                    projects=("a", "b"), large_job_gpus=4, owed_period_days=30)


def test_occupancy_uses_min_of_capacity_and_demand_per_hour() -> None:
    rec = recorder()
    rec.demand.add(0, 8)  # twice the capacity waits all hour
    rec.busy_funded.add(0, 3)  # but only 3 of 4 GPUs are busy
    rec.close(HOUR_S)
    assert rec.occupancy() == pytest.approx(0.75)


def test_owed_is_min_of_entitlement_and_demand_and_ratio_caps_at_one() -> None:
    rec = recorder()
    # a demands 4 GPUs (owed 2 = 50% of 4), gets 1; b demands 1 (owed 1), gets 3
    rec.alloc_demand["a"].add(0, 4)
    rec.alloc_delivered["a"].add(0, 1)
    rec.alloc_demand["b"].add(0, 1)
    rec.alloc_delivered["b"].add(0, 3)
    rec.close(HOUR_S)
    rows = {r["allocation"]: r for r in rec.owed_delivered_table()}
    assert rows["a"]["owed_gpu_h"] == pytest.approx(2.0)
    assert rows["a"]["ratio"] == pytest.approx(0.5)
    assert rows["b"]["ratio"] == 1.0
    figs = rec.figures("steward", "t", 0, 0.0)
    assert figs["owed_delivered_mean"] == pytest.approx(0.75)
    assert figs["owed_delivered_min"] == pytest.approx(0.5)


def test_waits_by_class_and_large() -> None:
    rec = recorder()
    rec.record_wait("debug", 1, 10.0)
    rec.record_wait("batch", 4, 100.0)
    rec.record_wait("batch", 1, 0.0)
    rec.close(1.0)
    figs = rec.figures("steward", "t", 3, 0.0)
    assert figs["wait_p50_s"] == {"debug": 10.0, "batch": 50.0, "large": 100.0, "debug_qualified": None,
                                  "debug_over_quota": None}
    assert figs["debug_qualified_fraction"] is None


@pytest.mark.parametrize(("classes", "qualified_p90", "over_p90", "fraction"), [
    # (qualified, reason, wait): the debug job's class at submit, and its wait
    ([(True, "within_quota", 10.0), (True, "within_quota", 20.0), (False, "over_quota", 500.0)], 19.0, 500.0, 2 / 3),
    # a debug job that cannot qualify (no allocation) counts in the fraction, in neither class
    ([(True, "within_quota", 10.0), (False, "no_allocation", 900.0)], 10.0, None, 0.5),
    ([(False, "over_quota", 30.0), (False, "over_quota", 40.0)], None, 39.0, 0.0),
])
def test_debug_waits_by_qualification(classes: list[tuple[bool, str, float]], qualified_p90: float | None,
                                      over_p90: float | None, fraction: float) -> None:
    """ADR 0029: a debug job's class is decided at submit; the `debug` class keeps every debug job."""
    rec = recorder()
    for qualified, reason, wait in classes:
        rec.record_wait("debug", 1, wait, rec.record_debug_class(qualified, reason))
    rec.close(1.0)
    figs = rec.figures("steward", "t", len(classes), 0.0)
    assert figs["wait_p90_s"]["debug_qualified"] == (None if qualified_p90 is None else pytest.approx(qualified_p90))
    assert figs["wait_p90_s"]["debug_over_quota"] == (None if over_p90 is None else pytest.approx(over_p90))
    assert figs["debug_qualified_fraction"] == pytest.approx(fraction)
    assert len(rec.waits["debug"]) == len(classes)


def test_fragmentation_is_averaged_over_hours_with_a_waiting_gang() -> None:
    rec = recorder()
    rec.gang_wait.set(0, 1.0)
    rec.frag.set(0, 0.5)
    rec.gang_wait.set(HOUR_S, 0.0)
    rec.frag.set(HOUR_S, 0.0)
    rec.close(3 * HOUR_S)
    assert rec.fragmentation_mean() == pytest.approx(0.5)
