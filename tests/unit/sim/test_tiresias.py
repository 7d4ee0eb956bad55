"""The `tiresias` baseline (sim/tiresias.py): discretized 2D-LAS, hand-computed through the engine.

Work model of the builders: checkpoint every 1800 s of work, restart overhead 60 s, grace 120 s; one
queue limit at 3,250 GPU-seconds (a 4-GPU job crosses it after 812.5 s of running).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steward.policy.model import PendingJob
from steward.sim.engine import Engine
from steward.sim.policies import POLICIES, settings_for, tree_for
from steward.sim.run import run_scenario
from steward.sim.scenario import load_scenario
from steward.sim.tiresias import PROMOTE_KNOB, STARVE_KNOB, THRESHOLDS, Tiresias, queue_of
from tests.unit.sim.builders import job, write_scenario


def test_registered_as_a_policy() -> None:
    assert "tiresias" in POLICIES
    assert THRESHOLDS == (3250.0,) and PROMOTE_KNOB is None and STARVE_KNOB == 8.0


@pytest.mark.parametrize(("service", "thresholds", "queue"), [
    (0.0, (3250.0,), 0),
    (3249.9, (3250.0,), 0),
    (3250.0, (3250.0,), 1),  # the limit itself belongs to the lower queue
    (1e9, (3250.0,), 1),
    (5000.0, (3250.0, 7200.0), 1),
    (7200.0, (3250.0, 7200.0), 2),
])
def test_queue_by_attained_service(service: float, thresholds: tuple[float, ...], queue: int) -> None:
    assert queue_of(service, thresholds) == queue


def pending(job_id: str, gpus: int = 4, submitted_at: float = 0.0) -> PendingJob:
    return PendingJob(id=job_id, project="a", gpus=gpus, submitted_at=submitted_at)


@pytest.mark.parametrize(("gpus", "run_s", "queue", "entry", "promote_at"), [
    # 4 GPUs x 800 s = 3,200 GPU-s: still queue 0, entered at submit (100); never promoted
    (4, 800.0, 0, 100.0, None),
    # 4 GPUs x 1,000 s = 4,000 GPU-s: demoted when it crossed 3,250, 812.5 s into the run
    (4, 1000.0, 1, 200.0 + 812.5, 1200.0 + STARVE_KNOB * 1000.0),
    # 1 GPU x 3,250 s: crosses exactly at the end of the run
    (1, 3250.0, 1, 200.0 + 3250.0, 3450.0 + STARVE_KNOB * 3250.0),
])
def test_demotion_at_the_crossing_and_the_promotion_due(
        gpus: int, run_s: float, queue: int, entry: float, promote_at: float | None) -> None:
    t = Tiresias(promote_knob=STARVE_KNOB)
    t.queued(pending("j", gpus, submitted_at=100.0))
    t.left_queue("j")  # started at 200
    t.stopped("j", gpus * run_s, run_s, 200.0 + run_s, done=False)
    t.queued(pending("j", gpus, submitted_at=100.0))
    j = t.jobs["j"]
    assert (j.queue, j.entry, j.promote_at) == (queue, pytest.approx(entry), promote_at)
    assert t.chains == {(queue, gpus, None, ((), ())): [(j.entry, "j")]}  # the request: any


def test_promotion_moves_a_waiting_job_to_queue_zero_and_restarts_its_service() -> None:
    t = Tiresias(promote_knob=STARVE_KNOB)
    t.queued(pending("j"))
    t.left_queue("j")
    t.stopped("j", 4000.0, 1000.0, 1000.0, done=False)  # queue 1, promotion due at 9,000
    t.queued(pending("j"))
    t._promote(8999.0)
    assert t.jobs["j"].queue == 1
    t._promote(9000.0)
    j = t.jobs["j"]
    assert (j.queue, j.entry, j.base, j.promote_at) == (0, 9000.0, 4000.0, None)
    assert t.chains == {(0, 4, None, ((), ())): [(9000.0, "j")]}


def test_a_placed_job_is_not_promoted() -> None:
    t = Tiresias()
    t.queued(pending("j"))
    t.left_queue("j")
    t.stopped("j", 4000.0, 1000.0, 1000.0, done=False)
    t.queued(pending("j"))
    t.left_queue("j")  # placed again before its promotion was due
    t._promote(1e9)
    assert t.jobs["j"].queue == 1 and t.chains == {}


@dataclass
class Case:
    name: str
    jobs: list[tuple[Any, ...]]
    expect: dict[str, Any]
    nodes: int = 1
    promote_knob: float | None = PROMOTE_KNOB


STREAM = [job(f"c{k:02d}", submit=900 + 600 * (k - 1), duration=600, gpus=4, tenant="b") for k in range(1, 16)]

CASES = [
    Case("a job of queue 0 preempts a running job of queue 1",
         [job("long", duration=20000, gpus=4, min_runtime=0), job("short", submit=2000, duration=600, gpus=4,
                                                                  tenant="b")],
         # long is in queue 1 since 812.5 s; short preempts it at 2000, long stops at 2120 keeping its
         # 1800 s checkpoint (loses 320 s), short runs 2120-2720, long restarts paying 60 s: done 20980
         {"preemptions": 1, "makespan_s": 20980.0, "jct_mean_s": (20980 + 720) / 2,
          "lost_gpu_hours_fraction": (4 * 320 + 4 * 60) / (4 * (2120 + 600 + 18260))}),
    Case("no preemption inside a queue: the newcomer waits until the runner is demoted (a wake)",
         [job("a", duration=20000, gpus=4), job("b", submit=100, duration=600, gpus=4, tenant="b")],
         # a crosses 3,250 GPU-s at 812.5 (the engine wakes for it): b preempts it then; a stops at 932.5
         # with no checkpoint (loses 932.5 s), b runs 932.5-1532.5, a restarts: done 1592.5 + 20000
         {"preemptions": 1, "wait_p50_s.large": (0 + 832.5) / 2, "makespan_s": 21592.5,
          "lost_gpu_hours_fraction": (4 * 932.5 + 4 * 60) / (4 * (932.5 + 600 + 20060))}),
    Case("a gang preempts only when its whole gang fits: not while a queue-0 job holds the other node",
         [job("l1", duration=20000, gpus=4), job("p", duration=2000, gpus=1, tenant="b"),
          job("g", submit=1000, duration=600, gpus=8, tenant="b")],
         # at 1000 preempting l1 (queue 1) would free one node, the gang needs both: nothing happens.
         # p (1 GPU x 2000 s, queue 0) ends at 2000; then l1 is preempted, stops at 2120 keeping 1800 s
         # of work, the gang runs 2120-2720, l1 restarts: done 2720 + 60 + 18200
         {"preemptions": 1, "makespan_s": 20980.0, "jct_mean_s": (20980 + 2000 + 1720) / 3}, nodes=2),
    Case("starvation: a demoted job waiting 8 x its last run is promoted ahead of later arrivals",
         [job("a", duration=10000, gpus=4), *STREAM],
         # a runs 0-1020 (demoted at 812.5, preempted at 900 by c01); promoted at 1020 + 8 x 1020 = 9180,
         # ahead of c15 (submitted 9300): a restarts when c14 ends at 9420. Its service counts from zero
         # again: demoted at 9420 + 812.5, preempted by c15 (queue 0) and stopped at 10352.5 with no
         # checkpoint; c15 runs to 10952.5, a restarts: done 10952.5 + 60 + 10000. LAS at work.
         {"preemptions": 2, "makespan_s": 21012.5}, promote_knob=STARVE_KNOB),
    Case("without promotion (the default, dlas-gpu) the same job waits for the whole stream",
         [job("a", duration=10000, gpus=4), *STREAM],
         # c15 runs 9420-10020, then a: done 10020 + 60 + 10000
         {"preemptions": 1, "makespan_s": 20080.0}),
]


def figure(figs: dict[str, Any], key: str) -> Any:
    head, _, rest = key.partition(".")
    return figs[head][rest] if rest else figs[head]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hand_computed(tmp_path: Path, case: Case) -> None:
    scenario = load_scenario(write_scenario(tmp_path, case.jobs, nodes=case.nodes), {})
    sched = Tiresias(promote_knob=case.promote_knob)
    engine = Engine(scenario, settings_for("tiresias", scenario), tree_for(scenario), sched, listener=sched)
    rec = engine.run()
    figs = rec.figures("tiresias", scenario.name, len(scenario.jobs), 0.0)
    assert rec.unfinished == 0
    assert rec.end == pytest.approx(figs["makespan_s"])  # no wake left over moves the clock past the last job
    for key, want in case.expect.items():
        assert figure(figs, key) == pytest.approx(want, abs=1e-6), key


def test_no_promotion_by_default() -> None:
    t = Tiresias()
    t.queued(pending("j"))
    t.left_queue("j")
    t.stopped("j", 4000.0, 1000.0, 1000.0, done=False)  # queue 1, and there it stays
    t.queued(pending("j"))
    t._promote(1e12)
    assert (t.jobs["j"].queue, t.jobs["j"].promote_at, t.promotions) == (1, None, [])


@pytest.mark.parametrize("knob", [0.0, -1.0, math.nan])
def test_a_promote_knob_must_be_positive(knob: float) -> None:
    with pytest.raises(ValueError, match="promote_knob"):
        Tiresias(promote_knob=knob)


def test_run_scenario_runs_tiresias(tmp_path: Path) -> None:
    result = run_scenario(write_scenario(tmp_path, CASES[0].jobs), "tiresias")
    figs = result.to_json()
    assert figs["policy"] == "tiresias" and figs["preemptions"] == 1 and figs["protection_violations"] == 0


JOB = st.tuples(st.integers(0, 3000), st.sampled_from([300, 1000, 4000]), st.sampled_from([1, 2, 3, 4, 8]),
                st.sampled_from(["a", "b"]), st.sampled_from([0, 1]))


@settings(deadline=None, max_examples=40)
@given(st.lists(JOB, min_size=1, max_size=12))
def test_every_job_finishes_and_no_placement_exceeds_the_free_gpus(tmp_path_factory: pytest.TempPathFactory,
                                                                  rows: list[tuple[int, int, int, str, int]]) -> None:
    """The engine refuses (EngineError) a placement on more GPUs than a node has free and a start of a
    job that does not wait; every job must finish, and flaps are a subset of the preemptions."""
    folder = tmp_path_factory.mktemp("t")
    jobs = [job(f"j{i:02d}", submit=s, duration=d, gpus=g, tenant=t, resumable=r)
            for i, (s, d, g, t, r) in enumerate(sorted(rows))]
    result = run_scenario(write_scenario(folder, jobs, nodes=2), "tiresias")
    figs = result.to_json()
    assert result.recorder.unfinished == 0
    assert 0 <= figs["flaps"] <= figs["preemptions"]
    assert figs["protection_violations"] == 0


def test_the_cli_compares_it_with_the_policies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from steward.sim.cli import EXIT_OK, main

    path = write_scenario(tmp_path, CASES[0].jobs)
    code = main(["--scenario", str(path), "--compare", "steward,ai2,tiresias", "--out", str(tmp_path / "o"),
                 "--no-plots", "--json"])
    assert code == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert [f["policy"] for f in out] == ["steward", "ai2", "tiresias"]
    assert out[2]["preemptions"] == 1 and out[2]["makespan_s"] == 20980.0
