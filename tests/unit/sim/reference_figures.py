"""Writes data/reference_figures.json for test_philly_slice.py::test_fast_path_gives_the_reference_figures.

Run it with the simulator you take as the reference on the path (the pinned figures come from commit
f9b7857, before the speed work of docs/benchmarks.md "Simulator"), e.g.

    git worktree add /tmp/ref f9b7857
    PYTHONPATH=/tmp/ref/services:$PWD python tests/unit/sim/reference_figures.py

It runs the simulator's default path (trimmed queue, idle instants skipped), as `steward sim` does.
"""

from __future__ import annotations

import json
from pathlib import Path

from steward.sim.run import run_scenario
from steward.sim.scenario import load_scenario

PHILLY = Path("/work/shared/data/scenarios/philly.yaml")
OUT = Path(__file__).parent / "data" / "reference_figures.json"
SLICE = {"max_jobs": "1500", "cluster.nodes": "16", "reservation_allocations": "3"}


def main() -> None:
    out = {}
    for policy in ("steward", "ai2"):
        figures = run_scenario(load_scenario(PHILLY, SLICE), policy).to_json()
        figures.pop("wall_s")
        out[policy] = figures
    OUT.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
