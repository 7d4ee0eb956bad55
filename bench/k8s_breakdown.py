"""Where a `steward bench k8s` round's time goes, pod by pod (ADR 0074): pod created -> `JobSubmitted` ->
`JobPlaced` -> bound (the executor's bind log) -> `JobStarted`, from the ledger's `recorded_at`, the pods'
creation times and the executor's log; and inside placed -> bound, from a sample of `JobRun` histories (Temporal's
event times): the dispatcher, the first workflow task (eager or queued), `start_job` in the executor's queue.

    PYTHONPATH=services:workflows .venv/bin/python bench/k8s_breakdown.py TAG [--sample 60]

TAG is the six hex digits of the round's pod names (`st<TAG>-<i>`). Run it right after the round, against the
stack that ran it (its `STEWARD_*` environment: the store, Temporal, the run folder with the kubeconfig and logs).
Prints JSON: p50, p95, mean and count of each step, seconds.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from steward.bench.k8s import NAMESPACE, REPO
from steward.config import Settings
from steward.executor.kubernetes_api import KubeClient, credentials

TEMPORAL = REPO / ".venv" / "bin" / "temporal"


def ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def figures(values: list[float]) -> dict[str, float]:
    xs = sorted(values)
    if not xs:
        return {"n": 0}
    return {"p50": round(xs[len(xs) // 2], 2), "p95": round(xs[int(len(xs) * 0.95)], 2),
            "mean": round(statistics.mean(xs), 2), "n": len(xs)}


def ledger_times(settings: Settings, prefix: str) -> dict[str, dict[str, float]]:
    """Each job's first `recorded_at` of each event type."""
    out: dict[str, dict[str, float]] = {}
    engine = sa.create_engine(settings.resolved_store_url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("select stream_id, type, recorded_at from events where stream_id like :p "
                                    "order by position"), {"p": f"job-{prefix}%"})
        for row in rows:
            stream, kind, at = str(row[0]), str(row[1]), float(row[2])
            out.setdefault(stream[len("job-"):], {}).setdefault(kind, at)
    return out


def bind_times(log: Path) -> dict[str, float]:
    """When the executor logged each job's bind (`job <id> attempt <n>: <pod> -> <node>`)."""
    out: dict[str, float] = {}
    for line in log.read_text().splitlines():
        if '"msg": "job ' not in line or " -> " not in line:
            continue
        record = json.loads(line)
        out.setdefault(record["msg"].split()[1], ts(record["ts"]))
    return out


def run_steps(settings: Settings, job_id: str, placed_at: float) -> dict[str, float]:
    """The steps of one `JobRun` (attempt 1) from its history's event times."""
    shown = subprocess.run([str(TEMPORAL), "workflow", "show", "--address", settings.temporal_address, "-w",
                            f"job-{job_id}-attempt-1", "-o", "json"], capture_output=True, text=True, timeout=60)
    if shown.returncode != 0:
        return {}
    events: list[dict[str, Any]] = json.loads(shown.stdout)["events"]
    kinds = [str(e["eventType"]).removeprefix("EVENT_TYPE_") for e in events]

    def at(i: int) -> float:
        return ts(events[i]["eventTime"])

    def first(kind: str, after: int = 0, activity: str = "") -> int | None:
        return next((i for i in range(after, len(events)) if kinds[i] == kind
                     and (not activity or activity in json.dumps(events[i]))), None)

    steps = {"placed -> run started (dispatcher)": at(0) - placed_at}
    task = first("WORKFLOW_TASK_STARTED")
    scheduled = first("ACTIVITY_TASK_SCHEDULED", task or 0, "start_job")
    if task is None or scheduled is None:
        return steps
    steps |= {"run started -> first workflow task": at(task) - at(0),
              "first workflow task eager (1) or queued (0)": 1.0 if at(task) - at(0) < 0.05 else 0.0,
              "first workflow task -> start_job scheduled": at(scheduled) - at(task)}
    started, done = first("ACTIVITY_TASK_STARTED", scheduled), first("ACTIVITY_TASK_COMPLETED", scheduled)
    if started is None or done is None:
        return steps
    steps |= {"start_job scheduled -> started (the executor's queue)": at(started) - at(scheduled),
              "start_job started -> completed": at(done) - at(started)}
    following = first("WORKFLOW_TASK_STARTED", done)
    if following is not None:
        steps["start_job completed -> next workflow task"] = at(following) - at(done)
    return steps


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("tag", help="the six hex digits of the round's pod names (st<tag>-<i>)")
    ap.add_argument("--sample", type=int, default=60, help="JobRun histories to read")
    args = ap.parse_args()
    settings = Settings()
    prefix = f"{settings.executor_id}.{NAMESPACE}.st{args.tag}-"
    events = ledger_times(settings, prefix)
    kube = KubeClient(credentials(str(settings.run_dir / "k8s" / "kubeconfig")))
    created = {f"{settings.executor_id}.{NAMESPACE}.{p['metadata']['name']}": ts(p["metadata"]["creationTimestamp"])
               for p in kube.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods").get("items") or []
               if str(p["metadata"]["name"]).startswith(f"st{args.tag}-")}
    kube.close()
    bound = bind_times(settings.run_dir / "logs" / "executor.log")

    def between(start: Callable[[str], float | None], end: Callable[[str], float | None]) -> list[float]:
        out = []
        for job in events:
            a, b = start(job), end(job)
            if a is not None and b is not None:
                out.append(b - a)
        return out

    result: dict[str, dict[str, float]] = {
        "created -> JobSubmitted": figures(between(created.get, lambda j: events[j].get("JobSubmitted"))),
        "JobSubmitted -> JobPlaced": figures(between(lambda j: events[j].get("JobSubmitted"),
                                                     lambda j: events[j].get("JobPlaced"))),
        "JobPlaced -> bound": figures(between(lambda j: events[j].get("JobPlaced"), bound.get)),
        "bound -> JobStarted": figures(between(bound.get, lambda j: events[j].get("JobStarted"))),
        "created -> bound": figures(between(created.get, bound.get)),
    }
    placed = sorted(j for j in events if "JobPlaced" in events[j])
    steps: dict[str, list[float]] = {}
    for job in random.Random(1).sample(placed, min(args.sample, len(placed))):
        for name, value in run_steps(settings, job, events[job]["JobPlaced"]).items():
            steps.setdefault(name, []).append(value)
    result |= {name: figures(values) for name, values in steps.items()}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
