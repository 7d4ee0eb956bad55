"""Philly, one jitter seed, steward with the claim on or off: python claim_philly.py SEED on|off OUT."""
import json
import sys

from steward.sim import suite
from steward.sim.run import simulate
from steward.sim.scenario import load_scenario

seed, mode, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
scenario = suite.jitter(load_scenario("/work/shared/data/scenarios/philly.yaml", {}), seed)
r = simulate(scenario, "steward", {"lane_claim": mode == "on"})
f = r.figures
row = {"seed": seed, "claim": mode, **{k: f[k] for k in ("occupancy", "owed_delivered_mean", "owed_delivered_min",
       "preemptions", "lost_gpu_hours_fraction", "protection_violations", "wall_s")},
       "p90_qualified": f["wait_p90_s"]["debug_qualified"], "p90_batch": f["wait_p90_s"]["batch"],
       "p90_large": f["wait_p90_s"]["large"]}
with open(out, "a") as fh:
    fh.write(json.dumps(row) + "\n")
print(row)
