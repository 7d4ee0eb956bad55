"""The figure definitions of scenarios/README.md, on hand-made levels."""

from __future__ import annotations

import pytest

from steward.sim.metrics import HOUR_S, Hourly, Level, Recorder, independent_time, percentile


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


def test_owed_is_min_of_entitlement_and_demand_and_only_the_credit_caps_at_one() -> None:
    rec = recorder()
    # a demands 4 GPUs (owed 2 = 50% of 4), gets 1; b runs 3 (a running job's demand is its delivery:
    # owed 2, the entitlement), gets 3
    for key, (project, gpus, ran) in enumerate([("a", 3, False), ("a", 1, True), ("b", 3, True)]):
        rec.book_submit(key, project, gpus, ((), ()), 0.0)
        if ran:
            rec.book_start(key, 0.0, ())
    rec.close(HOUR_S)
    rows = {r["allocation"]: r for r in rec.owed_delivered_table()}
    assert rows["a"]["owed_gpu_h"] == pytest.approx(2.0)
    assert rows["a"]["ratio"] == pytest.approx(0.5)
    assert rows["b"]["ratio"] == pytest.approx(1.5)  # over-delivery, shown as it is
    assert (rows["b"]["credited"], rows["a"]["credited"]) == (1.0, pytest.approx(0.5))  # what the mean averages
    figs = rec.figures("steward", "t", 0, 0.0)
    assert figs["owed_delivered_mean"] == pytest.approx(0.75)
    assert figs["owed_delivered_min"] == pytest.approx(0.5)
    assert "by_cluster" not in figs and "routed_jobs" not in figs  # one cluster: no per-cluster figures


NODES = (("h", 8, "H100", "ceres"), ("a", 8, "A100", "jupiter"), ("v", 8, "V100", "jupiter"))
WEIGHTS = {"H100": 1.0, "A100": 0.5, "V100": 0.25}


@pytest.mark.parametrize(("jobs", "owed_h", "delivered_h", "by_cluster"), [
    # jobs: (GPUs, request (models, clusters), run: (start, end, node) or None), each submitted at 0, done at
    # 3600 s; capacity 8 × (1 + 0.5 + 0.25) = 14 weighted GPUs, "a"'s entitlement 0.5: 7 an hour
    # a waiting 4-GPU job accepting anything: valued at the cheapest place (V100, 0.25) -> demand 1, owed 1
    ([(4, ((), ()), None)], 1.0, 0.0, {"jupiter": (1.0, 0.0)}),
    # it runs the whole hour on H100: its demand is what it is charged, 4 (ADR 0062)
    ([(4, ((), ()), (0.0, HOUR_S, "h"))], 4.0, 4.0, {"ceres": (4.0, 4.0)}),
    # half an hour waiting (cheapest 0.25), half on A100 (0.5): demand 0.5 + 1, delivered 1
    ([(4, ((), ()), (1800.0, HOUR_S, "a"))], 1.5, 1.0, {"jupiter": (1.5, 1.0)}),
    # asks H100 only: valued at 1.0 while it waits; 8 GPUs -> demand 8, owed capped at the entitlement 7
    ([(8, (("H100",), ()), None)], 7.0, 0.0, {"ceres": (7.0, 0.0)}),
    # pinned to jupiter, runs on V100: 4 × 0.25
    ([(4, ((), ("jupiter",)), (0.0, HOUR_S, "v"))], 1.0, 1.0, {"jupiter": (1.0, 1.0)}),
])
def test_owed_and_delivered_are_the_books_weighted_gpu_hours(
        jobs: list[tuple[int, tuple[tuple[str, ...], tuple[str, ...]], tuple[float, float, str] | None]],
        owed_h: float, delivered_h: float, by_cluster: dict[str, tuple[float, float]]) -> None:
    rec = Recorder(capacity=24, entitlement={"a": 0.5, "b": 0.5}, parents={"a": None, "b": None},
                   projects=("a", "b"), large_job_gpus=4, owed_period_days=30, nodes=NODES, weights=WEIGHTS)
    assert rec.weighted_capacity == 14.0
    for key, (gpus, request, run) in enumerate(jobs):
        rec.book_submit(key, "a", gpus, request, 0.0)
        if run is not None:
            start, end, node = run
            rec.book_start(key, start, ((node, gpus),))
            rec.book_stop(key, end, end == HOUR_S)
        rec.book_stop(key, HOUR_S, True)
    rec.close(HOUR_S)
    row = next(r for r in rec.owed_delivered_table() if r["allocation"] == "a")
    assert (row["owed_gpu_h"], row["delivered_gpu_h"]) == (pytest.approx(owed_h), pytest.approx(delivered_h))
    clusters = rec._period_rows()[0][1]
    assert {c: (pytest.approx(o / HOUR_S), pytest.approx(d / HOUR_S)) for c, (o, d) in clusters.items()} == by_cluster


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


# --- issue 18: churn, completion and finish-time fairness figures (metrics.py docstring) ---------------


@pytest.mark.parametrize(("ran_s", "flap"), [(0.0, True), (30.0, True), (60.0, True), (60.5, False), (3600.0, False)])
def test_a_flap_is_a_preemption_within_the_restart_overhead_of_the_start(ran_s: float, flap: bool) -> None:
    rec = recorder()
    rec.restart_overhead_s = 60.0
    rec.preemptions += 1
    rec.preempted(ran_s)
    rec.close(1.0)
    figs = rec.figures("steward", "t", 1, 0.0)
    assert figs["flaps"] == int(flap)
    assert figs["flaps_fraction"] == float(flap)


def test_preemptions_per_thousand_delivered_gpu_hours() -> None:
    rec = recorder()
    rec.busy_funded.add(0, 3)  # 3 GPUs for 10 h funded + 1 GPU for 10 h unfunded: 40 GPU-h delivered
    rec.busy_unfunded.add(0, 1)
    rec.preemptions = 2
    rec.close(10 * HOUR_S)
    figs = rec.figures("steward", "t", 0, 0.0)
    assert figs["preemptions_per_1k_gpu_h"] == pytest.approx(2 * 1000 / 40)
    assert figs["flaps"] == 0 and figs["flaps_fraction"] == 0.0


def test_no_preemption_no_delivery_gives_zeros_and_no_jobs_done_gives_none() -> None:
    rec = recorder()
    rec.close(1.0)
    figs = rec.figures("steward", "t", 0, 0.0)
    assert (figs["preemptions_per_1k_gpu_h"], figs["flaps_fraction"]) == (0.0, 0.0)
    assert all(figs[k] is None for k in ("jct_mean_s", "jct_p99_s", "makespan_s", "rho_mean", "rho_max",
                                         "rho_gt1_fraction"))


@pytest.mark.parametrize(("duration", "gpus", "capacity", "contenders", "expected"), [
    (100.0, 1, 8, 1, 100.0),  # alone: its duration
    (100.0, 2, 8, 4, 100.0),  # 2 GPUs fit in a quarter of 8
    (100.0, 4, 8, 4, 200.0),  # 4 GPUs on a 2-GPU share: twice as long
    (100.0, 8, 8, 1, 100.0),  # the whole cluster, alone
    (100.0, 3, 8, 3, 112.5),  # 3 GPUs on 8/3: stretched by 9/8
])
def test_independent_time_is_the_duration_on_one_nth_of_the_cluster(
        duration: float, gpus: int, capacity: int, contenders: int, expected: float) -> None:
    assert independent_time(duration, gpus, capacity, contenders) == pytest.approx(expected)


def test_contenders_count_tenants_with_work_present() -> None:
    rec = recorder()
    assert rec.job_arrived("a", 0.0) == 1
    assert rec.job_arrived("a", 5.0) == 1  # a second job of the same tenant
    assert rec.job_arrived("b", 10.0) == 2
    rec.job_done("a", 0.0, 20.0, 20.0, 1, 1)
    assert rec.job_arrived("c", 30.0) == 3  # a still has its second job
    rec.job_done("a", 5.0, 40.0, 10.0, 1, 1)
    assert rec.job_arrived("d", 50.0) == 3  # b, c, d
    assert rec.present == {"b": 1, "c": 1, "d": 1}


def test_jct_makespan_and_rho_by_hand() -> None:
    rec = recorder(capacity=4)
    # (tenant, submit, done, duration, gpus): N at submit is 1, 2, 2, 2
    jobs = [("a", 0.0, 100.0, 100.0, 4), ("b", 10.0, 410.0, 100.0, 4), ("b", 20.0, 220.0, 200.0, 1),
            ("a", 50.0, 850.0, 100.0, 2)]
    contenders = [rec.job_arrived(t, s) for t, s, *_ in jobs]
    assert contenders == [1, 2, 2, 2]
    for (t, s, d, dur, g), n in zip(jobs, contenders, strict=True):
        rec.job_done(t, s, d, dur, g, n)
    rec.close(850.0)
    figs = rec.figures("steward", "t", 4, 0.0)
    # JCTs 100, 400, 200, 800; T_independent 100 (alone), 200 (4 GPUs on 2), 200 (1 on 2), 100 (2 on 2)
    jct = [100.0, 400.0, 200.0, 800.0]
    rho = [1.0, 2.0, 1.0, 8.0]
    assert figs["jct_mean_s"] == pytest.approx(375.0)
    assert figs["jct_p99_s"] == pytest.approx(percentile(jct, 99))
    assert figs["jct_p99_s"] == pytest.approx(400.0 + 0.97 * 400.0)  # (4 - 1) × 0.99 = 2.97 between 400 and 800
    assert figs["makespan_s"] == pytest.approx(850.0)
    assert figs["rho_mean"] == pytest.approx(3.0)
    assert figs["rho_p50"] == pytest.approx(1.5)
    assert figs["rho_p90"] == pytest.approx(2.0 + 0.7 * 6.0)
    assert figs["rho_max"] == pytest.approx(8.0)
    assert figs["rho_gt1_fraction"] == pytest.approx(0.5)
    assert [(d - s) / t for s, d, t in rec.done] == pytest.approx(rho)


PERIOD_S = 30 * 86400.0


def shifted_run(periods: int) -> Recorder:
    shift = periods * PERIOD_S
    rec = Recorder(capacity=4, entitlement={"a": 0.5, "b": 0.5}, parents={"a": None, "b": None},
                   projects=("a", "b"), large_job_gpus=4, owed_period_days=30, start=shift + 1800.0)
    rec.demand.add(shift + 1800.0, 8)
    rec.busy_funded.add(shift + 1800.0, 3)
    rec.book_submit(0, "a", 3, ((), ()), shift + 1800.0)
    rec.book_start(0, shift + 1800.0, ())
    rec.book_stop(0, shift + 5 * HOUR_S, True)
    rec.close(shift + 5 * HOUR_S)
    return rec


@pytest.mark.parametrize("periods", [1, 1000])
def test_the_hourly_figures_begin_at_the_first_submits_period(periods: int) -> None:
    """A trace far from time 0 (epoch seconds: ~20,000 periods of 30 days) kept a bucket for every hour since 0 in
    every level (epoch milliseconds ran out of memory); its buckets begin at its first period, and a run shifted by
    whole periods reports the same figures."""
    rec, ref = shifted_run(periods), shifted_run(0)
    assert len(rec.demand.hourly.buckets) == len(ref.demand.hourly.buckets) == 5 and rec.hours == ref.hours == 5
    assert rec.occupancy() == ref.occupancy() == pytest.approx(0.675)  # 48,600 busy of 72,000 wanted GPU-s
    (row,) = [r for r in rec.owed_delivered_table() if r["allocation"] == "a"]
    (row0,) = [r for r in ref.owed_delivered_table() if r["allocation"] == "a"]
    assert (row["period"], row["start_day"], row0["start_day"]) == (0, periods * 30.0, 0.0)
    assert (row["owed_gpu_h"], row["delivered_gpu_h"]) == (row0["owed_gpu_h"], row0["delivered_gpu_h"]) == (9.5, 13.5)
    assert rec.figures("steward", "t", 1, 0.0) == ref.figures("steward", "t", 1, 0.0)
