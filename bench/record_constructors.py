"""What the records' constructors cost where records are built (ADR 0042), without Kafka or PostgreSQL: decide
`steward bench replay`'s history with the domain (an `Event` per event, a `PendingAppend` per command), encode
it as the store does (a `RecordedEvent` per event), fold it again as a replay does (`Projector.apply`: a `Job`
per job event), open envelopes (an `Envelope` per message), and `Job(...)` alone. Prints JSON: CPU seconds
(`time.process_time`, so a loaded machine's waits do not count), best of `--repeat`.

    PYTHONPATH=<root>/services .venv/bin/python bench/record_constructors.py [--events 20000] [--repeat 3]

Compare two codes (say, with and without the generated `__init__`s) run alternately, each with its own
PYTHONPATH and its own `make compile`; `compiled` says whether the compiled build ran.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from steward import native
from steward.bench.replay import History
from steward.bus.envelope import Envelope
from steward.domain.state import Job
from steward.store.encoding import PendingAppend, RecordedEvent, encode_events
from steward.store.projector import fold_events


class _Kept(History):
    """`bench replay`'s history generator, its batches kept in memory instead of appended to PostgreSQL."""

    def __init__(self) -> None:
        self.batches: list[list[PendingAppend]] = []
        super().__init__(None, 1_700_000_000.0, 10**9)  # type: ignore[arg-type]  # no store: flush keeps

    def flush(self) -> None:
        self.batches.append(list(self.pending))
        self.pending.clear()
        self.now += 1.0


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    out: dict[str, Any] = {"compiled": native.compiled_in_use()}
    history = _Kept()
    t = time.process_time()
    history.extend(args.events)
    out["decide_s"] = time.process_time() - t
    pending = [p for batch in history.batches for p in batch]
    out["events"] = sum(len(p.events) for p in pending)
    recorded: list[RecordedEvent] = []

    def encode() -> None:
        recorded[:] = encode_events(pending, 0, "0" * 64, {}, 1_700_000_000.0)[0]

    out["encode_s"] = best(encode, args.repeat)
    events = [(r.position, r.as_event(), r.recorded_at) for r in recorded]
    out["fold_s"] = best(lambda: fold_events(events), args.repeat)
    raws = [Envelope(f"m{i}", "SubmitJob", f"job-{i}", {"job_id": f"j{i}", "gpus": 1}, {"actor": "a"}).encode()
            for i in range(20_000)]
    out["envelope_decode_20k_s"] = best(lambda: [Envelope.decode(r) for r in raws], args.repeat)

    def jobs() -> None:
        for _ in range(100_000):
            Job("j", "p", 1, 1.0, ("x",), False, "batch", 0, 1.0)

    out["job_init_100k_s"] = best(jobs, args.repeat)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
