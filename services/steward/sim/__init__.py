"""The trace-driven simulator: scenarios (YAML + trace CSV) replayed in virtual time through the
same policy cycle the live scheduler runs (`steward.policy.cycle.schedule`).

API:
    run_scenario(path, policy_name, overrides={}) -> SimResult     one policy, figures in `.to_json()`
    compare(path, policies, out_dir, overrides={}, workers=1)      several policies, one table + plots
    replay(path, policy_name, overrides={}) -> SimResult           the what-if on recorded history
    main(argv) -> int                                              the `steward sim` command line
"""

from steward.sim.cli import main
from steward.sim.errors import OverrideError, ScenarioError, SimError, SimulationFailed, UnknownPolicy
from steward.sim.result import SimResult
from steward.sim.run import compare, replay, run_scenario, simulate
from steward.sim.scenario import Scenario, load_scenario

__all__ = [
    "OverrideError",
    "Scenario",
    "ScenarioError",
    "SimError",
    "SimResult",
    "SimulationFailed",
    "UnknownPolicy",
    "compare",
    "load_scenario",
    "main",
    "replay",
    "run_scenario",
    "simulate",
]
