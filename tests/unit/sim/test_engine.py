"""Small scenarios whose figures can be computed by hand, run through the real policy cycle.

Conventions (see steward/sim/engine.py): checkpoint every 1800 s of work, restart overhead 60 s,
grace 120 s; lost work = work since the last checkpoint + restart overhead paid.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from steward.policy.model import PendingJob, RunningJob
from steward.sim.engine import running_with, with_room_freed
from steward.sim.run import run_scenario
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
    # issue 18's figures (metrics.py docstring); restart overhead 60 s, one node of 4 GPUs
    Case("a preemption 30 s after the victim's start is a flap; JCT and rho by hand",
         [job("j1", duration=7200, gpus=4, min_runtime=0), job("j2", submit=30, duration=3600, gpus=4,
                                                              tenant="b", min_runtime=3600)],
         # j1 is preempted at 30 and stops at 150 (grace 120, no checkpoint yet: keeps nothing); j2 runs
         # 150-3750; j1 restarts at 3750 and pays 60 s: done at 3750 + 60 + 7200 = 11010.
         # N at submit: j1 alone (1), j2 with a's j1 present (2): T_independent 7200 and 3600 x 4/2 = 7200
         {"preemptions": 1, "flaps": 1, "flaps_fraction": 1.0,
          "preemptions_per_1k_gpu_h": 1000 / ((4 * 150 + 4 * 3600 + 4 * 7260) / 3600),
          "jct_mean_s": (11010 + 3720) / 2, "jct_p99_s": 3720 + 0.99 * (11010 - 3720), "makespan_s": 11010.0,
          "rho_max": 11010 / 7200, "rho_mean": (11010 / 7200 + 3720 / 7200) / 2, "rho_gt1_fraction": 0.5},
         policy="ai2"),
    Case("a preemption exactly the restart overhead after the start is still a flap",
         [job("j1", duration=7200, gpus=4, min_runtime=0), job("j2", submit=60, duration=3600, gpus=4,
                                                              tenant="b", min_runtime=3600)],
         {"preemptions": 1, "flaps": 1}, policy="ai2"),
    Case("a preemption past the restart overhead is no flap",
         [job("j1", duration=7200, gpus=4, min_runtime=0), job("j2", submit=61, duration=3600, gpus=4,
                                                              tenant="b", min_runtime=3600)],
         {"preemptions": 1, "flaps": 0, "flaps_fraction": 0.0}, policy="ai2"),
    Case("FIFO on a full node: the second tenant waits, and its rho is 1 because N = 2 halves its share",
         [job("j1", duration=3600, gpus=4), job("j2", duration=3600, gpus=4, tenant="b")],
         # j1 runs 0-3600 (N = 1, rho 1); j2 runs 3600-7200: JCT 7200, T_independent 3600 x 4/2 = 7200
         {"jct_mean_s": 5400.0, "makespan_s": 7200.0, "rho_mean": 1.0, "rho_max": 1.0, "rho_gt1_fraction": 0.0,
          "preemptions_per_1k_gpu_h": 0.0, "flaps": 0},
         policy="fifo-priority"),
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
    priority=2, topology_depth=1, previous_node="n1", room_freed_at=3.0,
)


def test_with_room_freed_is_replace_field_by_field() -> None:
    assert set(EVERY_PENDING_FIELD) == {f.name for f in dataclasses.fields(PendingJob)}
    pj = PendingJob(**EVERY_PENDING_FIELD)
    assert with_room_freed(pj, 9.0) == dataclasses.replace(pj, room_freed_at=9.0)


@pytest.mark.parametrize(
    ("sets", "debug_waits"),
    [
        # the trade stops a's own unfunded job for d2 (20 s grace) and the hold hands its GPU to d2
        ({"lane_hold_s": "30", "lane_trade": "true", "settle_s": "null"}, [0.0, 20.0]),
        # ADR 0028: u started 5 s before d2 and is not traded before its 300 s settle time; d1 ends first
        ({"lane_hold_s": "30", "lane_trade": "true"}, [0.0, 295.0]),
        # without the hold the freed GPU goes to b's batch job, first in the order: d2 waits for d1
        ({"lane_trade": "true"}, [0.0, 295.0]),
        # without trades d2 (over the quota, a's entitlement used) waits for d1 to end
        ({}, [0.0, 295.0]),
    ],
)
def test_a_trade_and_its_hold_through_the_engine(tmp_path: Path, sets: dict[str, str],
                                                 debug_waits: list[float]) -> None:
    """ADR 0021, hand-computed on one 4-GPU node: a holds its entitlement (a1 and the lane job d1, 2
    GPUs) and its debug quota (1 GPU); u is a's unfunded work; b2 is b's funded batch job, waiting."""
    jobs = [
        job("a1", duration=20000),
        job("d1", duration=300, klass="debug", min_runtime=300),
        job("u", duration=20000, min_runtime=0),
        job("b1", duration=20000, tenant="b"),
        job("d2", submit=5, duration=300, klass="debug", min_runtime=300),
        job("b2", submit=10, duration=1000, tenant="b"),
    ]
    path = write_scenario(tmp_path, jobs)
    result = run_scenario(path, "steward", {"debug_quota_share": "0", "debug_quota_floor_gpus": "1", **sets})
    assert sorted(result.recorder.waits["debug"]) == debug_waits
    assert result.to_json()["protection_violations"] == 0
