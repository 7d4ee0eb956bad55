"""Tables of docs/results/debug-claim/README.md from runs.jsonl."""
import json, statistics, sys
from collections import defaultdict
ORDER = ["gang-heavy-n8-l1.2", "gang-heavy-n32-l2", "debug-heavy-n4-l2", "unfunded-many-n4-l3", "heavy-tail-n8-l2.5",
         "unfunded-debug-n6-l2-heavy"]
runs = [json.loads(l) for l in open(sys.argv[1])]
def table(variants, seeds):
    by = defaultdict(dict)
    for r in runs:
        if r["variant"] in variants and r["seed"] in seeds:
            by[(r["scenario"], r["variant"])][r["seed"]] = r
    print("| scenario | " + " | ".join(variants) + " |")
    print("| --- |" + " --- |" * len(variants))
    under = defaultdict(int); total = defaultdict(int); passing = defaultdict(int)
    for s in ORDER:
        cells = []
        for v in variants:
            d = by.get((s, v), {})
            if len(d) != len(seeds): cells.append("—"); continue
            ps = [d[k]["p90_qualified_s"] or 0.0 for k in sorted(d)]
            m = statistics.fmean(ps); u = sum(p <= 30 for p in ps)
            under[v] += u; total[v] += len(ps); passing[v] += m <= 30
            c = f"{m:,.0f}" if m >= 100 else f"{m:.1f}"
            cells.append((f"**{c}**" if m <= 30 else c) + f" ({u}/{len(ps)})")
        print(f"| {s} | " + " | ".join(cells) + " |")
    print("| runs under 30 s | " + " | ".join(f"{under[v]}/{total[v]}" for v in variants) + " |")
    print("| scenarios passing (mean over seeds) | " + " | ".join(f"{passing[v]}/6" for v in variants) + " |")
    print()
def costs(variants, seeds):
    by = defaultdict(list)
    for r in runs:
        if r["variant"] in variants and r["seed"] in seeds:
            by[(r["scenario"], r["variant"])].append(r)
    print("| scenario | " + " | ".join(variants) + " |")
    print("| --- |" + " --- |" * len(variants))
    for s in ORDER:
        cells = []
        for v in variants:
            d = by.get((s, v), [])
            if not d: cells.append("—"); continue
            f = lambda k: statistics.fmean(x[k] for x in d)
            cells.append(f"{f('owed_delivered_min'):.3f} / {f('occupancy'):.3f} / {f('lost_gpu_hours_fraction'):.4f} / {f('preemptions'):,.0f} / {sum(x['protection_violations'] for x in d)}")
        print(f"| {s} | " + " | ".join(cells) + " |")
    print()
mode = sys.argv[2]
if mode == "p90":
    table(sys.argv[3].split(","), [int(x) for x in sys.argv[4].split(",")])
else:
    costs(sys.argv[3].split(","), [int(x) for x in sys.argv[4].split(",")])
