"""`steward bench outlook --json`: what the submit preview costs the API per submission that asks for it.

The preview (`steward.api.outlook.submit_outlook`, the policy's `outlook`) reads the scheduler's view of the
log: one pass over its jobs (the funded GPUs running per project; the project's own running and waiting
work for its debug quota), the tree and the ready capacity. This times it on a synthetic view of `--jobs` jobs (a third
running, a third waiting, a third ended; 40 projects under 4 divisions, 1 GPU per job on 8-GPU nodes),
beside the same pass that only lists the running jobs (`running_job` for each, what the queue order
already pays per request): the baseline in the same run. Submissions that do not ask for `outlook` pay
nothing (it is a resolver).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from steward.api.outlook import submit_outlook
from steward.bench import at_least
from steward.domain.commands import ROOT, SubmitJob
from steward.domain.policy_settings import PolicySettings
from steward.domain.state import AllocationNode, ClusterNode, Job, LedgerState
from steward.scheduler.bridge import HOLDING_STATES, running_job


def view(jobs: int, projects: int = 40, gpus_per_node: int = 8) -> LedgerState:
    divisions = 4
    allocations = {f"d{d}": AllocationNode(f"d{d}", ROOT, 1.0 / divisions) for d in range(divisions)}
    per = projects // divisions
    for p in range(projects):
        allocations[f"p{p}"] = AllocationNode(f"p{p}", f"d{p // per}", 1.0 / per)
    running = jobs // 3
    nodes = {f"n{i}": ClusterNode(f"n{i}", gpus_per_node, "h100", (f"b{i // 16}", f"n{i}"), "local")
             for i in range(max(1, running // gpus_per_node + 1))}
    out: dict[str, Job] = {}
    for i in range(jobs):
        kind = i % 3
        klass = "debug" if i % 10 == 0 else "batch"
        if kind == 0:
            node = f"n{(i // 3) // gpus_per_node}"
            job = Job(f"j{i}", f"p{i % projects}", 1, 600.0, ("x",), True, klass, 0, float(i), state="RUNNING",
                      attempt=1, assignments=((node, ((i // 3) % gpus_per_node,)),), funded=i % 2 == 0,
                      started_at=float(i), protected_until=float(i) + 600.0)
        elif kind == 1:
            job = Job(f"j{i}", f"p{i % projects}", 1, 300.0, ("x",), True, klass, 0, float(i))
        else:
            job = Job(f"j{i}", f"p{i % projects}", 1, 600.0, ("x",), True, klass, 0, float(i), state="COMPLETED",
                      attempt=1, ended_at=float(i) + 1.0)
        out[job.job_id] = job
    return LedgerState(allocations=allocations, nodes=nodes, jobs=out)


def _time(fn: Any, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000.0)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="steward bench outlook", description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=at_least(1), nargs="+", default=[1_000, 10_000, 100_000])
    ap.add_argument("--repeat", type=at_least(1), default=15)
    ap.add_argument("--json", action="store_true", help="print only the JSON result")
    args = ap.parse_args(argv)
    settings = PolicySettings.steward()
    rows = []
    for n in args.jobs:
        state = view(n)
        command = SubmitJob("new", "p3", 1, 300.0, ["x"], job_class="debug")
        now = float(n)

        def preview(state: LedgerState = state, command: SubmitJob = command, now: float = now) -> None:
            submit_outlook(state, settings, command, now)

        def baseline(state: LedgerState = state, now: float = now) -> None:
            [running_job(j, now) for j in state.jobs.values() if j.state in HOLDING_STATES]

        pairs: dict[str, list[float]] = {"preview": [], "baseline": []}
        for i in range(args.repeat):  # interleaved: the pair sees the same machine
            for name, fn in (("preview", preview), ("baseline", baseline)) if i % 2 == 0 else (
                    ("baseline", baseline), ("preview", preview)):
                pairs[name] += _time(fn, 1)
        rows.append({"jobs": n, "repeat": args.repeat,
                     **{f"{k}_p50_ms": round(statistics.median(v), 3) for k, v in pairs.items()},
                     **{f"{k}_max_ms": round(max(v), 3) for k, v in pairs.items()}})
    out = {"bench": "outlook", "rows": rows}
    if not args.json:
        for r in rows:
            print(f"{r['jobs']:>7} jobs: preview p50 {r['preview_p50_ms']} ms, baseline {r['baseline_p50_ms']} ms")
    print(json.dumps(out))
    return 0
