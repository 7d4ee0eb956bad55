"""`steward bench replay --events N --json`: on a PostgreSQL log of N events (jobs through their whole
lifecycle, decided by the pure domain, appended in large batches), how fast the audit reads it back:
hash-chain verification, a projection rebuild into fresh tables with checksums, and time travel.

Keys: `verify_events_per_s` (the chain), `verify_with_checkpoints_events_per_s` (chain + Merkle root),
`rebuild_events_per_s` (fold from the start + fresh tables + checksums), `rebuild_fold_events_per_s`,
`state_at_ms` (median over random past times, with snapshots: the state with its job counts, loading only
the job columns it reads), `state_at_ms_max`, `state_at_with_rows_ms` (plus every projection row, as
`steward audit state --json` prints them).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from steward.audit.checkpoints import SigningKey, make_checkpoint
from steward.audit.rebuild import rebuild
from steward.audit.snapshots import state_at, take_snapshots
from steward.audit.verify import verify
from steward.bench.ingest import fresh_database
from steward.config import Settings
from steward.domain.commands import PlaceJob, RegisterNode, ReportJobExited, ReportJobStarted, SetAllocations, SubmitJob
from steward.domain.decide import decide_or_reject
from steward.store import projections
from steward.store.eventstore import EventStore, PendingAppend
from steward.store.projections import Projector

NODES = 100
GPUS = 8
WAVE = NODES * GPUS // 2


def generate(store: EventStore, events: int, start: float = 1_700_000_000.0, batch: int = 5_000) -> float:
    """Decide a realistic history with the pure domain and append it in batches; returns seconds."""
    started = time.perf_counter()
    proj = Projector()
    now = start
    pending: list[PendingAppend] = []
    count = 0

    def record(command: Any) -> None:
        nonlocal count
        evs = decide_or_reject(proj.view(), command, now)
        for ev in evs:
            count += 1
            proj.apply(ev, now, count)
        pending.append(PendingAppend(evs, {"actor": "bench", "role": "admin", "command": command.TYPE,
                                           "causation_id": f"m{count}"}, f"m{count}"))

    def flush() -> None:
        nonlocal now
        if not pending:
            return
        with store.engine.begin() as conn:  # one recorded time per batch, as in the ledger
            recorded = store.append(conn, pending, now)
            changed = [("j", r.payload["job_id"]) for r in recorded if "job_id" in r.payload]
            changed += [("a", n) for n in proj.allocations] + [("n", n) for n in proj.nodes]
            projections.write(conn, proj, changed)
        pending.clear()
        now += 1.0

    projects = [f"p{i}" for i in range(20)]
    record(SetAllocations("cluster", {"div0": 0.5, "div1": 0.5}, "bench"))
    record(SetAllocations("div0", {p: 0.1 for p in projects[:10]}, "bench"))
    record(SetAllocations("div1", {p: 0.1 for p in projects[10:]}, "bench"))
    for n in range(NODES):
        record(RegisterNode(f"n{n}", GPUS, "H100", ["z0", f"s{n // 16}", f"b{n // 4}", f"n{n}"]))
    job = 0
    while count < events:
        wave = [f"j{job + i}" for i in range(WAVE)]
        job += WAVE
        for i, j in enumerate(wave):
            record(SubmitJob(j, projects[i % 20], 1, 600.0, ["python", "train.py", f"--job={j}"], i % 2 == 0,
                             "batch", i % 3))
        for i, j in enumerate(wave):
            record(PlaceJob(j, {f"n{i // GPUS}": [i % GPUS]}, i % 4 != 0, {"rank": i, "wave": job}))
        for i, j in enumerate(wave):
            record(ReportJobStarted(j, 1, 10_000 + i))
        for i, j in enumerate(wave):
            record(ReportJobExited(j, 1, 0 if i % 9 else 1))
            if len(pending) >= batch:
                flush()
        if count >= events:
            flush()
    flush()
    return time.perf_counter() - started


def run(events: int, samples: int, snapshot_every: int, settings: Settings | None = None) -> dict[str, Any]:
    settings = settings or Settings()
    app_url, _ = fresh_database(settings, os.environ.get("STEWARD_BENCH_DATABASE", "steward_bench"))
    store = EventStore.from_url(app_url)
    gen_s = generate(store, events)
    head = store.head()
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    make_checkpoint(store, SigningKey(Ed25519PrivateKey.generate()))
    result: dict[str, Any] = {"events": head, "generate_s": round(gen_s, 1)}

    t = time.perf_counter()
    chain = verify(store, checkpoints=False)
    chain_s = time.perf_counter() - t
    assert chain["ok"], chain
    t = time.perf_counter()
    full = verify(store)
    full_s = time.perf_counter() - t
    assert full["ok"], full
    result |= {"verify_events_per_s": round(head / chain_s),
               "verify_with_checkpoints_events_per_s": round(head / full_s)}

    t = time.perf_counter()
    rebuilt = rebuild(store)
    rebuild_s = time.perf_counter() - t
    assert rebuilt["ok"], {k: v["equal"] for k, v in rebuilt["tables"].items()}
    result |= {"rebuild_events_per_s": round(head / rebuild_s),
               "rebuild_fold_events_per_s": round(head / rebuilt["fold_seconds"]),
               "rebuild_rows": {k: v["rows"] for k, v in rebuilt["tables"].items()}}

    t = time.perf_counter()
    take_snapshots(store, snapshot_every)
    result["snapshot_s"] = round(time.perf_counter() - t, 1)
    rows = store.read(after=0, limit=1) + store.read(after=head - 1, limit=1)
    first, last = rows[0].recorded_at, rows[-1].recorded_at
    rng = random.Random(1)
    timings, with_rows, tails = [], [], []
    for _ in range(samples):
        at = rng.uniform(first, last)
        t = time.perf_counter()
        st, info = state_at(store, at)
        st.job_counts()  # the answer's summary: position, allocations, nodes, jobs per state
        timings.append((time.perf_counter() - t) * 1000)
        tails.append(info["position"] - (st.snapshot_position or 0))
        st.rows()  # every row, as `steward audit state --json` prints them
        with_rows.append((time.perf_counter() - t) * 1000)
    result |= {"state_at_ms": round(statistics.median(timings), 1), "state_at_ms_max": round(max(timings), 1),
               "state_at_tail_events_median": statistics.median(tails),
               "state_at_with_rows_ms": round(statistics.median(with_rows), 1),
               "state_at_samples": samples, "snapshot_every": snapshot_every,
               "jobs_at_head": rebuilt["tables"]["proj_jobs"]["rows"],
               "load_average": [round(x, 2) for x in os.getloadavg()]}
    store.engine.dispose()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="steward bench replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the log")
    parser.add_argument("--samples", type=int, default=20, help="random past times for state-at")
    parser.add_argument("--snapshot-every", type=int, default=10_000, help="events between snapshots")
    parser.add_argument("--json", action="store_true", help="print JSON (the only output there is)")
    args = parser.parse_args(argv)
    if args.events < 1000:
        sys.stderr.write("steward bench replay: --events must be at least 1000\n")
        return 2
    try:
        result = run(args.events, args.samples, args.snapshot_every)
    except Exception as err:
        first = str(err).splitlines()[0] if str(err) else ""
        sys.stderr.write(f"steward bench replay: {type(err).__name__}: {first}\n")
        return 1
    sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0
