import json, sys, tempfile
from collections import Counter
from pathlib import Path
from steward.policy.cycle import schedule
from steward.sim import engine as eng, suite
from steward.sim.run import simulate
classes = {}
orig = eng.Engine._debug_class
def _dc(self, pj):
    c = orig(self, pj); classes[pj.id] = c; return c
eng.Engine._debug_class = _dc
entries = {e.name: e for e in suite.GENERATED}
name, seed, ov = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
nshow = int(sys.argv[4]) if len(sys.argv) > 4 else 3
e = entries[name]
g = suite.generate(e.family, seed, e.values(False))
p = g.write(Path(tempfile.mkdtemp()) / name)
sc = suite._load(str(p), None)
submit = {j.job_id: j.submit_s for j in sc.jobs}
shown = set(); summary = Counter()
def run(snap):
    r = schedule(snap)
    now = r.now
    for jid, c in list(classes.items()):
        if c != "debug_qualified" or jid in shown: continue
        ex = r.explanations.get(jid)
        if ex is None or now - submit[jid] < 60: continue
        shown.add(jid)
        # classify running jobs
        pj = next(x for x in snap.pending if x.id == jid)
        cnt = Counter()
        for rj in snap.running:
            if rj.preemption_requested_at is not None: k = "leaving"
            elif not rj.funded: k = "unfunded"
            elif now < rj.protected_until: k = "protected"
            else: k = "out"
            size = "small" if rj.gpus <= snap.settings.lane_victim_max_gpus else "big"
            young = (now - rj.started_at) < (snap.settings.settle_s or 0)
            own = rj.project == pj.project
            cnt[(k, size, "own" if own else "other", "young" if young else "settled")] += rj.gpus
        summary.update(cnt)
        if len(shown) <= nshow:
            print(jid, pj.project, pj.gpus, ex.reason, round(now - submit[jid]), json.dumps(ex.evidence, default=str)[:600])
            for k, v in sorted(cnt.items()): print("   ", k, v)
    return r
simulate(sc, "steward", ov, scheduler=run)
print("TOTAL GPUs over", len(shown), "slow jobs (at 60 s):")
for k, v in sorted(summary.items(), key=lambda kv: -kv[1]): print("   ", k, v)
