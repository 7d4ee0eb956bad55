"""The API's read model in memory (`steward.api.live`): what it holds per 1,000 jobs, with and without the
retention of ended jobs (ADR 0070), and what a batch costs as the history grows.

    steward bench readmodel --jobs 20000 --json

The log is made in memory by the domain's own decisions (`decide_or_reject`, no store, no clock): a tree of
four projects, 16 nodes of 8 GPUs, then `--jobs` jobs each submitted, placed, started and ended, in batches
of `--batch` jobs, with `--waiting` jobs left queued throughout. The read model folds it batch by batch, as
its feeder would. Measured per retention (`--keep`, and None: every job):
- `tracemalloc` bytes the model holds after the last batch (the projector's jobs and positions and the
  model's indexes), and per 1,000 jobs recorded;
- the entries of each per-job table (`LiveModel.size`): bounded by the retention plus the jobs not ended;
- the CPU time of the first and last tenth of the batches' folds (a cost proportional to the batch stays
  flat; one proportional to the history grows with it). Object counts are exact; times are the machine's.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

from steward.api.live import LiveModel
from steward.domain.commands import (
    Command,
    PlaceJob,
    RegisterNode,
    ReportJobExited,
    ReportJobStarted,
    SetAllocations,
    SubmitJob,
)
from steward.domain.decide import decide_or_reject
from steward.domain.events import Event
from steward.store.projector import Projector

PROJECTS = ("a1", "a2", "b1", "b2")
NODES = 16


class Log:
    """Events decided by the domain on its own fold, numbered from 1, recorded at a clock that moves 1 s
    per command."""

    def __init__(self) -> None:
        self.proj = Projector()
        self.events: list[tuple[int, Event, float, str]] = []
        self.now = 1_000_000.0
        for command in [SetAllocations("cluster", {"a": 0.5, "b": 0.5}, "bench"),
                        SetAllocations("a", {"a1": 0.5, "a2": 0.5}, "bench"),
                        SetAllocations("b", {"b1": 0.5, "b2": 0.5}, "bench"),
                        *[RegisterNode(f"n{k}", 8, "h100", ["z", f"n{k}"]) for k in range(NODES)]]:
            self.record(command)

    def record(self, command: Command) -> None:
        self.now += 1.0
        for event in decide_or_reject(self.proj.view(), command, self.now):
            position = len(self.events) + 1
            self.proj.apply(event, self.now, position)
            self.events.append((position, event, self.now, ""))

    def after(self, position: int) -> Iterator[tuple[int, Event, float, str]]:
        return iter(self.events[position:])


def job_batch(log: Log, first: int, n: int) -> None:
    """`n` jobs from number `first`: each submitted, placed on a node, started and ended (exit 0)."""
    for k in range(first, first + n):
        job = f"j{k:07d}"
        node = f"n{k % NODES}"
        log.record(SubmitJob(job, PROJECTS[k % len(PROJECTS)], 1, 60, ["sleep", "1"], priority=k % 3))
        log.record(PlaceJob(job, {node: [0]}, True, {"policy": "bench"}))
        log.record(ReportJobStarted(job, 1, 100 + k))
        log.record(ReportJobExited(job, 1, 0))


def run(jobs: int = 20_000, batch: int = 50, waiting: int = 100, keep: int = 2000) -> dict[str, Any]:
    out: dict[str, Any] = {"jobs": jobs, "batch": batch, "waiting": waiting, "retentions": {}}
    for retention in (None, keep):
        log = Log()
        for k in range(waiting):  # jobs that wait throughout (the queue): never ended, never dropped
            log.record(SubmitJob(f"w{k:05d}", PROJECTS[k % len(PROJECTS)], 64, 60, ["true"]))
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        live = LiveModel(log.after, keep_ended=retention, stored_job=lambda job_id: None,
                         stored_page=lambda **page: [])
        live.catch_up()
        folds: list[float] = []
        for first in range(0, jobs, batch):
            job_batch(log, first, min(batch, jobs - first))
            started = time.process_time()
            live.catch_up()
            folds.append(time.process_time() - started)
        live.read_after = lambda position: iter(())
        del log  # the events themselves are the store's, not the model's
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        tenth = max(1, len(folds) // 10)
        out["retentions"]["all" if retention is None else str(retention)] = {
            "keep_ended": retention,
            "bytes_held": held,
            "kb_per_1000_jobs": round(held / 1024 / (jobs / 1000), 1),
            "size": live.size(),
            "evicted": live.evicted,
            "fold_ms_per_batch_first_tenth": round(1000 * sum(folds[:tenth]) / tenth, 3),
            "fold_ms_per_batch_last_tenth": round(1000 * sum(folds[-tenth:]) / tenth, 3),
        }
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="steward bench readmodel", description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20_000, help="jobs recorded (each submitted, run and ended)")
    ap.add_argument("--batch", type=int, default=50, help="jobs per batch the model folds at once")
    ap.add_argument("--waiting", type=int, default=100, help="jobs left waiting throughout")
    ap.add_argument("--keep", type=int, default=2000, help="ended jobs kept (the retention measured)")
    ap.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    args = ap.parse_args(argv)
    problems = [f"--{k} must be positive, got {getattr(args, k)}" for k in ("jobs", "batch") if getattr(args, k) <= 0]
    problems += [f"--{k} must be 0 or more, got {getattr(args, k)}" for k in ("waiting", "keep")
                 if getattr(args, k) < 0]
    if problems:
        sys.stderr.write("steward bench readmodel: " + "; ".join(problems) + "\n")
        return 2
    sys.stdout.write(json.dumps(run(args.jobs, args.batch, args.waiting, args.keep)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
