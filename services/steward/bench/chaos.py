"""Chaos benchmark: the soak's load on a supervised stack while its processes are SIGKILLed and its services
restarted, for `--minutes`; then: was anything lost or doubled, is any job stranded, how long was each part
of the service gone? (issue 22 "Chaos, proven"; ADR 0061)

    steward up                       # supervised (the default): a killed process is started again
    steward bench chaos --minutes 10 --json

Load: `steward bench soak`'s own (its setup, tokens, simulated node agents, readers and submitter:
`steward.bench.soak._phase`), without its node-agent churn: this run's killer replaces it.

Faults, during the load:
- every `--kill-every-s` a SIGKILL of one Steward process chosen at random among those `steward up` started
  and the supervisor keeps running (`steward.infra.supervisor.supervised`: the PID files of the run
  folder, so API replicas and standbys are victims as soon as `steward up` starts them);
- one restart each of PostgreSQL, Kafka and Temporal (`infra/<service>.sh restart`), at 1/4, 1/2 and 3/4
  of the run (`--no-services` leaves them alone).

Probes, every `--probe-s`: the API's `/healthz` and each process's `/metrics` (is it serving?). A gap is
the time from the last answer before a run of failures to the first answer after it. Two more gaps come
from the load itself, from its start to its end: `submit_to_record` (the longest time without an accepted
submission, each answered only once the ledger recorded it: API, Kafka and ledger in one) and, from the
store, `placements` (the longest time without a `JobPlaced` of this run's jobs: the scheduler).

After the load, the soak's drain and checks (`steward.bench.soak.drain|check_store|check_kafka`), and per
job of this run: submitted twice (`doubled`), ended, still placed or running on a node (`still_running`),
or neither (`stranded`: waiting with nothing wrong is not stranded only while capacity is short; after the
drain every job of 5 to 20 s should have ended).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from steward.bench import soak
from steward.config import Settings
from steward.infra.processes import SUPERVISOR, Paths, infra_script, read_pid
from steward.infra.supervisor import supervised
from steward.metrics import metrics_urls
from steward.store.eventstore import EventStore

SERVICES = ("postgres", "kafka", "temporal")
ENDED = ("JobCompleted", "JobFailed", "JobCancelled")
ON_A_NODE = ("JobPlaced", "JobStarted")


class ChaosError(RuntimeError):
    """The stack cannot take this benchmark (the message says what to do)."""


# -- faults ------------------------------------------------------------------------------------------


@dataclass
class Faults:
    kills: list[dict[str, Any]] = field(default_factory=list)
    restarts: list[dict[str, Any]] = field(default_factory=list)


def kill_one(paths: Paths, rng: random.Random) -> dict[str, Any] | None:
    """SIGKILL one running process of those the supervisor keeps (None: none runs right now)."""
    running = [(name, pid) for name in supervised(paths) if (pid := read_pid(paths, name)) is not None]
    if not running:
        return None
    name, pid = rng.choice(running)
    try:  # its process group, as a crash of it ends it: its own children too (the ledger's writer, ADR 0025),
        os.killpg(pid, signal.SIGKILL)  # not the jobs, which lead groups of their own (steward.executor.shim)
    except ProcessLookupError:
        return None
    return {"victim": name, "pid": pid}


def restart_service(settings: Any, name: str) -> dict[str, Any]:
    """`infra/<name>.sh stop`, then `start` (Kafka: and its topics), each timed: a graceful stop can be slow,
    and the service is down from the end of the stop to the end of the start."""
    out: dict[str, Any] = {"service": name}
    for step in ("stop", "start"):
        started = time.monotonic()
        proc = infra_script(name, step, settings=settings, check=False)
        if step == "start" and name == "kafka" and proc.returncode == 0:
            proc = infra_script("kafka", "topics", settings=settings, check=False)
        out[f"{step}_s"] = round(time.monotonic() - started, 1)
        if proc.returncode != 0:
            return out | {"ok": False, "error": f"{step}: {(proc.stderr or proc.stdout).strip()[-300:]}"}
    return out | {"ok": True}


async def killer(paths: Paths, until: float, every: float, t0: float, rng: random.Random, faults: Faults) -> None:
    while time.monotonic() + every < until:
        await asyncio.sleep(every)
        kill = await asyncio.to_thread(kill_one, paths, rng)
        if kill is not None:
            faults.kills.append({"t": round(time.monotonic() - t0, 1), **kill})


async def restarter(settings: Any, seconds: float, t0: float, faults: Faults) -> None:
    """Each service restarted once, at 1/4, 1/2 and 3/4 of the run, each on its own time (a slow stop of
    one, Kafka's takes a minute on a loaded machine, does not push the others past the load)."""
    async def one(k: int, name: str) -> None:
        await asyncio.sleep(max(0.0, t0 + seconds * k / (len(SERVICES) + 1) - time.monotonic()))
        at = round(time.monotonic() - t0, 1)
        faults.restarts.append({"t": at, **await asyncio.to_thread(restart_service, settings, name)})

    await asyncio.gather(*(one(k, name) for k, name in enumerate(SERVICES, start=1)))
    faults.restarts.sort(key=lambda r: float(r["t"]))


# -- probes ------------------------------------------------------------------------------------------


@dataclass
class Gaps:
    """Per probe: the last answer's time, whether the last probe failed, and the longest gap so far."""

    last_ok: dict[str, float] = field(default_factory=dict)
    failing: dict[str, bool] = field(default_factory=dict)
    longest: dict[str, float] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)

    def answer(self, name: str, ok: bool, t: float) -> None:
        self.longest.setdefault(name, 0.0)
        if not ok:
            self.failing[name] = True
            self.failures[name] = self.failures.get(name, 0) + 1
            return
        if self.failing.get(name) and name in self.last_ok:
            self.longest[name] = max(self.longest[name], t - self.last_ok[name])
        self.failing[name] = False
        self.last_ok[name] = t

    def close(self, t: float) -> None:
        """A probe still failing at the end: its gap runs to now."""
        for name, failing in self.failing.items():
            if failing and name in self.last_ok:
                self.longest[name] = max(self.longest[name], t - self.last_ok[name])


async def prober(urls: dict[str, str], stop: asyncio.Event, every: float, t0: float, gaps: Gaps) -> None:
    """Probe until `stop` (the load is over and every restart has returned)."""
    async with httpx.AsyncClient(timeout=every * 2) as client:
        async def probe(name: str, url: str) -> None:
            try:
                ok = (await client.get(url)).status_code == 200
            except httpx.HTTPError:
                ok = False
            gaps.answer(name, ok, time.monotonic() - t0)

        while not stop.is_set():
            await asyncio.gather(*(probe(n, u) for n, u in urls.items()), asyncio.sleep(every))
    gaps.close(time.monotonic() - t0)


def probe_urls(settings: Any) -> dict[str, str]:
    urls = {"api_health": f"{settings.resolved_api_url.rstrip('/').removesuffix('/graphql')}/healthz"}
    for name, url in metrics_urls(settings).items():
        if name != "api":
            urls[f"metrics:{name}"] = url
    return urls


def longest_between(times: list[float]) -> float:
    ordered = sorted(times)
    return round(max((b - a for a, b in itertools.pairwise(ordered)), default=0.0), 1)


# -- checking ----------------------------------------------------------------------------------------


def job_fates(settings: Any, run: str, head_before: int) -> dict[str, Any]:
    """Per job of this run, from the store: how often it was submitted, and its last event; the times of
    every placement meanwhile."""
    store = EventStore.from_url(settings.resolved_store_url)
    prefix = f"soak-{run}-"
    submitted: dict[str, int] = {}
    last: dict[str, str] = {}
    placed_at: list[float] = []
    for rec in store.iterate(head_before):
        job_id = str(rec.payload.get("job_id", ""))
        if not job_id.startswith(prefix):
            continue
        if rec.type == "JobSubmitted":
            submitted[job_id] = submitted.get(job_id, 0) + 1
        if rec.type == "JobPlaced":
            placed_at.append(rec.recorded_at)
        last[job_id] = rec.type
    return {"submitted": submitted, "last": last, "placed_at": placed_at}


def fates(accepted: list[str], found: dict[str, Any]) -> dict[str, int]:
    last: dict[str, str] = found["last"]
    ended = [j for j in accepted if last.get(j) in ENDED]
    running = [j for j in accepted if last.get(j) in ON_A_NODE]
    return {"ended": len(ended), "still_running": len(running),
            "stranded": len(accepted) - len(ended) - len(running),
            "doubled": sum(1 for n in found["submitted"].values() if n > 1)}


# -- the run -----------------------------------------------------------------------------------------


def require_supervisor(paths: Paths) -> None:
    if read_pid(paths, SUPERVISOR) is None:
        raise ChaosError("no supervisor runs in this stack: start it with `steward up` (supervised, the default); "
                         "without one a killed process stays dead and the benchmark measures nothing")


async def _chaos(settings: Any, tokens: list[str], seconds: float, args: dict[str, Any], run: str,
                 faults: Faults, gaps: Gaps, accepted_at: list[float]) -> soak.Load:
    paths = Paths(settings.run_dir)
    rng = random.Random(args["seed"] if args["seed"] is not None else run)
    t0 = time.monotonic()
    until = t0 + seconds
    phase = soak._phase(settings, settings.resolved_api_url, tokens, seconds, args["think_s"], args["rate"], run,
                        None, 0.0, 0.0, 5.0, None, [])
    faulting: list[Any] = [killer(paths, until, args["kill_every_s"], t0, rng, faults)]
    if args["services"]:
        faulting.append(restarter(settings, seconds, t0, faults))
    stop = asyncio.Event()
    probing = asyncio.ensure_future(prober(probe_urls(settings), stop, args["probe_s"], t0, gaps))
    loading = asyncio.ensure_future(phase)
    await asyncio.gather(loading, *faulting)
    stop.set()
    await probing
    load = await loading
    # the load's start and end bound the gaps: an outage that lasts to the end of the load counts too
    accepted_at.extend([t0, *load.accepted_at, until])
    return load


def run(minutes: float = 10.0, clients: int = 200, rate: float = 2.0, think_s: float = 1.0, agents: int = 2,
        nodes: int = 8, kill_every_s: float = 20.0, probe_s: float = 0.5, services: bool = True,
        drain_s: float = 300.0, seed: int | None = None) -> dict[str, Any]:
    settings = Settings()
    paths = Paths(settings.run_dir)
    require_supervisor(paths)
    run_id = uuid.uuid4().hex[:6]
    names = soak.setup(settings, agents, nodes)
    issued = soak.make_tokens(settings, clients + 1)
    log_dir = settings.run_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    node_agents = soak.Agents(settings, agents, log_dir)
    node_agents.start_all()
    faults, gaps, accepted_at = Faults(), Gaps(), list[float]()
    args = {"think_s": think_s, "rate": rate, "kill_every_s": kill_every_s, "probe_s": probe_s,
            "services": services, "seed": seed}
    try:
        time.sleep(3.0)  # the agents' workers poll before the first placement
        head_before = EventStore.from_url(settings.resolved_store_url).head()
        since = time.time() - 1.0
        load = asyncio.run(_chaos(settings, [t for t, _ in issued], minutes * 60, args, run_id, faults, gaps,
                                  accepted_at))
        drained_s = soak.drain(settings, load.accepted, run_id, head_before, drain_s)
        store = soak.check_store(settings, run_id, load.accepted, head_before)
        kafka = soak.check_kafka(settings, since, run_id, store["outcomes"], head_before, store["head_after"])
        found = job_fates(settings, run_id, head_before)
        found["placed_at"] += [since + 1.0, since + 1.0 + minutes * 60]
    finally:
        soak.teardown(settings, names)
        node_agents.stop_all()
        soak.revoke_tokens(settings, [i for _, i in issued])
    fate = fates(load.accepted, found)
    lost = len(store["missing"]) + kafka["commands_without_outcome"] + kafka["positions_not_relayed"]
    longest = dict(sorted(gaps.longest.items()))
    longest["submit_to_record"] = longest_between(accepted_at)
    longest["placements"] = longest_between(found["placed_at"])
    return {
        "minutes": minutes, "clients": clients, "submit_rate_per_s": rate, "kill_every_s": kill_every_s,
        "requests": load.requests, "errors": sum(load.errors.values()), "errors_by_kind": load.errors,
        "submitted": len(load.submitted), "accepted": len(load.accepted), "recorded": len(store["submitted"]),
        "commands_without_outcome": kafka["commands_without_outcome"],
        "positions_not_relayed": kafka["positions_not_relayed"],
        "lost": lost, "doubled": fate["doubled"], "relayed_twice": kafka["events_duplicated"],
        "ended": fate["ended"], "still_running": fate["still_running"], "stranded": fate["stranded"],
        "drain_s": drained_s,
        "longest_gap_s": {k: round(v, 1) for k, v in longest.items()},
        "probe_failures": gaps.failures,
        "api_latency_ms_p50": soak.percentile(load.latencies + load.submit_latencies, 0.5),
        "api_latency_ms_p99": soak.percentile(load.latencies + load.submit_latencies, 0.99),
        "api_submit_latency_ms_p99": soak.percentile(load.submit_latencies, 0.99),
        "kills": len(faults.kills), "killed": faults.kills, "service_restarts": faults.restarts,
        "rejections_by_command": store["rejections"],
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str]) -> int:
    ap = soak.load_options("steward bench chaos", 10.0, "simulated node agents (the soak's)")
    ap.description = __doc__.splitlines()[0]
    ap.add_argument("--kill-every-s", type=float, default=20.0, help="SIGKILL a random Steward process this often")
    ap.add_argument("--probe-s", type=float, default=0.5, help="probe each process this often")
    ap.add_argument("--no-services", dest="services", action="store_false",
                    help="leave PostgreSQL, Kafka and Temporal alone")
    ap.add_argument("--drain-s", type=float, default=300.0,
                    help="after the load, wait at most this long for the lag to clear and the jobs to end")
    ap.add_argument("--seed", type=int, default=None, help="the victims' random seed (default: the run's id)")
    ap.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    args = ap.parse_args(argv)
    problems = soak.option_problems(args, ("minutes", "clients", "think_s", "agents", "nodes", "kill_every_s",
                                           "probe_s"), ("rate", "drain_s"))
    if problems:
        sys.stderr.write("steward bench chaos: " + "; ".join(problems) + "\n")
        return 2
    try:
        result = run(args.minutes, args.clients, args.rate, args.think_s, args.agents, args.nodes,
                     args.kill_every_s, args.probe_s, args.services, args.drain_s, args.seed)
    except ChaosError as err:
        sys.stderr.write(f"steward bench chaos: {err}\n")
        return 2
    sys.stdout.write(json.dumps(result) + "\n")
    return 0 if result["lost"] == 0 and result["doubled"] == 0 and result["stranded"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
