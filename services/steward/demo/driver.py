"""The replay driver: a background process of the stack (`demo-driver`, stopped by `steward down`) that
submits the plan's trace jobs through the API at their compressed times, opens the demo's interactive
sessions, and restores each one after it stops at its cap.

Everything goes through the GraphQL API with the admin token, as a client would. Its progress is written
to `<run>/demo/status.json` (read by the summary); a restart continues the same run (same epoch and job
ids: jobs the ledger already has are refused as duplicates and counted as submitted).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from steward.cli.client import default_token
from steward.config import Settings
from steward.demo.plan import DemoOptions, SessionPlan, Submission, plan_sessions, plan_slice, slice_figures
from steward.infra.processes import pid_alive
from steward.sim.scenario import load_scenario

log = logging.getLogger("steward.demo.driver")

PAYLOAD = """__typename ... on Rejected { code reason } ... on InvalidInput { field message }
  ... on NotAuthorised { message }"""
SUBMIT = f"""mutation($input: SubmitJobInput!) {{ submitJob(input: $input) {{ {PAYLOAD}
  ... on JobAccepted {{ job {{ id state }} }} }} }}"""
OPEN_SESSION = f"""mutation($input: OpenSessionInput!) {{ openSession(input: $input) {{ {PAYLOAD}
  ... on SessionOpened {{ job {{ id state }} }} }} }}"""
RESTORE_SESSION = f"""mutation($id: ID!) {{ restoreSession(id: $id) {{ {PAYLOAD}
  ... on SessionRestored {{ job {{ id state }} }} }} }}"""
JOB_STATE = "query($id: ID!) { job(id: $id) { id state } }"
NODES = "{ nodes { id executor usedGpus jobs } }"
DRAIN = f"""mutation($id: String!, $reason: String!) {{ drainNode(id: $id, reason: $reason) {{ {PAYLOAD}
  ... on NodeDraining {{ id }} }} }}"""
LEFTOVERS = """query($after: String, $before: Float!) { jobs(first: 500, after: $after, filter: {
  states: ["QUEUED", "PLACED", "RUNNING", "SUSPENDED", "PREEMPTED", "LOST"], submittedBefore: $before}) {
  edges { node { id } } pageInfo { hasNextPage endCursor } } }"""
# the ids of an earlier demo run's trace jobs and sessions: d<6 hex>-...
DEMO_ID = re.compile(r"^d[0-9a-f]{6}-")
CANCEL = f"""mutation($id: ID!, $reason: String!) {{ cancelJob(id: $id, reason: $reason) {{ {PAYLOAD}
  ... on JobCancelled {{ job {{ id state }} }} }} }}"""
# How long a stop waits for the local node's cancelled jobs to end (steward down allows the driver 60 s).
RELEASE_TIMEOUT_S = 50.0
# Submissions in flight at once (the API waits for each one's recorded outcome).
CONCURRENCY = 4


@dataclass
class Chain:
    """One demo session across its restores: the id it runs under now."""

    session_id: str
    current: str = ""
    restores: int = 0
    caps: int = 0
    suspended_at: float | None = None
    ended: str = ""


@dataclass
class Progress:
    epoch: float
    submitted: int = 0
    refused: int = 0
    duplicates: int = 0
    max_lag_s: float = 0.0
    lag_s: float = 0.0
    planned: int = 0
    chains: dict[str, Chain] = field(default_factory=dict)
    refusals: list[str] = field(default_factory=list)
    slice_done: bool = False


def demo_dir(settings: Settings) -> Path:
    return settings.run_dir / "demo"


def read_config(settings: Settings) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((demo_dir(settings) / "config.json").read_text())
    return data


def read_status(settings: Settings) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((demo_dir(settings) / "status.json").read_text())
    except (OSError, ValueError):
        return None
    return data


class Api:
    """The few GraphQL calls the driver makes, retried while the API is busy or restarting."""

    def __init__(self, settings: Settings, token: str) -> None:
        self.url = settings.resolved_api_url
        self.client = httpx.AsyncClient(timeout=60.0, headers={"Authorization": f"Bearer {token}"})

    async def call(self, query: str, variables: dict[str, Any], attempts: int = 8) -> dict[str, Any]:
        delay = 0.5
        for i in range(attempts):
            try:
                resp = await self.client.post(self.url, json={"query": query, "variables": variables})
                if resp.status_code != 200:
                    raise httpx.HTTPStatusError(f"HTTP {resp.status_code} from {self.url}", request=resp.request,
                                                response=resp)
                body = resp.json()
                if body.get("errors"):
                    raise RuntimeError("; ".join(e.get("message", "?") for e in body["errors"]))
                data: dict[str, Any] = body["data"]
                return data
            except (httpx.HTTPError, RuntimeError, ValueError) as err:
                if i == attempts - 1:
                    raise
                log.warning("API call failed (%s); retrying in %.1f s", err, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self.client.aclose()


class Driver:
    def __init__(self, settings: Settings, options: DemoOptions, tag: str, scenario_path: Path, epoch: float,
                 token: str) -> None:
        self.settings = settings
        self.options = options
        self.tag = tag
        scenario = load_scenario(scenario_path)
        self.submissions, skipped = plan_slice(scenario, options, tag)
        self.sessions = plan_sessions(scenario, options, tag)
        self.figures = slice_figures(self.submissions, skipped)
        self.api = Api(settings, token)
        self.progress = Progress(epoch=epoch, planned=len(self.submissions))
        old = read_status(settings)
        if old and old.get("tag") == tag:  # a restart: keep the sessions' chains
            for sid, c in (old.get("chains") or {}).items():
                self.progress.chains[sid] = Chain(**c)

    def due(self, at_s: float) -> float:
        return self.progress.epoch + at_s

    async def run(self, stop: asyncio.Event) -> None:
        queue: asyncio.Queue[Submission | None] = asyncio.Queue(maxsize=CONCURRENCY * 4)
        workers = [asyncio.create_task(self._submitter(queue)) for _ in range(CONCURRENCY)]
        tasks = [asyncio.create_task(self._cancel_leftovers()),
                 asyncio.create_task(self._feed(queue, stop)),
                 asyncio.create_task(self._sessions(stop)),
                 asyncio.create_task(self._report(stop))]
        await stop.wait()
        for t in (*tasks, *workers):
            t.cancel()
        await asyncio.gather(*tasks, *workers, return_exceptions=True)
        self._write_status()
        try:
            await asyncio.wait_for(self.release_local_nodes(), timeout=RELEASE_TIMEOUT_S)
        except Exception:
            log.exception("the local node's jobs were not all cancelled")
        await self.api.close()

    async def release_local_nodes(self) -> None:
        """On stop (`make down`): cancel the jobs on the local executor's nodes, whose real processes would
        otherwise outlive the stack (the local executor leaves its jobs running across its own restarts),
        and wait until the executor has stopped them."""
        local = self.settings.executor_id
        nodes = [n for n in (await self.api.call(NODES, {}, attempts=2))["nodes"] if n["executor"] == local]
        for n in nodes:  # no new work there while its jobs are cancelled (the next `make demo` resumes it)
            await self.api.call(DRAIN, {"id": n["id"], "reason": "demo stopped"}, attempts=2)
        cancelled: set[str] = set()
        while True:
            jobs = {j for n in nodes for j in n["jobs"]} - cancelled
            for job in sorted(jobs):
                await self.api.call(CANCEL, {"id": job, "reason": "demo stopped"}, attempts=2)
                log.info("cancelled %s on the local executor", job)
            cancelled |= jobs
            if not jobs and not any(_alive(self.settings.run_dir / "executor" / local / "jobs" / j) for j in cancelled):
                return
            await asyncio.sleep(0.5)
            nodes = [n for n in (await self.api.call(NODES, {}, attempts=2))["nodes"] if n["executor"] == local]

    async def _cancel_leftovers(self) -> None:
        """Jobs of an earlier demo run on the same store (`make down` then `make demo` again) would compete
        with this run's: cancel them (only ids of the demo's own pattern, submitted before this run)."""
        ids: list[str] = []
        after = None
        while True:
            page = (await self.api.call(LEFTOVERS, {"after": after, "before": self.progress.epoch}))["jobs"]
            ids += [e["node"]["id"] for e in page["edges"]
                    if DEMO_ID.match(e["node"]["id"]) and not e["node"]["id"].startswith(f"{self.tag}-")]
            if not page["pageInfo"]["hasNextPage"] or not page["edges"]:
                break
            after = page["pageInfo"]["endCursor"]
        if not ids:
            return
        log.info("cancelling %d jobs of earlier demo runs", len(ids))
        gate = asyncio.Semaphore(CONCURRENCY)

        async def cancel(job_id: str) -> None:
            async with gate:
                await self.api.call(CANCEL, {"id": job_id, "reason": "superseded by a new demo run"})

        await asyncio.gather(*(cancel(i) for i in ids), return_exceptions=True)
        log.info("cancelled the jobs of earlier demo runs")

    async def _feed(self, queue: asyncio.Queue[Submission | None], stop: asyncio.Event) -> None:
        for sub in self.submissions:
            wait = self.due(sub.at_s) - time.time()
            if wait > 0:
                try:
                    await asyncio.wait_for(stop.wait(), timeout=wait)
                    return
                except TimeoutError:
                    pass
            await queue.put(sub)
        await queue.join()
        self.progress.slice_done = True
        log.info("slice replayed: %d submitted, %d refused", self.progress.submitted, self.progress.refused)

    async def _submitter(self, queue: asyncio.Queue[Submission | None]) -> None:
        while True:
            sub = await queue.get()
            try:
                if sub is not None:
                    await self._submit(sub)
            except Exception:
                log.exception("submitting %s failed", sub.job_id if sub else "?")
                self.progress.refused += 1
            finally:
                queue.task_done()

    async def _submit(self, sub: Submission) -> None:
        lag = max(0.0, time.time() - self.due(sub.at_s))
        self.progress.lag_s = lag
        self.progress.max_lag_s = max(self.progress.max_lag_s, lag)
        res = (await self.api.call(SUBMIT, {"input": sub.input()}))["submitJob"]
        kind = res["__typename"]
        if kind == "JobAccepted":
            self.progress.submitted += 1
        elif kind == "Rejected" and "exist" in str(res.get("reason", "")).lower():
            self.progress.submitted += 1
            self.progress.duplicates += 1
        else:
            self.progress.refused += 1
            why = res.get("reason") or res.get("message") or kind
            if len(self.progress.refusals) < 20:
                self.progress.refusals.append(f"{sub.job_id}: {why}")
            log.warning("%s refused: %s", sub.job_id, why)

    async def _sessions(self, stop: asyncio.Event) -> None:
        pending = [s for s in self.sessions if s.session_id not in self.progress.chains]
        while not stop.is_set():
            now = time.time()
            for plan in list(pending):
                if now >= self.due(plan.at_s):
                    pending.remove(plan)
                    await self._open(plan)
            for plan in self.sessions:
                chain = self.progress.chains.get(plan.session_id)
                if chain is not None and chain.current and not chain.ended:
                    await self._follow(plan, chain)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)

    async def _open(self, plan: SessionPlan) -> None:
        res = (await self.api.call(OPEN_SESSION, {"input": plan.input()}))["openSession"]
        chain = Chain(plan.session_id, current=plan.session_id)
        if res["__typename"] != "SessionOpened" and "exist" not in str(res.get("reason", "")).lower():
            chain.ended = f"refused: {res.get('reason') or res.get('message') or res['__typename']}"
            log.warning("session %s %s", plan.session_id, chain.ended)
        else:
            log.info("opened session %s for %s (cap %.1f s)", plan.session_id, plan.project, plan.cap_s)
        self.progress.chains[plan.session_id] = chain

    async def _follow(self, plan: SessionPlan, chain: Chain) -> None:
        """A session stopped at its cap (SUSPENDED) is restored `restore_after_s` later, as a researcher
        coming back to it would."""
        job = (await self.api.call(JOB_STATE, {"id": chain.current}))["job"]
        state = job["state"] if job else "UNKNOWN"
        if state in ("COMPLETED", "FAILED", "CANCELLED"):
            chain.ended = state
            return
        if state != "SUSPENDED":
            chain.suspended_at = None
            return
        now = time.time()
        if chain.suspended_at is None:
            chain.suspended_at = now
            chain.caps += 1
        if now - chain.suspended_at < plan.restore_after_s or chain.restores >= plan.max_restores:
            return
        res = (await self.api.call(RESTORE_SESSION, {"id": chain.current}))["restoreSession"]
        if res["__typename"] == "SessionRestored":
            log.info("restored %s as %s", chain.current, res["job"]["id"])
            chain.current, chain.restores, chain.suspended_at = res["job"]["id"], chain.restores + 1, None
        else:
            log.warning("restore of %s refused: %s", chain.current, res.get("reason") or res.get("message"))

    async def _report(self, stop: asyncio.Event) -> None:
        last_log = 0.0
        while not stop.is_set():
            self._write_status()
            if time.monotonic() - last_log >= 30:
                p = self.progress
                log.info("submitted %d/%d (refused %d), lag %.1f s (max %.1f), sessions restored %d",
                         p.submitted, p.planned, p.refused, p.lag_s, p.max_lag_s,
                         sum(c.restores for c in p.chains.values()))
                last_log = time.monotonic()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=2.0)

    def _write_status(self) -> None:
        p = self.progress
        data = {"tag": self.tag, "epoch": p.epoch, "written_at": time.time(), "speed": self.options.speed,
                "plan": self.figures, "planned": p.planned, "submitted": p.submitted, "refused": p.refused,
                "duplicates": p.duplicates, "lag_s": round(p.lag_s, 2), "max_lag_s": round(p.max_lag_s, 2),
                "slice_done": p.slice_done, "refusals": p.refusals,
                "chains": {k: asdict(c) for k, c in p.chains.items()}}
        path = demo_dir(self.settings) / "status.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)


def _alive(folder: Path) -> bool:
    """Whether a process of the job whose executor folder this is still runs (its attempt-N.pid files)."""
    for path in folder.glob("attempt-*.pid"):
        try:
            pid = int(json.loads(path.read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if pid_alive(pid):
            return True
    return False


async def run_driver(settings: Settings, stop: asyncio.Event) -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)
    config = read_config(settings)
    token = default_token()
    if not token:
        raise SystemExit(f"demo driver: no API token (STEWARD_TOKEN or {settings.run_dir / 'token'})")
    driver = Driver(settings, DemoOptions(**config["options"]), config["tag"], Path(config["scenario"]),
                    float(config["epoch"]), token)
    log.info("replaying %s: %s", config["scenario"], driver.figures)
    await driver.run(stop)
