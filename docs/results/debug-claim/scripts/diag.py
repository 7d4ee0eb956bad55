"""Why the slow qualified debug jobs waited (issue 18, debug claim): per run, the qualified jobs that waited
> 30 s, each by the pending reason it held longest (time-weighted over the cycles' explanations) and the
preemptions made for it (rule/funded/grace)."""
from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

from steward.policy.cycle import schedule
from steward.sim import engine as eng
from steward.sim import suite
from steward.sim.run import simulate

FAILING = ["gang-heavy-n8-l1.2", "gang-heavy-n32-l2", "debug-heavy-n4-l2", "unfunded-many-n4-l3",
           "heavy-tail-n8-l2.5", "unfunded-debug-n6-l2-heavy"]

classes: dict[str, str | None] = {}
orig = eng.Engine._debug_class


def _debug_class(self, pj):  # type: ignore[no-untyped-def]
    c = orig(self, pj)
    classes[pj.id] = c
    return c


eng.Engine._debug_class = _debug_class  # type: ignore[method-assign]


def main() -> None:
    label = sys.argv[1]
    overrides = json.loads(sys.argv[2])
    seeds = [int(x) for x in sys.argv[3].split(",")]
    out = Path(sys.argv[4])
    names = sys.argv[5].split(",") if len(sys.argv) > 5 else FAILING
    entries = {e.name: e for e in suite.GENERATED}
    work = Path(tempfile.mkdtemp(prefix="claimdiag-"))
    for name in names:
        entry = entries[name]
        for seed in seeds:
            g = suite.generate(entry.family, seed, entry.values(False))
            path = g.write(work / name / str(seed))
            scenario = suite._load(str(path), None)
            submit = {j.job_id: j.submit_s for j in scenario.jobs}
            gpus = {j.job_id: j.gpus for j in scenario.jobs}
            classes.clear()
            last: dict[str, tuple[float, str]] = {}
            held: dict[str, Counter[str]] = {}
            started: dict[str, float] = {}
            pre_for: dict[str, list[str]] = {}

            def run(snap):  # type: ignore[no-untyped-def]
                r = schedule(snap)
                now = r.now
                for p in r.placements:
                    if p.job_id in classes and p.job_id not in started:
                        started[p.job_id] = now
                        if p.job_id in last:
                            t0, why = last.pop(p.job_id)
                            held.setdefault(p.job_id, Counter())[why] += now - t0
                for pr in r.preemptions:
                    if pr.for_job_id in classes:
                        ev = pr.evidence or {}
                        rule = ev.get("rule", "?")
                        fund = "F" if (ev.get("victim") or {}).get("funded") else "U"
                        pre_for.setdefault(pr.for_job_id, []).append(f"{rule}/{fund}/{pr.grace_ends_at - now:g}")
                for jid in classes:
                    if jid in started or submit[jid] > now:
                        continue
                    e = r.explanations.get(jid)
                    why = e.reason if e is not None else "?"
                    prev = last.get(jid)
                    if prev is not None:
                        held.setdefault(jid, Counter())[prev[1]] += now - prev[0]
                    last[jid] = (now, why)
                return r

            res = simulate(scenario, "steward", overrides, scheduler=run)
            qual = [j for j, c in classes.items() if c == "debug_qualified"]
            slow = [j for j in qual if started.get(j, float("inf")) - submit[j] > 30.0]
            main_reason: Counter[str] = Counter()
            victims: Counter[str] = Counter()
            for j in slow:
                h = held.get(j)
                main_reason[h.most_common(1)[0][0] if h else "?"] += 1
                victims[",".join(sorted(set(pre_for[j]))) if j in pre_for else "no victim"] += 1
            row = {"label": label, "scenario": name, "seed": seed,
                   "p90_qualified": res.figures["wait_p90_s"]["debug_qualified"],
                   "qualified": len(qual), "slow>30": len(slow), "main_reason": dict(main_reason.most_common()),
                   "gpus": dict(Counter(str(gpus[j]) for j in slow)), "preempted_for": dict(victims.most_common())}
            with out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
