"""Where one ledger batch cycle's time goes during `steward bench ingest`'s drain: wall time and the calling
thread's CPU per 1,000 events for the decider (`Ledger.prepare`), the writer (`Ledger.record`) and the store
calls inside them. Prints JSON.

    PYTHONPATH=services:workflows .venv/bin/python bench/ingest_timeline.py [--events 40000]

Runs `steward.bench.ingest.run` (no latency phase, no references) with timers wrapped around those calls, so
the figures carry a few microseconds of wrapper per call; compare runs of this script with each other (two
codes alternating, each with its own PYTHONPATH), not with `steward bench ingest`. Wall minus CPU is time the
thread waited: for PostgreSQL, or for the GIL the other thread held. Uses the same Settings (env) as the bench.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from steward.bench import ingest
from steward.ledger import ledger as core
from steward.store import eventstore, recorder

Timings = dict[str, list[float]]  # name -> [calls, wall s, thread CPU s]

# (owner, attribute, name): the decider, the writer, and the steps of the batch's transaction it runs
# (`steward.store.recorder.record_batch`; in-process only, STEWARD_LEDGER_WRITER=thread)
PG = recorder.PostgresTransaction
TIMED: tuple[tuple[Any, str, str], ...] = (
    (core.Ledger, "prepare", "decider prepare"),
    (core.Ledger, "record", "writer record"),
    (PG, "lock_head", "writer: head lock (first round trip)"),
    (PG, "check_dedup", "writer: dedup check (ADR 0026: lookup)"),
    (PG, "append", "writer: COPY events and processed_messages"),
    (PG, "write_projections", "writer: projection rows"),
)


def timed(fn: Callable[..., Any], name: str, timings: Timings) -> Callable[..., Any]:
    """`fn`, adding each call's wall time and thread CPU to `timings[name]`."""
    totals = timings.setdefault(name, [0, 0.0, 0.0])

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[0] += 1
            totals[1] += time.perf_counter() - wall
            totals[2] += time.thread_time() - cpu

    return wrapper


def timed_answer(send: Callable[..., Any], name: str, timings: Timings) -> Callable[..., Any]:
    """`seen_messages_sent`, whose returned call (the wait for the dedup answer, on the deciding thread) adds
    each call's wall time and thread CPU to `timings[name]`."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return timed(send(*args, **kwargs), name, timings)

    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=40_000)
    args = parser.parse_args()
    timings: Timings = {}
    for owner, attribute, name in TIMED:
        setattr(owner, attribute, timed(getattr(owner, attribute), name, timings))
    owner, attribute = eventstore.EventStore, "seen_messages_sent"
    setattr(owner, attribute, timed_answer(getattr(owner, attribute), "decider: waiting for the dedup answer", timings))
    result = ingest.run(args.events, 0, None, False)
    per_1k = args.events / 1000
    print(json.dumps({
        "events": args.events, "events_per_s": result["events_per_s"],
        "ledger_cpu_s_per_1k_events": result["ledger_cpu_s_per_1k_events"],
        "per_1k_events_ms": {name: {"calls": int(calls), "wall": round(1000 * wall / per_1k, 2),
                                    "thread_cpu": round(1000 * cpu / per_1k, 2)}
                             for name, (calls, wall, cpu) in timings.items()},
        "load_average": result["load_average"],
    }, indent=2))


if __name__ == "__main__":
    main()
