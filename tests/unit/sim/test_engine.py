"""Small scenarios whose figures can be computed by hand, run through the real policy cycle.

Conventions (see steward/sim/engine.py): checkpoint every 1800 s of work, restart overhead 60 s,
grace 120 s; lost work = work since the last checkpoint + restart overhead paid.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from steward.policy.model import CycleResult, PendingJob, Placement, Preemption, RunningJob, Snapshot
from steward.sim.engine import (
    MIN_CYCLE_LIMIT,
    Engine,
    last_checkpoint,
    next_checkpoint,
    running_with,
    with_room_freed,
)
from steward.sim.errors import ScenarioError
from steward.sim.policies import settings_for, tree_for
from steward.sim.run import run_scenario
from steward.sim.scenario import DEFAULT_MAX_CYCLES_PER_JOB, load_scenario
from tests.unit.sim.builders import job, write_scenario


@dataclass
class Case:
    name: str
    jobs: list[tuple[Any, ...]]
    expect: dict[str, Any]
    policy: str = "steward"
    nodes: int = 1
    tree: dict[str, Any] = field(default_factory=lambda: {"a": 0.5, "b": 0.5})
    metrics: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("one job runs at once",
         [job("j1", duration=3600, gpus=2)],
         {"occupancy": 1.0, "wait_p50_s.batch": 0.0, "owed_delivered_mean": 1.0, "preemptions": 0,
          "lost_gpu_hours_fraction": 0.0}),
    Case("second job waits for the first (FIFO inside a project)",
         [job("j1", duration=3600, gpus=4), job("j2", submit=100, duration=3600, gpus=4)],
         {"occupancy": 1.0, "wait_p50_s.batch": 1750.0, "wait_p90_s.batch": 3150.0,
          "wait_p50_s.large": 1750.0}),
    Case("a gang that cannot fit leaves GPUs idle: occupancy and fragmentation",
         [job("j1", duration=3600, gpus=1), job("j2", duration=3600, gpus=8)],
         # hour 0: 1 of 8 GPUs busy while 9 are demanded; hour 1: the gang runs
         {"occupancy": (3600 + 8 * 3600) / (2 * 8 * 3600), "fragmentation_mean": 7 / 8,
          "wait_p50_s.large": 3600.0},
         nodes=2),
    Case("unfunded work is preempted at once for funded work; resumable keeps its checkpoint",
         [job("j1", duration=7200, gpus=4, min_runtime=0), job("j2", submit=2000, duration=3600, gpus=4,
                                                              tenant="b", min_runtime=3600)],
         # ADR 0007: an unfunded victim's grace is 20 s under steward. j1 stops at 2020, keeps
         # 1800 s, loses 220 s; restarts at 5620 paying 60 s
         {"preemptions": 1, "protection_violations": 0, "wait_p90_s.batch": 0.9 * 20,
          "lost_gpu_hours_fraction": (4 * 220 + 4 * 60) / (4 * (2020 + 5460) + 4 * 3600)}),
    Case("the baselines give an unfunded victim the full grace",
         [job("j1", duration=7200, gpus=4, min_runtime=0), job("j2", submit=2000, duration=3600, gpus=4,
                                                              tenant="b", min_runtime=3600)],
         # j1 stops at 2120 (grace), keeps 1800 s, loses 320 s; restarts at 5720 paying 60 s
         {"preemptions": 1, "protection_violations": 0, "wait_p90_s.batch": 108.0,
          "lost_gpu_hours_fraction": (4 * 320 + 4 * 60) / (4 * (2120 + 5460) + 4 * 3600)},
         policy="ai2"),
    Case("a non-resumable victim restarts from zero",
         [job("j1", duration=7200, gpus=4, min_runtime=0, resumable=0),
          job("j2", submit=1000, duration=3600, gpus=4, tenant="b", min_runtime=3600)],
         # stopped at 1020 (the 20 s unfunded grace): all 1020 s lost, and 60 s paid on the restart
         {"preemptions": 1,
          "lost_gpu_hours_fraction": (4 * 1020 + 4 * 60) / (4 * (1020 + 7260) + 4 * 3600)}),
    Case("ADR 0028: a preemption that costs more than its beneficiary can gain is refused",
         [job("j1", duration=7200, gpus=4, min_runtime=0, resumable=0),
          job("j2", submit=2000, duration=3600, gpus=4, tenant="b", min_runtime=3600)],
         # j1 would lose 4 x (2020 + 60) GPU-s; j2 can gain at most 4 x (1800 - 20): j2 waits for the end
         {"preemptions": 0, "lost_gpu_hours_fraction": 0.0, "wait_p90_s.batch": 0.9 * 5200}),
    Case("fifo-priority never preempts: the funded job waits for the end",
         [job("j1", duration=7200, gpus=4, min_runtime=0), job("j2", submit=2000, duration=3600, gpus=4,
                                                              tenant="b", min_runtime=3600)],
         {"preemptions": 0, "wait_p90_s.batch": 0.9 * 5200, "lost_gpu_hours_fraction": 0.0},
         policy="fifo-priority"),
    Case("after protection, strict improvement preempts the over-served allocation",
         [job("j1", duration=7200, gpus=4, min_runtime=600),
          job("j2", submit=5000, duration=3600, gpus=4, tenant="b", min_runtime=3600)],
         # a used 4 x 5000 GPU-s; b after its 1 h protection would have 4 x 3600 < 20000: preempt.
         # j1 stops at 5120 keeping 3600 s (2 checkpoints): loses 1520 s, then pays 60 s on restart
         {"preemptions": 1, "protection_violations": 0,
          "lost_gpu_hours_fraction": (4 * 1520 + 4 * 60) / (4 * (5120 + 3660) + 4 * 3600)}),
    Case("no strict improvement: the waiting allocation would end up more served, no preemption",
         [job("j1", duration=7200, gpus=4, min_runtime=600),
          job("j2", submit=1000, duration=3600, gpus=4, tenant="b", min_runtime=3600)],
         {"preemptions": 0, "wait_p90_s.batch": 0.9 * 6200}),
    Case("a protected job is never preempted",
         [job("j1", duration=7200, gpus=4), job("j2", submit=5000, duration=3600, gpus=4, tenant="b")],
         {"preemptions": 0, "protection_violations": 0, "wait_p90_s.batch": 0.9 * 2200}),
    Case("owed vs delivered per period: b waits two hours for its owed GPU",
         [job("a1", duration=7200, gpus=2), job("a2", duration=7200, gpus=2),
          job("b1", duration=7200, gpus=2, tenant="b")],
         # 2-hour periods; period 0: a owed 3 GPUs x 2 h, got 4; b owed 1 GPU x 2 h, got 0;
         # period 1: b owed 2 h, got 2 GPUs x 2 h; a owes nothing (no demand)
         {"owed_delivered_mean": round(2 / 3, 6), "owed_delivered_min": 0.0},
         tree={"a": 0.75, "b": 0.25}, metrics={"owed_period_days": 2 / 24}),
]


def figure(figs: dict[str, Any], key: str) -> Any:
    head, _, rest = key.partition(".")
    return figs[head][rest] if rest else figs[head]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hand_computed_figures(tmp_path: Path, case: Case) -> None:
    path = write_scenario(tmp_path, case.jobs, nodes=case.nodes, tree=case.tree, metrics=case.metrics)
    result = run_scenario(path, case.policy)
    figs = result.to_json()
    assert result.recorder.unfinished == 0
    for key, want in case.expect.items():
        assert figure(figs, key) == pytest.approx(want, abs=1e-6), key


def test_requeued_job_keeps_its_submit_time_and_first_start(tmp_path: Path) -> None:
    jobs = [job("j1", duration=7200, gpus=4, min_runtime=0),
            job("j2", submit=2000, duration=3600, gpus=4, tenant="b", min_runtime=3600)]
    result = run_scenario(write_scenario(tmp_path, jobs), "steward")
    # j1's wait is its first start only; j2 waits for j1's grace (20 s for unfunded work, ADR 0007)
    assert sorted(result.recorder.waits["batch"]) == [0.0, 20.0]
    assert result.recorder.end == pytest.approx(5620 + 60 + 5400)


# every field of RunningJob, none at its default: a field added to RunningJob fails the first assertion below
EVERY_FIELD: dict[str, Any] = dict(
    id="j", project="p", gpus=3, placement=(("n1", 2), ("n2", 1)), started_at=10.0, protected_until=70.0,
    funded=True, last_checkpoint_at=40.0, resumable=False, klass="interactive", submitted_at=5.0,
    preemption_requested_at=65.0, min_runtime_s=60.0, priority=2, topology_depth=1, claimed_for="w",
    gpu_models=("H100",), clusters=("ceres",), pin="ceres",
)


@pytest.mark.parametrize(("checkpoint", "requested", "claimed_for"),
                         [(50.0, None, None), (None, 80.0, "x"), (55.0, 90.0, None)])
def test_running_with_is_replace_field_by_field(checkpoint: float | None, requested: float | None,
                                                claimed_for: str | None) -> None:
    assert set(EVERY_FIELD) == {f.name for f in dataclasses.fields(RunningJob)}
    rj = RunningJob(**EVERY_FIELD)
    assert running_with(rj, checkpoint, requested, claimed_for) == dataclasses.replace(
        rj, last_checkpoint_at=checkpoint, preemption_requested_at=requested,
        claimed_for=rj.claimed_for if claimed_for is None else claimed_for)


# every field of PendingJob, none at its default (see EVERY_FIELD)
EVERY_PENDING_FIELD: dict[str, Any] = dict(
    id="j", project="p", gpus=3, submitted_at=5.0, min_runtime_s=60.0, resumable=False, klass="debug",
    priority=2, topology_depth=1, previous_node="n1", room_freed_at=3.0, gpu_models=("H100", "A100"),
    clusters=("ceres",), pin="ceres",
)


def test_with_room_freed_is_replace_field_by_field() -> None:
    assert set(EVERY_PENDING_FIELD) == {f.name for f in dataclasses.fields(PendingJob)}
    pj = PendingJob(**EVERY_PENDING_FIELD)
    assert with_room_freed(pj, 9.0) == dataclasses.replace(pj, room_freed_at=9.0)


@pytest.mark.parametrize(
    ("floor", "sets", "qualified", "over_quota"),
    [
        # quota 1: d2 is over a's debug quota (d1 runs): ordinary funded work, no trade even when
        # trades are on; b2 (b is under-served) takes u's GPU, and d2 waits for d1 to end
        ("1", {"claim_hold_s": "30", "lane_trade": "true"}, [0.0], [295.0]),
        ("1", {}, [0.0], [295.0]),
        # quota 2: d2 is qualified; ADR 0007's search takes a's own unfunded job u (20 s grace), once
        # u has run its settle time (ADR 0028: it started 5 s before d2; without one, at once)
        ("2", {"settle_s": "null"}, [0.0, 20.0], []),
        ("2", {"claim_hold_s": "30", "lane_trade": "true", "settle_s": "null"}, [0.0, 20.0], []),
        ("2", {}, [0.0, 295.0], []),
    ],
)
def test_the_quota_through_the_engine(tmp_path: Path, floor: str, sets: dict[str, str],
                                      qualified: list[float], over_quota: list[float]) -> None:
    """ADR 0021, 0029, hand-computed on one 4-GPU node: a holds its entitlement (a1 and the debug
    job d1, 2 GPUs); u is a's unfunded work; b2 is b's funded batch job, waiting. The debug quota is
    the same for every allocation (`debug_quota_floor_gpus`, share 0). A debug job's class is decided
    at submit on the engine's state."""
    jobs = [
        job("a1", duration=20000),
        job("d1", duration=300, klass="debug", min_runtime=300),
        job("u", duration=20000, min_runtime=0),
        job("b1", duration=20000, tenant="b"),
        job("d2", submit=5, duration=300, klass="debug", min_runtime=300),
        job("b2", submit=10, duration=1000, tenant="b"),
    ]
    path = write_scenario(tmp_path, jobs)
    result = run_scenario(path, "steward", {"debug_quota_share": "0", "debug_quota_floor_gpus": floor, **sets})
    waits = result.recorder.waits
    assert sorted(waits["debug_qualified"]) == qualified
    assert sorted(waits["debug_over_quota"]) == over_quota
    assert sorted(waits["debug"]) == sorted(qualified + over_quota)
    assert result.to_json()["protection_violations"] == 0


@pytest.mark.parametrize(("policy", "fraction", "qualified", "over_quota"), [
    ("steward", 0.4, [0.0, 0.0], [0.0]),
    ("ai2", 1.0, [0.0, 0.0, 0.0, 0.0, 0.0], []),  # no lane, no quota: every debug job counts as qualified
])
def test_debug_classes_at_submit_on_a_hand_made_scenario(tmp_path: Path, policy: str, fraction: float,
                                                         qualified: list[float], over_quota: list[float]) -> None:
    """ADR 0029 on an idle 8-GPU node, every job starting at once: a's manager set a debug quota of 1
    GPU (scenario `debug_quota:`); d1 qualifies, d2 (d1 runs) is over the quota, d3 is b's (default
    quota 4); a debug job asking no protection and one with no allocation qualify for nothing and
    count only in `debug` and in the fraction's denominator."""
    jobs = [
        job("d1", duration=300, klass="debug", min_runtime=300),
        job("d2", submit=1, duration=300, klass="debug", min_runtime=300),
        job("d3", submit=2, duration=300, klass="debug", min_runtime=300, tenant="b"),
        job("free", submit=3, duration=300, klass="debug", min_runtime=0),
        job("stray", submit=4, duration=300, klass="debug", min_runtime=300, tenant="nobody"),
    ]
    path = write_scenario(tmp_path, jobs, gpus_per_node=8, tree={"a": {"share": 0.5, "debug_quota": 1}, "b": 0.5})
    result = run_scenario(path, policy)
    figures = result.to_json()
    assert figures["debug_qualified_fraction"] == fraction
    assert result.recorder.waits["debug_qualified"] == qualified
    assert result.recorder.waits["debug_over_quota"] == over_quota
    assert len(result.recorder.waits["debug"]) == 5


@pytest.mark.parametrize(("quota", "message"), [
    (-1, "debug_quota must be >= 0 GPUs, got -1"), (1.5, "debug_quota must be a whole number of GPUs, got 1.5")])
def test_a_bad_debug_quota_in_a_scenario_is_one_clear_error(tmp_path: Path, quota: float, message: str) -> None:
    path = write_scenario(tmp_path, [job("j1")], tree={"a": {"share": 0.5, "debug_quota": quota}, "b": 0.5})
    with pytest.raises(ScenarioError, match=f"tree.a: .*{message}"):
        run_scenario(path, "steward")


def thrash(snapshot: Snapshot) -> CycleResult:
    """A policy in a preemption loop: it preempts every running job at once, starts every waiting one
    that fits on the first node and asks to be woken a second later, so no run reaches a checkpoint
    and the trace never ends."""
    now = snapshot.now
    node = snapshot.nodes[0].id
    victims = tuple(
        Preemption(victim_id=r.id, for_job_id=r.id, reason="unfunded", grace_ends_at=now + 20.0, lost_gpu_s=0.0,
                   evidence={}) for r in snapshot.running if r.preemption_requested_at is None)
    free = snapshot.nodes[0].gpus - sum(g for r in snapshot.running for n, g in r.placement if n == node)
    placements = []
    for p in snapshot.pending:
        if p.gpus <= free:
            free -= p.gpus
            placements.append(Placement(job_id=p.id, project=p.project, assignments=((node, p.gpus),),
                                        funded=False, protected_until=now, evidence={}))
    return CycleResult(now=now, placements=tuple(placements), preemptions=victims, stops=(), explanations={},
                       reservation=None, fragmentation=0.0, order=(), evidence={"wake_at": now + 1.0})


@pytest.mark.parametrize(("per_job", "jobs", "limit"), [
    (None, 0, None),  # null: no cut-off (not run to the end here: it would never end)
    (200.0, 3, MIN_CYCLE_LIMIT),  # the floor: a tiny trace is not cut at 600 cycles
    (500.0, 3, 1500),
])
def test_the_storm_cut_off_limit(tmp_path: Path, per_job: float | None, jobs: int, limit: int | None) -> None:
    specs = [job(f"j{k}", duration=7200, gpus=1, min_runtime=0) for k in range(max(1, jobs))]
    scenario = load_scenario(write_scenario(tmp_path, specs), {"sim.max_cycles_per_job": per_job})
    engine = Engine(scenario, settings_for("fifo-priority", scenario), tree_for(scenario), thrash)
    assert engine.cycle_limit == (None if per_job is None else max(limit or 0, MIN_CYCLE_LIMIT))


def test_a_preemption_loop_is_cut_off_and_says_so(tmp_path: Path) -> None:
    specs = [job(f"j{k}", duration=7200, gpus=4, min_runtime=0) for k in (1, 2)]
    scenario = load_scenario(write_scenario(tmp_path, specs), {})
    assert scenario.sim.max_cycles_per_job == DEFAULT_MAX_CYCLES_PER_JOB
    engine = Engine(scenario, settings_for("fifo-priority", scenario), tree_for(scenario), thrash)
    rec = engine.run()
    figs = rec.figures("thrash", scenario.name, 1, 0.0)
    assert rec.cut_off_at_cycle == engine.stats.cycles == MIN_CYCLE_LIMIT
    assert figs["cut_off"] == {"at_cycle": MIN_CYCLE_LIMIT, "at_s": rec.end, "unfinished_jobs": 2}
    assert figs["preemptions"] == figs["flaps"] >= 100  # every one within the restart overhead of a start


def test_a_run_that_ends_reports_no_cut_off(tmp_path: Path) -> None:
    result = run_scenario(write_scenario(tmp_path, [job("j1", duration=3600, gpus=1)]), "steward")
    assert "cut_off" not in result.figures and result.recorder.cut_off_at_cycle is None


@pytest.mark.parametrize(("value", "message"), [
    (0, "max_cycles_per_job: must be > 0"), (-1, "max_cycles_per_job"), ("many", "max_cycles_per_job")])
def test_a_bad_cut_off_is_one_clear_error(tmp_path: Path, value: object, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        load_scenario(write_scenario(tmp_path, [job("j1", duration=3600, gpus=1)]), {"sim.max_cycles_per_job": value})


# ---- the checkpoint refresh at an instant reached by adding the interval ------------------------

# 261185.264 + 1800 + 1800 is 264785.26399999997, and (that - 261185.264) / 1800 is just below 2: the quotient
# alone names the checkpoint at base + 1800, whose next one (base + 1800 + 1800) is the very instant
BASE, LATE = 261185.264, 261185.264 + 1800.0 + 1800.0


@pytest.mark.parametrize(("base", "interval", "now", "expected"), [
    (0.0, 1800.0, 0.0, 0.0),
    (0.0, 1800.0, 1799.0, 0.0),
    (0.0, 1800.0, 1800.0, 1800.0),
    (60.0, 1800.0, 5000.0, 3660.0),
    (BASE, 1800.0, LATE - 1.0, BASE + 1800.0),
    (BASE, 1800.0, LATE, LATE),  # the quotient rounds down past it: the checkpoint due now is the last
    (0.1, 0.2, 0.1 + 0.2 + 0.2, 0.1 + 0.2 + 0.2),
])
def test_the_last_checkpoint_leaves_the_next_one_ahead(base: float, interval: float, now: float,
                                                       expected: float) -> None:
    last = last_checkpoint(base, interval, now)
    assert last == pytest.approx(expected, abs=1e-6)
    assert last + interval > now  # what the heap waits for next is ahead: the refresh ends
    assert last <= now


def test_the_last_checkpoint_is_the_quotients_wherever_that_one_ends() -> None:
    """Where the quotient's checkpoint already leaves the next one ahead, the value is unchanged (so
    every run that ended before the fix decides the same)."""
    for base in (0.0, 60.0, 1234.567, BASE):
        for now in (base + d for d in (0.0, 1.0, 1799.999, 1800.0, 5400.5, 86400.0 * 3 + 0.001)):
            k_last = base + math.floor((now - base) / 1800.0) * 1800.0
            if k_last + 1800.0 > now:
                assert last_checkpoint(base, 1800.0, now) == k_last


@pytest.mark.timeout(30)
def test_a_cycle_at_a_checkpoint_reached_by_adding_the_interval_ends(tmp_path: Path) -> None:
    """A resumable job runs from BASE; another arrives at BASE + 1800 + 1800 (the float a jittered
    gang-heavy-n32-l2-s0 reached): before the fix the cycle there refreshed the checkpoint forever."""
    specs = [job("a1", submit=BASE, duration=7200, gpus=1), job("b1", submit=repr(LATE), duration=600, gpus=1)]
    result = run_scenario(write_scenario(tmp_path, specs), "steward")
    assert result.recorder.unfinished == 0 and "cut_off" not in result.figures


# ---- an interval below the clock's resolution (robustness sweep, session 25) -------------------------------------

EPOCH_MS = 1.7e12  # a trace written in epoch milliseconds: the spacing of floats there is 2.4e-4 s


@pytest.mark.parametrize(("base", "interval", "now"), [
    (EPOCH_MS, 1e-6, EPOCH_MS + 100.0),
    (EPOCH_MS, 1e-6, EPOCH_MS),
    (1e15, 0.01, 1e15 + 3600.0),
    (0.0, 1e-300, 5.0),
])
def test_an_interval_below_the_clocks_resolution_ends_the_refresh(base: float, interval: float, now: float) -> None:
    """`last + interval == last`: the loop looked for a checkpoint whose next is after `now` forever."""
    last = last_checkpoint(base, interval, now)
    assert base <= last <= now
    assert next_checkpoint(last, interval, now) > now  # what the heap waits for next is ahead


def test_the_next_checkpoint_is_last_plus_the_interval_wherever_that_is_ahead() -> None:
    for base, now in ((0.0, 0.0), (BASE, LATE), (BASE, LATE - 1.0), (60.0, 5000.0)):
        last = last_checkpoint(base, 1800.0, now)
        assert next_checkpoint(last, 1800.0, now) == last + 1800.0


@pytest.mark.timeout(60)
def test_a_late_trace_with_a_checkpoint_interval_below_the_clocks_resolution_ends(tmp_path: Path) -> None:
    """Submit times near 3e8 s (9.5 years, inside the trace's bound) and a checkpoint every 1e-8 s, below the float
    spacing there (6e-8 s): the refresh of a running job's checkpoint hung the run (and the hourly figures, counted
    from time 0, held 83,000 empty hours per level)."""
    late = 3e8
    specs = [job("a1", submit=late, duration=7200, gpus=2), job("a2", submit=late + 60, duration=600, gpus=2),
             job("b1", submit=late + 120, duration=3600, gpus=2, tenant="b")]
    result = run_scenario(write_scenario(tmp_path, specs), "steward", {"checkpoint_interval_s": 1e-8})
    assert result.recorder.unfinished == 0 and "cut_off" not in result.figures
    assert result.recorder.hours < 24 * 31  # one owed period at most, not every hour since time 0
