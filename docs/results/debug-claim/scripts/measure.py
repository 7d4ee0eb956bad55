"""Measure the qualified debug p90 on the suite's own scenario files (issue 18, debug claim)."""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from steward.sim import suite
from steward.sim.run import simulate

FAILING = ["gang-heavy-n8-l1.2", "gang-heavy-n32-l2", "debug-heavy-n4-l2", "unfunded-many-n4-l3",
           "heavy-tail-n8-l2.5", "unfunded-debug-n6-l2-heavy"]


def main() -> None:
    import os
    if os.environ.get("CLAIM_ANY"):  # experiment: the claim takes any funded work out of protection (no over test)
        from steward.policy import preemption as pm
        pm.over_entitlement = lambda *a, **k: True
    label = sys.argv[1]
    overrides = json.loads(sys.argv[2])
    seeds = [int(x) for x in sys.argv[3].split(",")]
    out = Path(sys.argv[4])
    names = sys.argv[5].split(",") if len(sys.argv) > 5 else FAILING
    entries = {e.name: e for e in suite.GENERATED}
    work = Path(tempfile.mkdtemp(prefix="claim-"))
    for name in names:
        entry = entries[name]
        for seed in seeds:
            g = suite.generate(entry.family, seed, entry.values(False))
            path = g.write(work / name / str(seed))
            scenario = suite._load(str(path), None)
            t0 = time.time()
            r = simulate(scenario, "steward", overrides)
            f = r.figures
            row = {"label": label, "scenario": name, "seed": seed, "overrides": overrides,
                   "p90_qualified": f["wait_p90_s"]["debug_qualified"],
                   "wall_s": round(time.time() - t0, 1), "figures": f}
            with out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(label, name, seed, row["p90_qualified"], row["wall_s"], flush=True)


if __name__ == "__main__":
    main()
