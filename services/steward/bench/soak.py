"""Soak benchmark: the whole running stack under many concurrent API clients, a stream of submissions
and node agents killed (SIGKILL) and restarted, for `--minutes`; then: did anything get lost?

    steward up
    steward bench soak --minutes 3 --json

Setup (not measured): a project `bench-soak` (share 0: its jobs run unfunded on idle capacity),
`--agents` simulated node agents (`steward executor sim --id soak-<k>`, own processes, `--nodes` nodes of
8 GPUs each) and one node `soak-local` of 4 GPUs on the stack's local executor (real `sleep` processes),
and one API token per client (each token has its own rate limit, as each user would).

Phases:
1. baseline (`--baseline-s`): one client, no submissions, no churn: the API latency of a quiet stack,
   measured in this run next to the soak's (the machine is shared: compare ratios, not absolutes);
2. soak (`--minutes`): `--clients` asyncio/httpx clients in a closed loop (a read query, then a think time
   of `--think-s` ± 50 %), a submitter at `--rate` jobs/s through `submitJob`, and every `--churn-s` one
   node agent killed with SIGKILL (round robin over the simulated agents and the stack's local executor)
   and restarted `--down-s` later; every `--sample-s` the RSS of each process (/proc) and the ledger's
   `/metrics` (ingest and outbox lag) are sampled;
3. drain (`--drain-s` at most): until the ledger's lag is 0 and every accepted job has ended.

Figures:
- `rejections_by_command`: every command the domain refused meanwhile (any actor), by type and code;
- `errors`: API requests that failed (transport error, HTTP status other than 200, GraphQL errors, a
  refused submission), with `errors_by_kind`;
- `events_lost`: accepted submissions without a `JobSubmitted` in the store, plus `SubmitJob` commands of
  this run on Kafka without an outcome event, plus positions recorded meanwhile that never reached the
  `events` topic (duplicates on the topic are allowed: at-least-once; `events_duplicated` counts them);
- `api_latency_ms_p50|p99` (every request), `api_submit_latency_ms_p99`, and the baseline's;
- `ledger_lag_max` (messages, the sum over partitions of `steward_ledger_lag_messages`), `outbox_lag_max`;
- `rss_growth_mb_per_h`: per process, the least-squares slope of its RSS over the soak after the first
  `--warmup-s` of its life (a restarted process: its longest life after its warm-up), with `rss_mb` at
  the start and end. A few minutes cannot tell a leak from a warm-up: soak for an hour before quoting it. PostgreSQL is
  the postmaster plus its backends (anonymous memory only: shared buffers are not growth).
The client is in this process (one asyncio loop): its own CPU time counts in the latencies it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from steward.auth.tokens import TokenStore
from steward.bench.procfs import children
from steward.bus.kafka import make_consumer
from steward.cli.stack import metrics_env
from steward.config import Settings
from steward.domain.commands import RegisterNode, ResumeNode, RetireNode, SetAllocations
from steward.infra.processes import Paths, infra_script, read_pid, start_own
from steward.metrics import metrics_urls, stack_ports
from steward.store.eventstore import EventStore

PROJECT = "bench-soak"
AGENT = "soak"
LOCAL_NODE = "soak-local"
STACK = ("api", "ledger", "scheduler", "worker", "executor", "kafka", "postgres", "temporal")
SPEED = 60.0

READS = (
    ("jobCounts", "query { jobCounts { state count } }"),
    ("queue", "query { queue(first: 20) { waiting waitingGpus entries { position job { id state } } } }"),
    ("allocations", "query { allocations { name owed delivered deliveredOverOwed runningGpus waitingJobs } }"),
    ("me", "query { me { subject role } }"),
)
SUBMIT = """mutation($input: SubmitJobInput!) { submitJob(input: $input) {
  __typename ... on Rejected { code reason } ... on InvalidInput { field message } } }"""


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return round(ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo), 1)


def slope_per_h(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, MB) points, in MB per hour."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    den = sum((t - mx) ** 2 for t, _ in points)
    if den == 0:
        return None
    return round(sum((t - mx) * (v - my) for t, v in points) / den * 3600, 1)


# -- memory ------------------------------------------------------------------------------------------


def _status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def rss_mb(name: str, pid: int) -> float:
    if name == "postgres":
        return sum(_status_kb(p, "RssAnon") for p in (pid, *children(pid))) / 1024
    return _status_kb(pid, "VmRSS") / 1024


def stack_pids(settings: Any) -> dict[str, int]:
    paths = Paths(settings.run_dir)
    return {name: pid for name in STACK if (pid := read_pid(paths, name)) is not None}


# -- setup -------------------------------------------------------------------------------------------


def _execute(settings: Any, command: Any) -> None:
    from steward.bench.lease import _execute as execute

    execute(settings, command)


def setup(settings: Any, agents: int, nodes: int) -> list[str]:
    _execute(settings, SetAllocations("cluster", {PROJECT: 0.0}, "soak benchmark (unfunded, idle capacity)"))
    names: list[str] = []
    for k in range(agents):
        # each simulated agent is an executor of its own: its Kafka principal, command topic and ACLs (ADR 0039);
        # without them it cannot connect and its nodes are never healthy
        infra_script("kafka", "add-executor", f"{AGENT}-{k}", settings=settings)
        for i in range(nodes):
            name = f"{AGENT}-{k}-n{i}"
            # a cluster of its own: a cluster has one executor (ADR 0091), and the store may hold others' nodes
            _execute(settings, RegisterNode(name, 8, "SOAK", [f"{AGENT}-{k}", name], f"{AGENT}-{k}",
                                            cluster=f"{AGENT}-{k}"))
            names.append(name)
    _execute(settings, RegisterNode(LOCAL_NODE, 4, "SOAK", [LOCAL_NODE, LOCAL_NODE], settings.executor_id,
                                    cluster=LOCAL_NODE))
    names.append(LOCAL_NODE)
    for name in names:
        _execute(settings, ResumeNode(name, "soak benchmark"))  # rejected (harmless) unless draining
    return names


def teardown(settings: Any, names: list[str]) -> None:
    """The run's nodes leave the cluster once their last attempt ends (ADR 0081): drained, they stayed in the
    store's capacity as draining GPUs for good (a later `make demo` on the same store showed 132 of them), and
    the next run's `setup` registers them again anyway."""
    for name in names:
        _execute(settings, RetireNode(name, "soak benchmark done", when_empty=True))


def make_tokens(settings: Any, n: int) -> list[tuple[str, str]]:
    tokens = TokenStore(EventStore.from_url(settings.resolved_store_url))
    out = []
    for i in range(n):
        token, info = tokens.create(role="admin", scopes=[], subject=f"soak-client-{i}", created_by="bench soak",
                                    ttl_s=24 * 3600)
        out.append((token, info.token_id))
    return out


def revoke_tokens(settings: Any, ids: list[str]) -> None:
    tokens = TokenStore(EventStore.from_url(settings.resolved_store_url))
    for token_id in ids:
        tokens.revoke(token_id, by="bench soak")


# -- node agents -------------------------------------------------------------------------------------


class Agents:
    """The simulated node agents this run starts, and the stack's local executor, killed in turn."""

    def __init__(self, settings: Any, agents: int, log_dir: Path) -> None:
        self.settings = settings
        self.ids = [f"{AGENT}-{k}" for k in range(agents)]
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.kills = 0
        self.turn = 0

    def start(self, agent_id: str) -> None:
        log = (self.log_dir / f"{agent_id}.log").open("ab")
        self.procs[agent_id] = subprocess.Popen(
            [sys.executable, "-m", "steward.cli.main", "executor", "sim", "--id", agent_id, "--speed", str(SPEED)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            env=os.environ | {"STEWARD_METRICS_PORT": "off"})

    def start_all(self) -> None:
        for agent_id in self.ids:
            self.start(agent_id)

    def victims(self) -> list[str]:
        return [*self.ids, "local"]

    def kill_next(self) -> str:
        victim = self.victims()[self.turn % len(self.victims())]
        self.turn += 1
        if victim == "local":
            pid = read_pid(Paths(self.settings.run_dir), "executor")
            if pid is None:
                return "none"
            os.kill(pid, signal.SIGKILL)
        else:
            self.procs[victim].send_signal(signal.SIGKILL)
            self.procs[victim].wait(timeout=10)
        self.kills += 1
        return victim

    def restart(self, victim: str) -> None:
        if victim == "local":
            values = {}
            stack_env = Paths(self.settings.run_dir).stack_env
            if stack_env.exists():
                values = dict(line.split("=", 1) for line in stack_env.read_text().splitlines() if "=" in line)
            env = os.environ | values | {"STEWARD_RUN_DIR": str(self.settings.run_dir)}
            start_own("executor", Paths(self.settings.run_dir), env | metrics_env("executor",
                                                                                   stack_ports(self.settings)))
        elif victim in self.procs:
            self.start(victim)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


# -- load --------------------------------------------------------------------------------------------


@dataclass
class Load:
    latencies: list[float] = field(default_factory=list)
    submit_latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    submitted: list[str] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    accepted_at: list[float] = field(default_factory=list)  # monotonic, when each acceptance came back

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


async def _post(client: httpx.AsyncClient, url: str, token: str, body: dict[str, Any], load: Load,
                submit: bool = False) -> dict[str, Any] | None:
    started = time.perf_counter()
    try:
        resp = await client.post(url, json=body, headers={"Authorization": f"Bearer {token}"})
    except httpx.HTTPError as err:
        load.error(f"transport:{type(err).__name__}")
        return None
    finally:
        ms = (time.perf_counter() - started) * 1000
        load.requests += 1
        (load.submit_latencies if submit else load.latencies).append(ms)
    if resp.status_code != 200:
        load.error(f"http:{resp.status_code}")
        return None
    data = resp.json()
    if data.get("errors"):
        code = (data["errors"][0].get("extensions") or {}).get("code", "error")
        load.error(f"graphql:{code}")
        return None
    return dict(data.get("data") or {})


def _own_client() -> httpx.AsyncClient:
    """One keep-alive connection of its own per simulated user, as each user's browser or CLI would have.
    (One shared pool of 200 connections spent most of this process's CPU in httpcore's pool bookkeeping,
    which scans every connection on every request: the soak measured its own client, not the API.)"""
    return httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))


async def reader(url: str, token: str, until: float, think_s: float, load: Load, rng: random.Random) -> None:
    await asyncio.sleep(rng.uniform(0, think_s))  # spread the clients' first requests
    async with _own_client() as client:
        while time.monotonic() < until:
            _, query = rng.choice(READS)
            await _post(client, url, token, {"query": query}, load)
            await asyncio.sleep(think_s * rng.uniform(0.5, 1.5))


async def submitter(client: httpx.AsyncClient, url: str, token: str, until: float, rate: float, run: str,
                    load: Load, rng: random.Random) -> None:
    i = 0
    next_at = time.monotonic()
    tasks: set[asyncio.Task[None]] = set()

    async def one(job_id: str) -> None:
        seconds = rng.uniform(5, 20)
        # the same length wherever it is placed: the local executor runs `sh -c "sleep S"` (the rest are
        # the shell's $0 and $1), a simulated agent reads `--duration` in virtual seconds
        command = ["sh", "-c", f"sleep {seconds:.0f}", "--duration", f"{seconds * SPEED:.0f}"]
        variables = {"input": {"project": PROJECT, "gpus": 1, "minRuntimeS": 0.0, "command": command,
                               "jobId": job_id}}
        load.submitted.append(job_id)
        data = await _post(client, url, token, {"query": SUBMIT, "variables": variables}, load, submit=True)
        if data is None:
            return
        kind = data["submitJob"]["__typename"]
        if kind == "JobAccepted":
            load.accepted.append(job_id)
            load.accepted_at.append(time.monotonic())
        else:
            load.error(f"submit:{kind}")

    while time.monotonic() < until:
        next_at += 1.0 / rate
        job_id = f"soak-{run}-{i}"
        task = asyncio.create_task(one(job_id))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        i += 1
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    if tasks:
        await asyncio.gather(*tasks)


# -- sampling ----------------------------------------------------------------------------------------


def ledger_lags(url: str) -> tuple[float, float] | None:
    from prometheus_client.parser import text_string_to_metric_families

    try:
        text = httpx.get(url, timeout=5).text
    except httpx.HTTPError:
        return None
    lag = outbox = 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "steward_ledger_lag_messages":
            lag = sum(s.value for s in family.samples)
        elif family.name == "steward_outbox_lag_events":
            outbox = sum(s.value for s in family.samples)
    return lag, outbox


@dataclass
class Samples:
    rss: dict[str, list[tuple[float, int, float]]] = field(default_factory=dict)  # name -> (t, pid, MB)
    lag: list[float] = field(default_factory=list)
    outbox: list[float] = field(default_factory=list)
    unreadable: int = 0

    def take(self, settings: Any, t: float, ledger_url: str) -> None:
        for name, pid in stack_pids(settings).items():
            mb = rss_mb(name, pid)
            if mb > 0:
                self.rss.setdefault(name, []).append((t, pid, mb))
        lags = ledger_lags(ledger_url)
        if lags is None:
            self.unreadable += 1
        else:
            self.lag.append(lags[0])
            self.outbox.append(lags[1])

    def growth(self, warmup_s: float) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, points in self.rss.items():
            born: dict[int, float] = {}
            lives: dict[int, list[tuple[float, float]]] = {}
            for t, pid, mb in points:  # each life (a restart is a new pid) after its own warm-up
                born.setdefault(pid, t)
                if t - born[pid] >= warmup_s:
                    lives.setdefault(pid, []).append((t, mb))
            longest = max(lives.values(), key=len, default=[])
            out[name] = {"rss_growth_mb_per_h": slope_per_h(longest),
                         "rss_mb_start": round(points[0][2], 1), "rss_mb_end": round(points[-1][2], 1),
                         "restarts": len({pid for _, pid, _ in points}) - 1}
        return out


async def sampler(settings: Any, ledger_url: str, until: float, every: float, t0: float, samples: Samples) -> None:
    while time.monotonic() < until:
        await asyncio.to_thread(samples.take, settings, time.monotonic() - t0, ledger_url)
        await asyncio.sleep(every)


async def churner(agents: Agents, until: float, every: float, down_s: float, log: list[dict[str, Any]],
                  t0: float) -> None:
    while time.monotonic() + every < until:
        await asyncio.sleep(every)
        victim = await asyncio.to_thread(agents.kill_next)
        log.append({"t": round(time.monotonic() - t0, 1), "killed": victim})
        await asyncio.sleep(down_s)
        await asyncio.to_thread(agents.restart, victim)


# -- checking ----------------------------------------------------------------------------------------


def check_store(settings: Any, run: str, accepted: list[str], head_before: int) -> dict[str, Any]:
    """What the store recorded for this run's jobs (after the drain)."""
    store = EventStore.from_url(settings.resolved_store_url)
    submitted: set[str] = set()
    rejected_ids: set[str] = set()
    ended: set[str] = set()
    outcomes: set[str] = set()  # message ids with an outcome
    rejections: dict[str, int] = {}  # every refusal meanwhile, "Command:code" -> count
    prefix = f"soak-{run}-"
    for rec in store.iterate(head_before):
        job_id = str(rec.payload.get("job_id", ""))
        if rec.message_id:
            outcomes.add(rec.message_id)
        if rec.type == "CommandRejected":
            key = f"{(rec.metadata or {}).get('command', '?')}:{rec.payload.get('code', '?')}"
            rejections[key] = rejections.get(key, 0) + 1
        if not job_id.startswith(prefix):
            inp = (rec.metadata or {}).get("input") or {}
            if rec.type == "CommandRejected" and str(inp.get("job_id", "")).startswith(prefix):
                rejected_ids.add(str(inp["job_id"]))
            continue
        if rec.type == "JobSubmitted":
            submitted.add(job_id)
        elif rec.type in ("JobCompleted", "JobFailed", "JobCancelled"):
            ended.add(job_id)
    head_after = store.head()
    return {"submitted": submitted, "rejected": rejected_ids, "ended": ended, "outcomes": outcomes,
            "rejections": rejections,
            "head_after": head_after, "missing": sorted(set(accepted) - submitted)}


def check_kafka(settings: Any, since: float, run: str, outcomes: set[str], head_before: int,
                head_after: int) -> dict[str, int]:
    """SubmitJob commands of this run on Kafka without an outcome, and positions never relayed."""
    from kafka import TopicPartition

    def read(topic: str) -> list[bytes]:
        consumer = make_consumer(settings, None, consumer_timeout_ms=2000)
        try:
            parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
            consumer.assign(parts)
            starts = consumer.offsets_for_times({tp: int(since * 1000) for tp in parts})
            ends = consumer.end_offsets(parts)
            todo = {tp for tp in parts if starts.get(tp) is not None and starts[tp].offset < ends[tp]}
            for tp in todo:
                consumer.seek(tp, starts[tp].offset)
            out: list[bytes] = []
            deadline = time.monotonic() + 120
            while todo and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500, max_records=5000).values():
                    out.extend(r.value for r in records)
                for tp in list(todo):
                    if consumer.position(tp) >= ends[tp]:
                        todo.discard(tp)
            return out
        finally:
            consumer.close()

    unanswered = 0
    for raw in read(settings.topic("commands")):
        msg = json.loads(raw)
        if msg.get("type") == "SubmitJob" and str(msg.get("payload", {}).get("job_id", "")).startswith(
                f"soak-{run}-") and msg.get("id") not in outcomes:
            unanswered += 1
    seen: dict[int, int] = {}
    for raw in read(settings.topic("events")):
        position = int(json.loads(raw)["position"])
        seen[position] = seen.get(position, 0) + 1
    wanted = range(head_before + 1, head_after + 1)
    return {"commands_without_outcome": unanswered,
            "positions_not_relayed": sum(1 for p in wanted if p not in seen),
            "events_duplicated": sum(n - 1 for p, n in seen.items() if p in wanted and n > 1)}


# -- the run -----------------------------------------------------------------------------------------


async def _phase(settings: Any, url: str, tokens: list[str], seconds: float, think_s: float, rate: float,
                 run: str, agents: Agents | None, churn_s: float, down_s: float, sample_s: float,
                 samples: Samples | None, churn_log: list[dict[str, Any]]) -> Load:
    load = Load()
    rng = random.Random(run)
    t0 = time.monotonic()
    until = t0 + seconds
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)  # the submitter's (concurrent submits)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        tasks = [reader(url, tok, until, think_s, load, rng) for tok in tokens[1:] or tokens]
        if rate > 0:
            tasks.append(submitter(client, url, tokens[0], until, rate, run, load, rng))
        if agents is not None and churn_s > 0:
            tasks.append(churner(agents, until, churn_s, down_s, churn_log, t0))
        if samples is not None:
            tasks.append(sampler(settings, metrics_urls(settings)["ledger"], until, sample_s, t0, samples))
        await asyncio.gather(*tasks)
    return load


def drain(settings: Any, accepted: list[str], run: str, head_before: int, timeout: float) -> float:
    """Wait until the ledger's lag is 0 and every accepted job ended; returns the seconds it took."""
    started = time.monotonic()
    url = metrics_urls(settings)["ledger"]
    while time.monotonic() - started < timeout:
        lags = ledger_lags(url)
        if lags is not None and lags == (0.0, 0.0):
            got = check_store(settings, run, accepted, head_before)
            if set(accepted) <= got["ended"]:
                break
        time.sleep(2.0)
    return round(time.monotonic() - started, 1)


def run(minutes: float = 3.0, clients: int = 200, rate: float = 2.0, think_s: float = 1.0, agents: int = 2,
        nodes: int = 8, churn_s: float = 30.0, down_s: float = 3.0, sample_s: float = 5.0,
        baseline_s: float = 20.0, warmup_s: float = 30.0, drain_s: float = 300.0) -> dict[str, Any]:
    settings = Settings()
    url = settings.resolved_api_url
    run_id = uuid.uuid4().hex[:6]
    names = setup(settings, agents, nodes)
    issued = make_tokens(settings, clients + 1)
    tokens = [t for t, _ in issued]
    log_dir = settings.run_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    node_agents = Agents(settings, agents, log_dir)
    node_agents.start_all()
    churn_log: list[dict[str, Any]] = []
    samples = Samples()
    try:
        time.sleep(3.0)  # the agents' workers poll before the first placement
        base = asyncio.run(_phase(settings, url, tokens[:2], baseline_s, think_s / 10, 0.0, run_id, None, 0, 0,
                                  sample_s, None, []))
        head_before = EventStore.from_url(settings.resolved_store_url).head()
        since = time.time() - 1.0
        load = asyncio.run(_phase(settings, url, tokens, minutes * 60, think_s, rate, run_id, node_agents,
                                  churn_s, down_s, sample_s, samples, churn_log))
        drained_s = drain(settings, load.accepted, run_id, head_before, drain_s)
        store = check_store(settings, run_id, load.accepted, head_before)
        kafka = check_kafka(settings, since, run_id, store["outcomes"], head_before, store["head_after"])
    finally:
        teardown(settings, names)  # first: nothing more is placed on the agents about to stop
        node_agents.stop_all()
        revoke_tokens(settings, [i for _, i in issued])
    lost = len(store["missing"]) + kafka["commands_without_outcome"] + kafka["positions_not_relayed"]
    growth = samples.growth(warmup_s)
    return {
        "minutes": minutes, "clients": clients, "submit_rate_per_s": rate, "think_s": think_s,
        "requests": load.requests, "requests_per_s": round(load.requests / (minutes * 60), 1),
        "errors": sum(load.errors.values()), "errors_by_kind": load.errors,
        "submitted": len(load.submitted), "accepted": len(load.accepted),
        "recorded": len(store["submitted"]), "jobs_with_a_refused_command": len(store["rejected"]),
        "rejections_by_command": store["rejections"],
        "ended": len(store["ended"] & set(load.accepted)),
        "not_ended": len(set(load.accepted) - store["ended"]),
        "events_lost": lost,
        "events_lost_detail": {"accepted_not_recorded": len(store["missing"]),
                               "commands_without_outcome": kafka["commands_without_outcome"],
                               "positions_not_relayed": kafka["positions_not_relayed"]},
        "events_duplicated": kafka["events_duplicated"],
        "events_recorded": store["head_after"] - head_before,
        "api_latency_ms_p50": percentile(load.latencies + load.submit_latencies, 0.5),
        "api_latency_ms_p99": percentile(load.latencies + load.submit_latencies, 0.99),
        "api_read_latency_ms_p99": percentile(load.latencies, 0.99),
        "api_submit_latency_ms_p50": percentile(load.submit_latencies, 0.5),
        "api_submit_latency_ms_p99": percentile(load.submit_latencies, 0.99),
        "baseline": {"clients": 1, "seconds": baseline_s, "requests": base.requests,
                     "errors": sum(base.errors.values()),
                     "api_latency_ms_p50": percentile(base.latencies, 0.5),
                     "api_latency_ms_p99": percentile(base.latencies, 0.99)},
        "ledger_lag_max": max(samples.lag, default=None),
        "outbox_lag_max": max(samples.outbox, default=None),
        "ledger_metrics_unreadable": samples.unreadable,
        "drain_s": drained_s,
        "executor_kills": node_agents.kills, "churn": churn_log,
        "rss_growth_mb_per_h": {name: g["rss_growth_mb_per_h"] for name, g in growth.items()},
        "rss": growth,
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def option_problems(args: argparse.Namespace, positive: tuple[str, ...], non_negative: tuple[str, ...]) -> list[str]:
    """What is wrong with the numeric options (the soak's and the benchmarks on its load)."""
    def flag(name: str) -> str:
        return "--" + name.replace("_", "-")

    return ([f"{flag(k)} must be positive, got {getattr(args, k)}" for k in positive if getattr(args, k) <= 0]
            + [f"{flag(k)} must be 0 or more, got {getattr(args, k)}" for k in non_negative if getattr(args, k) < 0])


def load_options(prog: str, minutes: float, agents_help: str) -> argparse.ArgumentParser:
    """The options of the soak's load (and of the benchmarks that reuse it: `steward bench chaos`)."""
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=minutes)
    ap.add_argument("--clients", type=int, default=200, help="concurrent API clients (one token each)")
    ap.add_argument("--rate", type=float, default=2.0, help="submissions per second")
    ap.add_argument("--think-s", type=float, default=1.0, help="a client's pause between requests (± 50 %%)")
    ap.add_argument("--agents", type=int, default=2, help=agents_help)
    ap.add_argument("--nodes", type=int, default=8, help="nodes of 8 GPUs per simulated agent")
    return ap


def main(argv: list[str]) -> int:
    ap = load_options("steward bench soak", 3.0, "simulated node agents (churned with the local one)")
    ap.add_argument("--churn-s", type=float, default=30.0, help="kill a node agent this often (0: never)")
    ap.add_argument("--down-s", type=float, default=3.0, help="restart it this much later")
    ap.add_argument("--sample-s", type=float, default=5.0)
    ap.add_argument("--baseline-s", type=float, default=20.0)
    ap.add_argument("--warmup-s", type=float, default=30.0, help="RSS samples before this are not growth")
    ap.add_argument("--drain-s", type=float, default=300.0,
                    help="after the soak, wait at most this long for the lag to clear and the jobs to end")
    ap.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    args = ap.parse_args(argv)
    problems = option_problems(args, ("minutes", "clients", "think_s", "agents", "nodes", "sample_s"),
                               ("rate", "churn_s", "down_s", "baseline_s", "warmup_s", "drain_s"))
    if problems:
        sys.stderr.write("steward bench soak: " + "; ".join(problems) + "\n")
        return 2
    result = run(args.minutes, args.clients, args.rate, args.think_s, args.agents, args.nodes, args.churn_s,
                 args.down_s, args.sample_s, args.baseline_s, args.warmup_s, args.drain_s)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0 if result["events_lost"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
