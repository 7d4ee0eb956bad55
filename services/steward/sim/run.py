"""`run_scenario` and `compare`: the simulator's API (the CLI in cli.py is a shell over these)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from steward.policy.cycle import schedule
from steward.policy.model import CycleResult, Snapshot
from steward.sim.engine import Engine, EngineError, EngineStats, QueueListener, Router, Scheduler
from steward.sim.errors import SimError, SimulationFailed
from steward.sim.history import load_history
from steward.sim.metrics import Recorder
from steward.sim.policies import ROUTING, canonical, settings_for, tree_for
from steward.sim.result import SimResult
from steward.sim.routing import router_for
from steward.sim.scenario import Scenario, load_scenario
from steward.sim.workers import process_pool, worker_count


def default_scheduler() -> Scheduler:
    def run(snapshot: Snapshot) -> CycleResult:
        return schedule(snapshot)

    return run


def simulate(
    scenario: Scenario,
    policy: str,
    settings_overrides: Mapping[str, Any] | None = None,
    scheduler: Scheduler | None = None,
    record_decisions: bool = False,
) -> SimResult:
    """Run an already loaded scenario under one policy."""
    name = canonical(policy)
    settings = settings_for(name, scenario, settings_overrides)
    tree = tree_for(scenario)
    listener: QueueListener | None = None
    router: Router | None = None
    if scheduler is None and name == "tiresias":
        from steward.sim.tiresias import Tiresias

        scheduler = listener = Tiresias()
    if name in ROUTING:
        router = router_for(name)
    engine = Engine(scenario, settings, tree, scheduler or default_scheduler(), record_decisions, listener, router)
    t0 = time.perf_counter()
    try:
        recorder = engine.run()
    except EngineError as exc:
        raise SimulationFailed(f"policy {name}: {exc}") from None
    wall = time.perf_counter() - t0
    figures = recorder.figures(name, scenario.name, len(scenario.jobs), wall)
    return SimResult(name, scenario, settings, figures, recorder, engine.stats)


def run_scenario(
    path: str | Path | Scenario, policy_name: str, overrides: Mapping[str, Any] | None = None
) -> SimResult:
    """Load `path` (a scenario YAML), apply `overrides` (the `--set` keys, see scenario.py) and
    simulate it under `policy_name` (steward, ai2, fair-tree, fifo-priority, the research baseline
    tiresias, or the routing baselines random-cluster and least-loaded)."""
    canonical(policy_name)
    scenario = path if isinstance(path, Scenario) else load_scenario(path, overrides or {})
    return simulate(scenario, policy_name)


def replay(path: str | Path, policy_name: str, overrides: Mapping[str, Any] | None = None) -> SimResult:
    """The what-if: replay recorded history (`--from-events`) under a policy with changed settings."""
    canonical(policy_name)
    return simulate(load_history(path, overrides or {}), policy_name)


def _simulate_in_worker(scenario: Scenario, policy: str) -> tuple[dict[str, Any], Recorder, EngineStats]:
    """Process-pool entry point (settings hold read-only mappings that do not pickle, so the parent
    rebuilds them)."""
    r = simulate(scenario, policy)
    return r.figures, r.recorder, r.stats


def compare(
    path: str | Path | Scenario,
    policies: Sequence[str],
    out_dir: str | Path | None,
    overrides: Mapping[str, Any] | None = None,
    plots: bool = True,
    workers: int = 1,
) -> list[SimResult]:
    """Run every policy on the same scenario; write one table and one set of plots to `out_dir`.
    `workers` > 1 runs policies in parallel processes (results are identical, `wall_s` is each
    policy's own)."""
    names = [canonical(p) for p in policies]
    if not names:
        raise SimError("compare needs at least one policy")
    workers = worker_count(workers)
    scenario = path if isinstance(path, Scenario) else load_scenario(path, overrides or {})
    if workers > 1 and len(names) > 1:
        with process_pool(min(workers, len(names))) as pool:
            futures = [pool.submit(_simulate_in_worker, scenario, name) for name in names]
            parts = [f.result() for f in futures]
        results = [
            SimResult(name, scenario, settings_for(name, scenario), figs, rec, stats)
            for name, (figs, rec, stats) in zip(names, parts, strict=True)
        ]
    else:
        results = [simulate(scenario, name) for name in names]
    if out_dir is not None:
        from steward.sim.report import write_outputs

        write_outputs(results, Path(out_dir), plots=plots)
    return results
