"""The decider's own CPU per event, stage by stage, without Kafka or PostgreSQL: the pure steps of
`Ledger.prepare` (open the envelopes, decode the commands, decide and fold, capture the changed rows, encode
and hash the events, the dedup rows) on `steward bench ingest`'s commands, in its 2,000-message batches, on
one thread. Prints JSON (microseconds per event, best of `--repeat` passes, and the generation-0 collections
timed during the last pass, per generation).

    PYTHONPATH=<root>/services:<root>/workflows .venv/bin/python bench/decider_cpu.py [--events 40000]

The store reads and writes are left out (the ledger's writer thread and PostgreSQL do them), so the figures
are the decider's CPU floor, comparable between two codes run alternately on the same machine (each with
its own PYTHONPATH), not with `bench/ingest_timeline.py`'s wall times. `--gc` picks the collector setting:
`ledger` (the ledger service's thresholds), `freeze` (those, and `gc.freeze()` after each batch, as the ledger
service does since ADR 0027), `off` (no collection during the passes).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from typing import Any

from steward.bench.ingest import PROJECTS, commands
from steward.bus.envelope import command_envelope
from steward.domain.commands import RegisterNode, SetAllocations
from steward.ledger.deciding import steps as steps
from steward.ledger.service import LEDGER_GC_THRESHOLD
from steward.store import projections
from steward.store.eventstore import encode_events
from steward.store.projector import Projector

STAGES = ("open", "decode", "decide", "capture", "encode", "bookkeeping")


class CollectorClock:
    """The collector's passes during a run, per generation: (count, seconds), from `gc.callbacks`."""

    def __init__(self) -> None:
        self.passes: dict[int, list[float]] = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            entry = self.passes[info["generation"]]
            entry[0] += 1
            entry[1] += time.perf_counter() - self._start


def node_commands(nodes: int) -> list[bytes]:
    """`nodes` registered nodes of 8 GPUs (a cluster of that size: some rules of a submission read the nodes)."""
    return [command_envelope(RegisterNode(f"n{i:05d}", 8, "H100", ["dc", f"rack{i // 32}", f"n{i:05d}"]),
                             actor="bench", role="admin").encode() for i in range(nodes)]


def one_pass(raws: list[bytes], batch: int, now: float, freeze: bool, nodes: int = 0) -> dict[str, float]:
    """One run over every message from a ledger that holds only the tree (and `nodes` registered nodes):
    thread CPU seconds per stage of the messages' batches (the setup's are not counted)."""
    proj = Projector()
    versions: dict[str, int] = {}
    seen: set[str] = set()
    setup = command_envelope(SetAllocations("cluster", dict.fromkeys(PROJECTS, 0.1), "bench"), actor="bench",
                             role="admin").encode()
    cpu = dict.fromkeys(STAGES, 0.0)
    setup_chunk = [("setup", setup)] + [("setup", r) for r in node_commands(nodes)]
    for start in range(-1, len(raws), batch):
        chunk = setup_chunk if start < 0 else [("commands-0", r) for r in raws[start:start + batch]]
        t0 = time.thread_time()
        opened = steps.open_envelopes(chunk, 1 << 20)
        steps.ids_and_new_keys(opened, versions)
        t1 = time.thread_time()
        decoded, dead = steps.decode_commands(opened)
        t2 = time.thread_time()
        position, head = proj.position, proj.head_hash
        proj.begin()
        pending, changed, last = steps.decide_messages(proj, decoded, seen, now, position)
        t3 = time.thread_time()
        projections.capture(proj, changed)
        t4 = time.thread_time()
        for p in pending:
            for ev in p.events:
                versions.setdefault(ev.stream, 0)
        numbered = steps.batch_versions(pending, versions)
        records, _ = encode_events(pending, position, head, numbered, now)
        t5 = time.thread_time()
        if records:
            proj.head_hash = records[-1].hash
        steps.processed_messages(pending, position)
        versions.update(numbered)
        proj.commit()
        if freeze:
            gc.freeze()  # as the ledger service does after each decided batch (steward.ledger.memory)
        t6 = time.thread_time()
        if dead or last != proj.position:
            raise RuntimeError(f"unexpected: {len(dead)} dead letters, position {last} != {proj.position}")
        if start < 0:
            continue
        for name, a, b in zip(STAGES, (t0, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6), strict=True):
            cpu[name] += b - a
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=0, help="registered nodes of 8 GPUs before the messages")
    parser.add_argument("--gc", choices=("ledger", "freeze", "off"), default="ledger")
    args = parser.parse_args()
    raws = [command_envelope(c, actor="bench", role="user").encode() for c in commands(args.events)]
    now = 1_700_000_000.0
    best: dict[str, float] = {}
    totals: list[float] = []
    clock = CollectorClock()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*LEDGER_GC_THRESHOLD)
    if args.gc == "off":
        gc.disable()
    for i in range(args.repeat):
        if i == args.repeat - 1:
            gc.callbacks.append(clock)
        cpu = one_pass(raws, args.batch, now, args.gc == "freeze", args.nodes)
        totals.append(sum(cpu.values()))
        for name, seconds in cpu.items():
            best[name] = min(best.get(name, seconds), seconds)
    per_event = 1e6 / args.events
    out: dict[str, Any] = {
        "events": args.events, "batch": args.batch, "gc": args.gc, "nodes": args.nodes,
        "us_per_event": {name: round(best[name] * per_event, 2) for name in STAGES},
        "total_us_per_event_best": round(min(totals) * per_event, 2),
        "total_us_per_event_median": round(sorted(totals)[len(totals) // 2] * per_event, 2),
        "collector_last_pass": {f"gen{g}": {"passes": int(n), "us_per_event": round(s * per_event, 2)}
                                for g, (n, s) in clock.passes.items()},
        "load_average": os.getloadavg()[0],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
