"""Compare the suite's checks for steward between runs: python3 claim_checks.py off=DIR c20=DIR ..."""
import csv, sys
runs = [a.split("=", 1) for a in sys.argv[1:]]
data = {}
for label, d in runs:
    for row in csv.DictReader(open(f"{d}/checks.csv")):
        data.setdefault((row["scenario"], row["criterion"]), {})[label] = row
labels = [l for l, _ in runs]
short = {"owed_delivered_min >= every baseline": "owed min", "occupancy >= best baseline - 0.005": "occupancy",
         "lost_gpu_hours_fraction <= max(0.01, 1.5x ai2)": "lost", "preemptions <= 2x ai2": "preemptions",
         "wait_p90_s.debug_qualified <= 30 s (full cluster)": "debug p90", "protection_violations == 0": "protection"}
scen = []
for (s, c) in data:
    if s not in scen: scen.append(s)
crits = [c for c in short if any((s, c) in data for s in scen)]
print("| scenario | " + " | ".join(short[c] for c in crits) + " |")
print("| --- |" + " --- |" * len(crits))
fails = {l: 0 for l in labels}
for s in scen:
    cells = []
    for c in crits:
        d = data.get((s, c), {})
        parts = []
        for l in labels:
            r = d.get(l)
            if r is None: parts.append("—"); continue
            st = r["status"]
            if st == "fail": fails[l] += 1
            v = r["steward"]
            try: v = f"{float(v):.3g}" if float(v) < 1000 else f"{float(v):,.0f}"
            except ValueError: pass
            mark = "✗" if st == "fail" else ("·" if st == "n/a" else "")
            parts.append(f"{v}{mark}")
        cells.append(" → ".join(parts))
    print(f"| {s} | " + " | ".join(cells) + " |")
print()
print("fails:", fails)
for (s, c), d in data.items():
    sts = [d[l]["status"] if l in d else "-" for l in labels]
    if len(set(sts)) > 1:
        print("CHANGED", s, short.get(c, c), sts, [d[l]["steward"] + " vs " + d[l]["bound"] for l in labels if l in d])
