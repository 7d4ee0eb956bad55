"""Lease benchmark: from submit to RUNNING on an idle cluster, through the whole running stack (API,
Kafka, ledger, scheduler, outbox, dispatcher, Temporal, executor, Kafka, ledger).

    steward up                                   # the stack to measure
    steward bench lease --jobs 200 --json        # or: python -m steward.bench.lease --jobs 200 --json

Setup (not timed): a project `bench-lease` (share 0 under the root: its jobs run unfunded on idle
capacity) and `--nodes` nodes `bench-n<i>` of `--gpus` GPUs, served by a simulated executor started for
the run (`steward executor sim --id bench`, its own process: jobs take virtual time, so the figure is
the control plane), or with `--executor local` by the stack's local executor (real `sleep` processes
under the shim). Jobs are submitted
through the API by `--concurrency` clients; a job's latency is from just before its `submitJob` call
to the `JobStarted` event's record time (the executor has started its process and the ledger has
recorded it). `starts_per_s` is jobs ÷ (last start − first submit). The bench waits for its jobs to
end, drains the bench nodes (so nothing is placed on them afterwards) and stops its executor.

`hops_ms` splits each start into its hops (p50/p95 over the jobs), from recorded times: the client's
clock, the Kafka record times of `SubmitJob`, `PlaceJob`, the relayed `JobPlaced` and `ReportJobStarted`,
the ledger's record times, and the JobRun's history (started, `start_job` scheduled and picked up).
`cpu_ms_per_job` is the CPU each process of the stack used from the first submit until all started,
divided by the jobs (from /proc, so it does not depend on how busy the machine is).

`--executor slurm` (issue 23) measures the same path through a Slurm cluster: the cluster STEWARD_SLURM_CONF
(or SLURM_CONF) names, else the project's own (infra/slurm.sh, started if needed); a Slurm executor
(`steward run executor` with STEWARD_EXECUTOR_KIND=slurm, id `bench`, the simulated executor's principal)
started for the run registers Slurm's nodes, and a job starts when Slurm runs it (its `sbatch`, Slurm's
scheduling, the executor's poll). The same run first measures the node agent (`--executor local`, the same
jobs on as many GPUs) as the baseline: the JSON has both and their p50/p95 ratios. Keep `--jobs` within
Slurm's GPUs (1 GPU each; more would measure Slurm's queue).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from steward.api.commands import CommandGateway
from steward.bench.procfs import children
from steward.bus.identity import command_topic
from steward.bus.kafka import CommandPublisher, make_consumer
from steward.cli.client import GraphQLClient
from steward.cli.jobs import SUBMIT
from steward.config import Settings
from steward.domain.commands import RegisterNode, ResumeNode, RetireNode, SetAllocations
from steward.executor.slurm_commands import parse_nodes, run_command
from steward.infra.processes import Paths, infra_script, read_pid
from steward.store.eventstore import EventStore
from steward_workflows.payloads import executor_task_queue

PROJECT = "bench-lease"
EXECUTOR = "bench"
SLURM_EXECUTOR = EXECUTOR  # a principal infra/kafka.sh creates (ADR 0036); the simulated one is not running then


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _execute(settings: Any, command: Any) -> list[Any]:
    publisher = CommandPublisher(settings)
    try:
        gateway = CommandGateway(publisher, EventStore.from_url(settings.resolved_store_url), 30.0)
        outcome = asyncio.run(gateway.execute(command, actor="bench", role="operator"))
    finally:
        publisher.close()
    return list(outcome.events)


def setup(settings: Any, nodes: int, gpus: int, executor: str) -> list[str]:
    _execute(settings, SetAllocations("cluster", {PROJECT: 0.0}, "lease benchmark (unfunded, idle capacity)"))
    names = [f"{EXECUTOR}-n{i}" for i in range(nodes)]
    for i, name in enumerate(names):
        # a cluster of its own: a cluster has one executor (ADR 0091), and the store may hold others' nodes (the demo's)
        _execute(settings, RegisterNode(name, gpus, "BENCH", [f"{EXECUTOR}-b{i // 8}", name], executor,
                                        cluster=EXECUTOR))
        _execute(settings, ResumeNode(name, "lease benchmark"))  # rejected (harmless) unless draining
    return names


def teardown(settings: Any, names: list[str]) -> None:
    """The run's nodes leave the cluster once their last attempt ends (ADR 0081), as the soak's do: its executor
    is gone, and a node left draining would count as draining GPUs in the store for good."""
    for name in names:
        _execute(settings, RetireNode(name, "lease benchmark done: its executor is gone", when_empty=True))


def submit_all(settings: Any, jobs: int, concurrency: int, command: list[str]) -> dict[str, tuple[float, float]]:
    """Submit through the API; job id -> (submitted at, API round trip seconds)."""
    client = GraphQLClient(settings)
    run = uuid.uuid4().hex[:6]
    out: dict[str, tuple[float, float]] = {}
    lock = threading.Lock()

    def one(i: int) -> None:
        job_id = f"lease-{run}-{i}"
        t0 = time.time()
        res = client.execute(SUBMIT, {"input": {"project": PROJECT, "gpus": 1, "minRuntimeS": 0.0,
                                                "command": command, "jobId": job_id}})["submitJob"]
        if res["__typename"] != "JobAccepted":
            raise RuntimeError(f"submission refused: {res}")
        with lock:
            out[job_id] = (t0, time.time() - t0)

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(one, range(jobs)))
    return out


def wait_started(settings: Any, job_ids: set[str], after: int, timeout: float) -> dict[str, dict[str, float]]:
    """Tail the log from `after` for the jobs' JobPlaced/JobStarted record times."""
    store = EventStore.from_url(settings.resolved_store_url)
    seen: dict[str, dict[str, float]] = {}
    deadline = time.monotonic() + timeout
    position = after
    while time.monotonic() < deadline:
        for rec in store.read(position, limit=5000):
            position = rec.position
            job_id = rec.payload.get("job_id")
            if job_id in job_ids and rec.type in ("JobSubmitted", "JobPlaced", "JobStarted"):
                seen.setdefault(job_id, {}).setdefault(rec.type, rec.recorded_at)
        if sum(1 for j in job_ids if "JobStarted" in seen.get(j, {})) == len(job_ids):
            return seen
        time.sleep(0.05)
    return seen


def start_executor(speed: float) -> subprocess.Popen[bytes]:
    """The simulated executor as its own process (`steward executor sim --id bench`), as a node agent
    would be: in this process it would share the interpreter with the submitting clients."""
    proc = subprocess.Popen([sys.executable, "-m", "steward.cli.main", "executor", "sim", "--id", EXECUTOR,
                             "--speed", str(speed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=os.environ | {"STEWARD_COMPONENT": "executor"})  # its principal (ADR 0036)
    return proc


def slurm_conf(settings: Any) -> str:
    """The cluster to measure: STEWARD_SLURM_CONF or SLURM_CONF, else the project's own (started if needed)."""
    conf = os.environ.get("STEWARD_SLURM_CONF") or os.environ.get("SLURM_CONF", "")
    if not conf:
        infra_script("slurm", "start", settings=settings)
        conf = str(settings.run_dir / "slurm" / "slurm.conf")
    if not os.path.isfile(conf):
        raise RuntimeError(f"the Slurm configuration {conf} does not exist (STEWARD_SLURM_CONF or SLURM_CONF)")
    return conf


def start_slurm_executor(conf: str) -> subprocess.Popen[bytes]:
    """The Slurm executor as its own process (`steward run executor`, kind slurm, id `bench`), as
    `steward up --executor slurm` runs it; it registers the cluster's nodes with Steward."""
    env = os.environ | {"STEWARD_COMPONENT": "executor", "STEWARD_EXECUTOR_KIND": "slurm",
                        "STEWARD_EXECUTOR_ID": SLURM_EXECUTOR, "SLURM_CONF": conf, "STEWARD_SLURM_CONF": conf}
    return subprocess.Popen([sys.executable, "-m", "steward.cli.main", "run", "executor"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def slurm_nodes(settings: Any, conf: str, timeout: float = 60.0) -> list[str]:
    """The cluster's GPU nodes once the Slurm executor has registered them (resumed, in case an earlier run
    drained them)."""
    cluster = {n.name for n in parse_nodes(run_command(["scontrol", "-o", "show", "node"], os.environ | {
        "SLURM_CONF": conf})) if n.gpus > 0}
    client = GraphQLClient(settings)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = sorted(n["id"] for n in client.execute("{ nodes { id executor } }")["nodes"]
                       if n["executor"] == SLURM_EXECUTOR and n["id"] in cluster)
        if names and set(names) == cluster:
            for name in names:
                _execute(settings, ResumeNode(name, "lease benchmark"))  # rejected (harmless) unless draining
            return names
        time.sleep(0.5)
    raise RuntimeError("the Slurm executor did not register the cluster's nodes (see its slurmctld log)")


async def _pollers(settings: Any, executor: str = EXECUTOR) -> list[str]:
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
    from temporalio.client import Client

    client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
    resp = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=settings.temporal_namespace, task_queue=TaskQueue(name=executor_task_queue(executor)),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY))
    return [p.identity for p in resp.pollers]


def wait_polling(settings: Any, proc: subprocess.Popen[bytes], timeout: float = 60.0,
                 executor: str = EXECUTOR) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the {executor} executor exited with {proc.returncode}")
        # the server lists pollers seen in the last minutes: an earlier run's executor is no proof
        if any(identity.startswith(f"{proc.pid}@") for identity in asyncio.run(_pollers(settings, executor))):
            return
        time.sleep(0.2)
    raise RuntimeError(f"the {executor} executor did not start polling")


def wait_ended(settings: Any, job_ids: set[str], after: int, timeout: float) -> int:
    """Wait until the jobs ended (before their executor goes), returns how many did."""
    store = EventStore.from_url(settings.resolved_store_url)
    ended: set[str] = set()
    deadline = time.monotonic() + timeout
    position = after
    while time.monotonic() < deadline and ended != job_ids:
        for rec in store.read(position, limit=5000):
            position = rec.position
            if rec.payload.get("job_id") in job_ids and rec.type in ("JobCompleted", "JobFailed", "JobCancelled"):
                ended.add(rec.payload["job_id"])
        time.sleep(0.2)
    return len(ended)


# The hops of a start, in order, each between two recorded times (docs/benchmarks.md "Lease"):
HOPS = (
    ("api_publish", "submit", "k_submit"),          # client call -> SubmitJob on Kafka (API)
    ("ledger_submit", "k_submit", "JobSubmitted"),    # Kafka -> ledger batch that records it
    ("scheduler", "JobSubmitted", "k_place"),         # recorded -> the cycle publishes PlaceJob
    ("ledger_place", "k_place", "JobPlaced"),         # Kafka -> ledger batch
    ("outbox", "JobPlaced", "k_event"),               # recorded -> relayed to the `events` topic
    ("dispatcher", "k_event", "wf_started"),          # events topic -> JobRun started in Temporal
    ("workflow_task", "wf_started", "act_scheduled"), # first workflow task -> start_job scheduled
    ("activity_pickup", "act_scheduled", "act_started"),  # executor poller takes start_job
    ("executor", "act_started", "k_started"),         # start_job runs, ReportJobStarted on Kafka
    ("ledger_started", "k_started", "JobStarted"),    # Kafka -> ledger batch: RUNNING
)


def _topic_times(settings: Any, topic: str, since: float, key_of: Any) -> dict[str, float]:
    """Kafka record (producer create) times of a topic's records from `since`, by `key_of(value)`."""
    from kafka import TopicPartition

    consumer = make_consumer(settings, None, enable_auto_commit=False, consumer_timeout_ms=2000)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(parts)
        starts = consumer.offsets_for_times({tp: int(since * 1000) for tp in parts})
        ends = consumer.end_offsets(parts)
        todo = {tp for tp in parts if starts.get(tp) is not None and starts[tp].offset < ends[tp]}
        for tp in parts:
            if tp in todo:
                consumer.seek(tp, starts[tp].offset)
        out: dict[str, float] = {}
        deadline = time.monotonic() + 60
        while todo and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500, max_records=5000).items():
                for r in records:
                    key = key_of(r.value)
                    if key is not None:
                        out.setdefault(key, r.timestamp / 1000)
                if consumer.position(tp) >= ends[tp]:
                    todo.discard(tp)
        return out
    finally:
        consumer.close()


async def _workflow_times(settings: Any, workflow_ids: list[str]) -> dict[str, dict[str, float]]:
    """From each JobRun history: started, `start_job` scheduled and picked up (server times)."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client

    client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
    sem = asyncio.Semaphore(16)

    async def one(wid: str) -> tuple[str, dict[str, float]]:
        async with sem:
            history = await client.get_workflow_handle(wid).fetch_history()
        times: dict[str, float] = {}
        for ev in history.events:
            at = ev.event_time.ToDatetime().timestamp() if ev.event_time.seconds else 0.0
            if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                times["wf_started"] = at
            elif ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED and "act_scheduled" not in times:
                times["act_scheduled"] = at
            elif ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED and "act_started" not in times:
                times["act_started"] = at
        return wid, times

    return dict(await asyncio.gather(*(one(w) for w in workflow_ids)))


def breakdown(settings: Any, submitted: dict[str, tuple[float, float]], since: float,
              after: int, dump: str = "", executor: str = EXECUTOR) -> dict[str, dict[str, float]]:
    """Each job's times at every hop (client, Kafka record times, ledger record times, Temporal history),
    then p50/p95 per hop in ms. The ledger's record time is its batch's decision time (before commit)."""
    wanted = set(submitted)
    times: dict[str, dict[str, float]] = {j: {"submit": t0} for j, (t0, _) in submitted.items()}
    by_message: dict[str, tuple[str, str]] = {}
    event_positions: dict[str, str] = {}
    for rec in EventStore.from_url(settings.resolved_store_url).iterate(after):
        job_id = rec.payload.get("job_id")
        if job_id not in wanted or rec.type not in ("JobSubmitted", "JobPlaced", "JobStarted"):
            continue
        if rec.type in times[job_id]:
            continue
        times[job_id][rec.type] = rec.recorded_at
        if rec.message_id:
            by_message[rec.message_id] = (job_id, {"JobSubmitted": "k_submit", "JobPlaced": "k_place",
                                                   "JobStarted": "k_started"}[rec.type])
        if rec.type == "JobPlaced":
            event_positions[str(rec.position)] = job_id

    def command_id(raw: bytes) -> str | None:
        mid = json.loads(raw).get("id")
        return mid if mid in by_message else None

    def event_position(raw: bytes) -> str | None:
        pos = str(json.loads(raw).get("position"))
        return pos if pos in event_positions else None

    prefix = settings.topic_prefix  # each component's commands on its own topic (ADR 0036)
    for topic in (command_topic(prefix, "api"), command_topic(prefix, "scheduler"),
                  command_topic(prefix, "executor", executor), command_topic(prefix, "executor", "local")):
        for mid, at in _topic_times(settings, topic, since, command_id).items():
            job_id, key = by_message[mid]
            times[job_id][key] = at
    for pos, at in _topic_times(settings, settings.topic("events"), since, event_position).items():
        times[event_positions[pos]]["k_event"] = at
    wids = {f"job-{j}-attempt-1": j for j in submitted}
    for wid, t in asyncio.run(_workflow_times(settings, list(wids))).items():
        times[wids[wid]].update(t)
    if dump:
        with open(dump, "w") as f:
            json.dump(times, f, indent=1, sort_keys=True)
    out: dict[str, dict[str, float]] = {}
    for name, a, b in HOPS:
        values = [(t[b] - t[a]) * 1000 for t in times.values() if a in t and b in t]
        out[name] = {"p50": round(_percentile(values, 0.5), 1), "p95": round(_percentile(values, 0.95), 1)}
    return out


STACK = ("api", "ledger", "scheduler", "worker", "executor", "kafka", "postgres", "temporal")


def _proc_cpu_s(pid: int, reaped: bool = False) -> float:
    """CPU seconds of a process from /proc (with its reaped children's when `reaped`)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if reaped else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def stack_cpu(settings: Any, extra: dict[str, int]) -> dict[str, float]:
    """CPU seconds used so far by each process of the stack (PostgreSQL: the server and its backends),
    from the PID files `steward up` keeps. A per-job figure that does not depend on the machine's load."""
    pids = {name: read_pid(Paths(settings.run_dir), name) for name in STACK} | extra
    out: dict[str, float] = {}
    for name, pid in pids.items():
        if pid is None:
            continue
        if name == "postgres":
            out[name] = _proc_cpu_s(pid, reaped=True) + sum(_proc_cpu_s(c) for c in children(pid))
        else:
            out[name] = _proc_cpu_s(pid)
    return out


def run(jobs: int = 200, concurrency: int = 4, nodes: int = 32, gpus: int = 8, executor: str = "sim",
        job_s: float = 5.0, timeout: float = 300.0, hops: bool = True, dump: str = "") -> dict[str, Any]:
    if executor == "slurm":
        return run_slurm(jobs, concurrency, job_s, timeout, hops, dump)
    settings = Settings()
    serves = executor == "sim"
    names = setup(settings, nodes, gpus, EXECUTOR if serves else "local")
    speed = 60.0
    proc = start_executor(speed) if serves else None
    command = ["sleep", str(job_s * speed if serves else job_s)]
    try:
        if proc is not None:
            wait_polling(settings, proc)
        return measure(settings, jobs, concurrency, command, executor, timeout, hops, dump,
                       {"sim_executor": proc.pid} if proc is not None else {}, EXECUTOR) | {"nodes": nodes,
                                                                                            "gpus_per_node": gpus}
    finally:
        # drain while the executor still answers: each drain then ends at once instead of waiting
        # `lost_after_s` for a gone executor (and loading the next run with 32 waiting workflows)
        teardown(settings, names)
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)


def run_slurm(jobs: int, concurrency: int, job_s: float, timeout: float, hops: bool, dump: str) -> dict[str, Any]:
    """The node agent's figures (the baseline: the same jobs on as many GPUs), then Slurm's, in one run."""
    settings = Settings()
    conf = slurm_conf(settings)
    gpus_per_node = 8
    baseline = run(jobs, concurrency, max(1, -(-jobs // gpus_per_node)), gpus_per_node, "local", job_s, timeout,
                   hops)
    proc = start_slurm_executor(conf)
    names: list[str] = []
    try:
        wait_polling(settings, proc, executor=SLURM_EXECUTOR)
        names = slurm_nodes(settings, conf)
        slurm = measure(settings, jobs, concurrency, ["sleep", str(job_s)], "slurm", timeout, hops, dump,
                        {"slurm_executor": proc.pid}, SLURM_EXECUTOR) | {"nodes": len(names), "slurm_conf": conf}
    finally:
        teardown(settings, names)  # Steward places nothing more on Slurm's nodes once its executor is gone
        proc.terminate()
        proc.wait(timeout=30)

    def ratio(key: str) -> float | None:
        a, b = slurm.get(key), baseline.get(key)
        return round(a / b, 2) if isinstance(a, float) and isinstance(b, float) and b > 0 else None

    return {"executor": "slurm", "jobs": jobs, "started": slurm["started"], "slurm": slurm, "local": baseline,
            "submit_to_running_p50_ratio": ratio("submit_to_running_ms_p50"),
            "submit_to_running_p95_ratio": ratio("submit_to_running_ms_p95"),
            "placed_to_started_p50_ratio": ratio("placed_to_started_ms_p50")}


def measure(settings: Any, jobs: int, concurrency: int, command: list[str], executor: str, timeout: float,
            hops: bool, dump: str, extra_pids: dict[str, int], executor_id: str) -> dict[str, Any]:
    """Submit `jobs` jobs and time each from its submission to its start (and its hops)."""
    head = EventStore.from_url(settings.resolved_store_url).head()
    cpu_before = stack_cpu(settings, extra_pids)
    t_start = time.time()
    submitted = submit_all(settings, jobs, concurrency, command)
    seen = wait_started(settings, set(submitted), head, timeout)
    cpu_after = stack_cpu(settings, extra_pids)
    ended = wait_ended(settings, set(submitted), head, timeout)
    latencies = [(seen[j]["JobStarted"] - t0) * 1000 for j, (t0, _) in submitted.items()
                 if "JobStarted" in seen.get(j, {})]
    starts = [seen[j]["JobStarted"] for j in submitted if "JobStarted" in seen.get(j, {})]
    placed = [(seen[j]["JobPlaced"] - seen[j]["JobSubmitted"]) * 1000 for j in submitted
              if {"JobPlaced", "JobSubmitted"} <= set(seen.get(j, {}))]
    running = [(seen[j]["JobStarted"] - seen[j]["JobPlaced"]) * 1000 for j in submitted
               if {"JobPlaced", "JobStarted"} <= set(seen.get(j, {}))]
    result: dict[str, Any] = {
        "jobs": jobs, "started": len(latencies), "ended": ended, "concurrency": concurrency, "executor": executor,
        "submit_to_running_ms_p50": round(_percentile(latencies, 0.5), 1),
        "submit_to_running_ms_p95": round(_percentile(latencies, 0.95), 1),
        "submit_to_running_ms_p99": round(_percentile(latencies, 0.99), 1),
        "submit_to_running_ms_max": round(max(latencies), 1) if latencies else None,
        "starts_per_s": round(len(starts) / max(max(starts) - t_start, 1e-9), 2) if starts else 0.0,
        "api_submit_ms_p50": round(statistics.median(rt * 1000 for _, rt in submitted.values()), 1),
        "submitted_to_placed_ms_p50": round(_percentile(placed, 0.5), 1),
        "placed_to_started_ms_p50": round(_percentile(running, 0.5), 1),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        # CPU per started job, from the first submit until all started (idle costs included)
        "cpu_ms_per_job": {name: round((cpu_after[name] - cpu_before.get(name, 0.0)) * 1000 / max(len(starts), 1), 1)
                           for name in cpu_after},
    }
    if hops:
        result["hops_ms"] = breakdown(settings, submitted, t_start - 1.0, head, dump, executor_id)
    return result


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="steward bench lease", description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=None, help="200; 16 with --executor slurm (within its GPUs)")
    ap.add_argument("--concurrency", type=int, default=4, help="API clients submitting at once")
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--executor", choices=("sim", "local", "slurm"), default="sim",
                    help="slurm: through a Slurm cluster, beside the node agent (local) in the same run")
    ap.add_argument("--job-s", type=float, default=5.0, help="how long each job runs (real seconds)")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--no-hops", action="store_true", help="skip the per-hop breakdown (`hops_ms`)")
    ap.add_argument("--dump", default="", help="write each job's time at every hop to this JSON file")
    ap.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    args = ap.parse_args(argv)
    if args.jobs is None:
        args.jobs = 16 if args.executor == "slurm" else 200
    if args.jobs < 1:
        ap.error(f"--jobs must be 1 or more, got {args.jobs}")
    result = run(args.jobs, args.concurrency, args.nodes, args.gpus, args.executor, args.job_s, args.timeout,
                 not args.no_hops, args.dump)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0 if result["started"] == result["jobs"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
