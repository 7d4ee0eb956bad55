"""`steward bench replay --events N --json`: on a PostgreSQL log of N events (jobs through their whole
lifecycle, decided by the pure domain, appended in large batches), how fast the audit reads it back:
hash-chain verification, projection rebuilds with checksums, and time travel.

The log is written in two parts, as a running ledger would see them: the first `--checked` fraction (0.9),
then a full rebuild (`steward audit rebuild --full`, which records the snapshot it proves), then the rest.
Snapshots are taken as the ledger takes them (a delta every `--snapshot-every` events, a base every
`--base-every`).

Keys: `verify_events_per_s` (the chain), `verify_with_checkpoints_events_per_s` (chain + Merkle root),
`verify_load_average` (the machine's load right after both verifies: the figures depend on free cores),
`rebuild_events_per_s` (`steward audit rebuild`: the whole log's events over the time to start from the
checked snapshot, fold the events after it and prove the live tables equal; `rebuild_tail_events` says
how many were folded), `rebuild_full_events_per_s` (`--full`: fold from the first event, fresh tables,
checksums, and the check recorded), `rebuild_fold_events_per_s` (its fold alone), `state_at_ms` (median
over random past times: the state with its job counts), `state_at_ms_max`, `state_at_with_rows_ms` (plus
every projection row, as `steward audit state --json` prints them), `snapshot_s` (writing every snapshot).
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
from steward.audit.snapshots import BASE_EVERY, SNAPSHOT_EVERY, state_at, take_snapshots
from steward.audit.verify import verify
from steward.bench.ingest import fresh_database
from steward.config import Settings
from steward.domain.commands import PlaceJob, RegisterNode, ReportJobExited, ReportJobStarted, SetAllocations, SubmitJob
from steward.domain.decide import decide_or_reject
from steward.store import projections
from steward.store.eventstore import EventStore, PendingAppend
from steward.store.projections import Projector
from steward.store.recorder import EventRecorder

NODES = 100
GPUS = 8
WAVE = NODES * GPUS // 2


class History:
    """A realistic history decided with the pure domain and appended in batches, extended in parts."""

    def __init__(self, store: EventStore, start: float = 1_700_000_000.0, batch: int = 5_000) -> None:
        self.store, self.batch = store, batch
        self.proj = Projector()
        self.now = start
        self.pending: list[PendingAppend] = []
        self.count = 0
        self.job = 0
        self.projects = [f"p{i}" for i in range(20)]
        self.record(SetAllocations("cluster", {"div0": 0.5, "div1": 0.5}, "bench"))
        self.record(SetAllocations("div0", {p: 0.1 for p in self.projects[:10]}, "bench"))
        self.record(SetAllocations("div1", {p: 0.1 for p in self.projects[10:]}, "bench"))
        for n in range(NODES):
            self.record(RegisterNode(f"n{n}", GPUS, "H100", ["z0", f"s{n // 16}", f"b{n // 4}", f"n{n}"]))

    def record(self, command: Any) -> None:
        evs = decide_or_reject(self.proj.view(), command, self.now)
        for ev in evs:
            self.count += 1
            self.proj.apply(ev, self.now, self.count)
        self.pending.append(PendingAppend(evs, {"actor": "bench", "role": "admin", "command": command.TYPE,
                                                "causation_id": f"m{self.count}"}, f"m{self.count}"))

    def flush(self) -> None:
        if not self.pending:
            return
        proj = self.proj
        with self.store.engine.begin() as conn:  # one recorded time per batch, as in the ledger
            recorded = EventRecorder(self.store).append(conn, self.pending, self.now)
            changed = [("j", r.payload["job_id"]) for r in recorded if "job_id" in r.payload]
            changed += [("a", n) for n in proj.allocations] + [("n", n) for n in proj.nodes]
            projections.write(conn, proj, changed)
        self.pending.clear()
        self.now += 1.0

    def extend(self, events: int) -> float:
        """Waves of jobs (submit, place, start, exit) until the log holds at least `events`; seconds."""
        started = time.perf_counter()
        projects = self.projects
        while self.count < events:
            wave = [f"j{self.job + i}" for i in range(WAVE)]
            self.job += WAVE
            for i, j in enumerate(wave):
                self.record(SubmitJob(j, projects[i % 20], 1, 600.0, ["python", "train.py", f"--job={j}"],
                                      i % 2 == 0, "batch", i % 3))
            for i, j in enumerate(wave):
                self.record(PlaceJob(j, {f"n{i // GPUS}": [i % GPUS]}, i % 4 != 0, {"rank": i, "wave": self.job}))
            for i, j in enumerate(wave):
                self.record(ReportJobStarted(j, 1, 10_000 + i))
            for i, j in enumerate(wave):
                self.record(ReportJobExited(j, 1, 0 if i % 9 else 1))
                if len(self.pending) >= self.batch:
                    self.flush()
        self.flush()
        return time.perf_counter() - started


def generate(store: EventStore, events: int, start: float = 1_700_000_000.0, batch: int = 5_000) -> float:
    """Decide a realistic history with the pure domain and append it in batches; returns seconds."""
    return History(store, start, batch).extend(events)


def run(events: int, samples: int, snapshot_every: int, settings: Settings | None = None,
        base_every: int = BASE_EVERY, checked: float = 0.9) -> dict[str, Any]:
    settings = settings or Settings()
    app_url, _ = fresh_database(settings, os.environ.get("STEWARD_BENCH_DATABASE", "steward_bench"))
    store = EventStore.from_url(app_url)
    history = History(store)
    gen_s = history.extend(int(events * checked))
    t = time.perf_counter()
    take_snapshots(store, snapshot_every, base_every=base_every)
    snapshot_s = time.perf_counter() - t
    first_full = rebuild(store, full=True)  # what an earlier `steward audit rebuild --full` left
    assert first_full["ok"] and first_full["snapshot_check"]["recorded"], first_full["snapshot_check"]
    gen_s += history.extend(events)
    t = time.perf_counter()
    take_snapshots(store, snapshot_every, base_every=base_every)
    snapshot_s += time.perf_counter() - t
    head = store.head()
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    make_checkpoint(store, SigningKey(Ed25519PrivateKey.generate()))
    result: dict[str, Any] = {"events": head, "generate_s": round(gen_s, 1), "snapshot_s": round(snapshot_s, 1),
                              "checked_at": first_full["head"]}

    t = time.perf_counter()
    chain = verify(store, checkpoints=False)
    chain_s = time.perf_counter() - t
    assert chain["ok"], chain
    t = time.perf_counter()
    full = verify(store)
    full_s = time.perf_counter() - t
    assert full["ok"], full
    result |= {"verify_events_per_s": round(head / chain_s),
               "verify_with_checkpoints_events_per_s": round(head / full_s),
               "verify_load_average": [round(x, 2) for x in os.getloadavg()]}

    t = time.perf_counter()
    quick = rebuild(store)
    quick_s = time.perf_counter() - t
    assert quick["ok"] and quick["mode"] == "snapshot", {k: v["equal"] for k, v in quick["tables"].items()}
    t = time.perf_counter()
    rebuilt = rebuild(store, full=True)
    rebuild_s = time.perf_counter() - t
    assert rebuilt["ok"], {k: v["equal"] for k, v in rebuilt["tables"].items()}
    result |= {"rebuild_events_per_s": round(head / quick_s), "rebuild_s": round(quick_s, 3),
               "rebuild_tail_events": quick["tail_events"], "rebuild_from_snapshot": quick["from_snapshot"],
               "rebuild_full_events_per_s": round(head / rebuild_s), "rebuild_full_s": round(rebuild_s, 3),
               "rebuild_fold_events_per_s": round(head / rebuilt["fold_seconds"]),
               "rebuild_rows": {k: v["rows"] for k, v in rebuilt["tables"].items()}}

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
               "state_at_samples": samples, "snapshot_every": snapshot_every, "base_every": base_every,
               "jobs_at_head": rebuilt["tables"]["proj_jobs"]["rows"],
               "load_average": [round(x, 2) for x in os.getloadavg()]}
    store.engine.dispose()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="steward bench replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the log")
    parser.add_argument("--samples", type=int, default=20, help="random past times for state-at")
    parser.add_argument("--snapshot-every", type=int, default=SNAPSHOT_EVERY, help="events between snapshots")
    parser.add_argument("--base-every", type=int, default=BASE_EVERY, help="events between base snapshots")
    parser.add_argument("--checked", type=float, default=0.9,
                        help="fraction of the log a full rebuild has checked before the rest is written")
    parser.add_argument("--json", action="store_true", help="print JSON (the only output there is)")
    args = parser.parse_args(argv)
    if args.events < 1000:
        sys.stderr.write("steward bench replay: --events must be at least 1000\n")
        return 2
    if not 0 < args.checked <= 1 or args.snapshot_every < 1 or args.base_every < 1:
        sys.stderr.write("steward bench replay: --checked must be in (0, 1], --snapshot-every and --base-every "
                         "at least 1\n")
        return 2
    try:
        result = run(args.events, args.samples, args.snapshot_every, base_every=args.base_every,
                     checked=args.checked)
    except Exception as err:
        first = str(err).splitlines()[0] if str(err) else ""
        sys.stderr.write(f"steward bench replay: {type(err).__name__}: {first}\n")
        return 1
    sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0
