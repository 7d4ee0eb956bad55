"""The reference scenario, sliced: runs fast, deterministically, and trimming changes no decision."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from steward.policy.cycle import schedule
from steward.sim.engine import Engine
from steward.sim.policies import settings_for, tree_for
from steward.sim.run import run_scenario
from steward.sim.scenario import Scenario, load_scenario

PHILLY = Path("/work/shared/data/scenarios/philly.yaml")
pytestmark = pytest.mark.skipif(not PHILLY.exists(), reason="reference data not present")


def slice_of(n: int) -> Scenario:
    return load_scenario(PHILLY, {"max_jobs": str(n)})


def decisions(scenario: Scenario, policy: str, trim: bool = True, skip: bool = True) -> list[dict[str, Any]]:
    settings = settings_for(policy, scenario)
    engine = Engine(scenario, settings, tree_for(scenario), schedule, record_decisions=True)
    engine.trim, engine.skip = trim, skip
    engine.run()
    return engine.stats.trace


def test_first_2000_jobs_run_fast_and_keep_the_contract() -> None:
    t0 = time.perf_counter()
    result = run_scenario(slice_of(2000), "steward")
    wall = time.perf_counter() - t0
    figs = result.to_json()
    assert figs["jobs"] == 2000
    assert result.recorder.unfinished == 0
    assert figs["protection_violations"] == 0
    assert 0.5 < figs["occupancy"] <= 1.0
    assert 0.0 <= figs["lost_gpu_hours_fraction"] < 0.05
    assert wall < 60  # about 1 s on a quiet 2-core machine


def test_same_input_same_decisions_and_figures() -> None:
    scenario = slice_of(1000)
    assert decisions(scenario, "steward") == decisions(scenario, "steward")
    a = run_scenario(scenario, "steward").to_json()
    b = run_scenario(scenario, "steward").to_json()
    a.pop("wall_s")
    b.pop("wall_s")
    assert a == b


@pytest.mark.parametrize(("policy", "jobs"), [("steward", 8000), ("ai2", 2000), ("fair-tree", 2000),
                                             ("fifo-priority", 2000)])
def test_trimmed_queue_gives_the_same_decisions_as_the_full_queue(policy: str, jobs: int) -> None:
    """8,000 jobs of `steward` include reservations with short work backfilling them (view.py)."""
    scenario = slice_of(jobs)
    assert decisions(scenario, policy, trim=True, skip=False) == decisions(scenario, policy, trim=False, skip=False)
