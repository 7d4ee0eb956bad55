"""Writes data/reference_figures.json for test_philly_slice.py (the pinned slices).

Run it with the simulator you take as the reference on the path. The `steward` and `steward@6` figures come from
branch `claim` (ADR 0099: the debug quota as a claim, on in the `steward` preset; the slice's qualified debug p90
89.6 -> 20.0 s, owed min 0.759 -> 0.805, occupancy 0.924 -> 0.913, preemptions 344 -> 367; `steward@6` p90 111 -> 48
s, preemptions 3,934 -> 4,272; `ai2` did not move, checked to the last digit). Before that the `steward@6` figures
came from branch `churn18` (ADR 0095: consolidation only while 3 % of the cluster is idle; `steward@6` occupancy
0.975063 -> 0.975062, preemptions 3,939 -> 3,934; `steward` and `ai2` did not move, checked to the last digit).
Before that the `steward` figures came from branch `occupancy` (ADR 0034, consolidation: the slice's occupancy 0.894
-> 0.924, preemptions 338 -> 344, lost 0.078 % -> 0.080 %, owed min unchanged; `steward@6` occupancy 0.970 -> 0.975;
`ai2` did not move, checked to the last digit). Before that from branch `churn2` (issue 18, ADR 0028 amended: a held
gang's room spans the whole free nodes it counted on; `ai2` did not move, checked to the last digit). Before that
they came from the merge of branches `churn` (ADR 0028: held rooms, settle time, a preemption's cost against its
gain) and `quota` (ADR 0029: the debug quota) with the cycle split into phases (ADR 0030); the `ai2` figures did not
move, checked to the last digit (the figures issue 18 added are new keys). Before that they came from commit 756fe5d
(branch `fair`: ADR 0016 ranks inner allocations by the entitlement their projects' demand can use, ADR 0017 funds
against the project's own quota; `steward` only, the `ai2` figures did not move). Before that they came from
8f54b58, the quality branch's policy on the simulator before the speed work of docs/benchmarks.md "Simulator". For
example:

    git worktree add /tmp/ref 756fe5d
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
SIX_RESERVATIONS = {"max_jobs": "7500", "cluster.nodes": "22", "reservation_allocations": "6"}
"""test_philly_slice.py::test_short_work_for_an_earlier_reservation: `steward` only (key `steward@6`)."""


def main() -> None:
    out = {}
    for policy in ("steward", "ai2"):
        figures = run_scenario(load_scenario(PHILLY, SLICE), policy).to_json()
        figures.pop("wall_s")
        out[policy] = figures
    figures = run_scenario(load_scenario(PHILLY, SIX_RESERVATIONS), "steward").to_json()
    figures.pop("wall_s")
    out["steward@6"] = figures
    OUT.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
