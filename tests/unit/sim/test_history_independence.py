"""A run's figures are a function of (scenario, policy, seed, settings) alone: nothing a process ran or read
before changes them. Two ways they could: state the simulator or the cycle keeps between runs, and the
suite's memo of loaded scenarios (`suite._load`) handing back a file's earlier contents once it was
rewritten in the same process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from steward.sim.generate import generate
from steward.sim.run import simulate
from steward.sim.scenario import Scenario, load_scenario
from steward.sim.suite import Task, run_task

SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "dominant": ("dominant-tenant", {"nodes": 4, "load": 1.5, "jobs": 120}),
    "short": ("short-1gpu", {"nodes": 4, "load": 1.5, "jobs": 120}),
    "gangs": ("gang-heavy", {"nodes": 4, "load": 1.2, "jobs": 80}),
}


def _scenario(tmp_path: Path, shape: str) -> Scenario:
    family, values = SHAPES[shape]
    return load_scenario(generate(family, 0, values).write(tmp_path / shape))


def _figures(scenario: Scenario, policy: str) -> dict[str, Any]:
    return {k: v for k, v in simulate(scenario, policy).figures.items() if k != "wall_s"}


@pytest.mark.parametrize(("before", "subject", "policy"), [
    ("short", "dominant", "steward"),
    ("gangs", "dominant", "steward"),
    ("dominant", "short", "steward"),
    ("gangs", "short", "tiresias"),
    ("dominant", "gangs", "fair-tree"),
])
def test_a_run_s_figures_do_not_depend_on_what_ran_before_it(
        tmp_path: Path, before: str, subject: str, policy: str) -> None:
    target = _scenario(tmp_path, subject)
    first = _figures(target, policy)
    for policy_before in ("steward", "tiresias", "ai2"):
        _figures(_scenario(tmp_path, before), policy_before)
        assert _figures(target, policy) == first, f"after {before} under {policy_before}"
    assert _figures(_scenario(tmp_path, subject), policy) == first  # the same file loaded again


def test_a_suite_task_reads_its_scenario_file_as_it_is_now(tmp_path: Path) -> None:
    """The suite loads each file once per process for every policy run on it; a file rewritten since (the
    same family, size, load and seed with another job count: the same name) is read again, not served
    from the memo (before, the second task ran the 60-job scenario and reported 60 jobs)."""
    runs = []
    for jobs in (60, 90):
        path = generate("dominant-tenant", 0, {"nodes": 4, "load": 1.5, "jobs": jobs}).write(tmp_path)
        _task, figures, error = run_task(Task("dt", 0, "steward", str(path), False, None, float(jobs)))
        assert error is None and figures is not None
        runs.append((jobs, figures, path))
    for jobs, figures, path in runs[1:]:
        assert figures["jobs"] == jobs
        fresh = {k: v for k, v in simulate(load_scenario(path), "steward").to_json().items() if k != "wall_s"}
        assert {k: v for k, v in figures.items() if k != "wall_s"} == fresh
