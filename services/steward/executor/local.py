"""The local executor (node agent): runs each job attempt as a real subprocess, for the JobRun workflow.

It serves the Temporal task queue `executor-<id>` with four activities:

- `start_job`: start the attempt under the shim (`steward.executor.shim`, its own process group) as the
  project's OS user, in a working folder only that user can read, with an environment built from scratch
  (`steward.executor.isolation`): the job's own variables, `CUDA_VISIBLE_DEVICES` (its GPU indices;
  emulated slots without GPUs) and `STEWARD_CHECKPOINT_DIR` (one folder per job when resumable, so the
  next attempt resumes; restored sessions get the old session's checkpoint copied in, from under the
  checkpoint root only, symlinks as links), report `ReportJobStarted` through Kafka. Every path built
  from an id goes through `steward.paths.under`; an id that is no path is refused (`NotIsolated`).
  Idempotent: an attempt with a record is never started again, so a retried or re-delivered start does
  not run a job twice.
- `watch_job`: a long poll — answers at the attempt's exit (its code comes from the shim's exit file, so
  this works after an executor restart too) or after the poll's window ("running"), heartbeating
  meanwhile; reports `ReportCheckpointSaved` when its checkpoint folder changes and, for sessions,
  `ReportUtilisation` when it turns idle or busy, and `ReportSessionAddress` when the session publishes how to
  reach it (`steward.executor.session_address`). Cancelling it never stops the job.
- `signal_job`: the checkpoint request (SIGTERM, or STEWARD_EXECUTOR_CHECKPOINT_SIGNAL) or SIGKILL.
- `drain_node`: remember a node as draining (reported in heartbeats; starts there are logged).

One attempt per GPU (`steward.executor.fencing`, ADR 0058): it starts only placements made for it on nodes
it serves (STEWARD_EXECUTOR_NODES), refusing any other with the reason (`NotMyNode`); before an attempt
starts, it stops what still runs on that attempt's GPUs and any older attempt of the same job (their claim
ended when the ledger placed the new one), and it refuses an attempt older than one of the same job that
runs here (`Superseded`).

On start, before it serves anything, it re-attaches to its records and stops orphans (attempts whose JobRun
ended while it was down: lost, cancelled, preempted) and attempts that a newer one of the same job
supersedes, and it sends `ReportHeartbeat` through Kafka when what it runs changes, and at a low rate otherwise. It
keeps the attempts still running in memory (read from its records once, at start), so a heartbeat costs
the same after a thousand finished jobs as after one.

GPUs: where `nvidia-smi -L` lists GPUs, those are the slots it serves, and a placement naming a GPU index
it does not have is refused with an error naming both (the node was registered with more GPUs than the
machine has); without `nvidia-smi` the indices are emulated slots (STEWARD_EXECUTOR_GPUS per node).
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker

from steward.bus.envelope import command_envelope
from steward.bus.kafka import CommandPublisher
from steward.config import Settings
from steward.domain.commands import (
    Command,
    ReportHeartbeat,
    ReportJobStarted,
    ReportUtilisation,
)
from steward.domain.ids import shown
from steward.executor.attempts import (
    AttemptRecord,
    AttemptStore,
    alive,
    newest_mtime,
    process_start_time,
)
from steward.executor.checkpoints import checkpoint_folder, new_checkpoint, prepare_checkpoint
from steward.executor.fencing import fence, refusal, served_nodes, superseded
from steward.executor.isolation import (
    IsolationError,
    check_mode,
    ensure_user,
    job_environment,
    prepare_executor_folders,
    private_folder,
)
from steward.executor.monitor import IdleTracker, Sample, TreeCpu, discover_gpus, gpu_utilisation
from steward.executor.session_address import prepare as prepare_address
from steward.executor.session_address import report_new_address
from steward.executor.settings import ExecutorSettings
from steward.logs_temporal import CorrelationInterceptor
from steward.metrics import executor_jobs
from steward.metrics import serve as serve_metrics
from steward.paths import UnsafePath, under
from steward_workflows.payloads import (
    JobRunInput,
    NodeRef,
    ProcessOutcome,
    ProcessStarted,
    SignalJob,
    SignalResult,
    WatchJob,
    executor_task_queue,
    job_run_workflow_id,
)

# enough pollers to cover every partition of the task queue at once (a burst of starts otherwise waits
# for the server to forward tasks between partitions; docs/benchmarks.md "Lease")
ACTIVITY_POLLERS = 16

log = logging.getLogger("steward.executor")

HEARTBEAT_EVERY_S = 5.0
IO_THREADS = 32
KILLED_EXIT_CODE = -9
NO_SUCH_GPU = "NoSuchGpu"
NOT_ISOLATED = "NotIsolated"
NOT_MY_NODE = "NotMyNode"
SUPERSEDED = "Superseded"
T = TypeVar("T")


async def _heartbeating(work: Awaitable[T]) -> T:
    """Await `work`, heartbeating meanwhile, three times per heartbeat timeout (the JobRun gives `start_job`
    a short one)."""
    timeout = activity.info().heartbeat_timeout
    every_s = min(2.0, timeout.total_seconds() / 3) if timeout else 2.0
    task = asyncio.ensure_future(work)
    activity.heartbeat("starting")
    while True:
        done, _ = await asyncio.wait({task}, timeout=max(every_s, 0.1))
        if done:
            return task.result()
        activity.heartbeat("starting")


def gpu_slots(configured: int) -> tuple[int, str]:
    """The GPUs of this machine: those `nvidia-smi -L` lists where GPUs exist, else `configured` emulated
    slots (issue 6 "Local executor": real `nvidia-smi` discovery where GPUs exist)."""
    found = discover_gpus()
    if found:
        return found, "nvidia-smi"
    return configured, "emulated"


def write_private(path: Path, data: dict[str, Any]) -> None:
    """`data` as JSON at `path`, readable by the executor only (it holds the job's environment)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(data, out, sort_keys=True)
    os.replace(tmp, path)


def missing_gpus(assignments: dict[str, list[int]], gpus: int) -> list[int]:
    """GPU indices of a placement that a machine with `gpus` GPUs does not have."""
    return sorted({g for indices in assignments.values() for g in indices if g < 0 or g >= gpus})


class LocalExecutor:
    def __init__(self, settings: Settings, publisher: CommandPublisher, grace_s: float = 120.0,
                 options: ExecutorSettings | None = None) -> None:
        self.settings = settings
        self.publisher = publisher
        self.grace_s = grace_s
        self.options = options or ExecutorSettings()
        check_mode(self.options.isolation)
        self.isolating = self.options.isolation == "user"
        self.root = under(settings.run_dir / "executor", settings.executor_id)
        self.attempts = AttemptStore(self.root)
        root = self.options.checkpoint_root
        self.checkpoint_root = Path(root) if root else settings.run_dir / "checkpoints"
        work = self.options.work_root
        self.work_root = Path(work) if work else self.root / "work"
        self._prepare_folders()
        self._children: dict[tuple[str, int], subprocess.Popen[bytes]] = {}
        self._changed = asyncio.Event()
        self.gpus, self.gpu_source = gpu_slots(settings.executor_gpus)
        self.served = served_nodes(self.options.nodes)
        self._live: dict[tuple[str, int], AttemptRecord] | None = None  # None: not read from disk yet
        self._live_lock = threading.Lock()
        self._starting: dict[tuple[str, int], asyncio.Lock] = {}

    # -- paths ------------------------------------------------------------------------------------

    def _prepare_folders(self) -> None:
        prepare_executor_folders(self.root, self.work_root, self.checkpoint_root, self.isolating)

    def job_dir(self, job_id: str) -> Path:
        return self.attempts.job_dir(job_id)

    def work_dir(self, job_id: str) -> Path:
        """The job's working folder (its HOME): `<work root>/<job>`, its user's alone."""
        return under(self.work_root, job_id)

    def checkpoint_dir(self, run: JobRunInput) -> Path:
        return checkpoint_folder(self.checkpoint_root, run)

    # -- reporting --------------------------------------------------------------------------------

    async def _report(self, command: Command, mid: str, correlation_id: str = "") -> None:
        env = command_envelope(command, actor=f"executor:{self.settings.executor_id}", role="system",
                               correlation_id=correlation_id or None, message_id=mid)
        await asyncio.to_thread(self.publisher.publish, env)

    # -- activities -------------------------------------------------------------------------------

    @activity.defn(name="start_job")
    async def start_job(self, run: JobRunInput) -> ProcessStarted:
        try:
            self.job_dir(run.job_id)
        except UnsafePath as err:  # recorded before the id rule, or forged: never a path outside our folders
            raise ApplicationError(f"job {shown(run.job_id)} attempt {run.attempt} not started: {err}",
                                   type=NOT_ISOLATED, non_retryable=True) from None
        # a retry of a start still running here (its heartbeat came late) waits for it, then finds its record
        async with self._starting.setdefault((run.job_id, run.attempt), asyncio.Lock()):
            rec = self.attempts.load(run.job_id, run.attempt)
            if rec is None or rec.pid <= 0:
                rec = await _heartbeating(asyncio.to_thread(self._start, run, rec))
        self._starting.pop((run.job_id, run.attempt), None)
        await self._report(ReportJobStarted(run.job_id, run.attempt, rec.pid, rec.started_at),
                           f"started-{run.job_id}-{run.attempt}", run.correlation_id)
        self._changed.set()
        return ProcessStarted(run.job_id, run.attempt, rec.pid, rec.started_at, rec.checkpoint_dir, rec.resumed_from)

    def _start(self, run: JobRunInput, previous: AttemptRecord | None) -> AttemptRecord:
        try:
            return self._start_isolated(run, previous)
        except (UnsafePath, IsolationError) as err:
            raise ApplicationError(f"job {shown(run.job_id)} attempt {run.attempt} not started: {err}",
                                   type=NOT_ISOLATED, non_retryable=True) from None

    def _start_isolated(self, run: JobRunInput, previous: AttemptRecord | None) -> AttemptRecord:
        refused = refusal(self.settings.executor_id, run.job_id, run.attempt, run.executor, run.assignments,
                          self.served)
        if refused is not None:
            log.warning("%s", refused)
            raise ApplicationError(refused, type=NOT_MY_NODE, non_retryable=True)
        if previous is None and self.gpu_source == "nvidia-smi":
            missing = missing_gpus(run.assignments, self.gpus)
            if missing:
                raise ApplicationError(
                    f"job {run.job_id} attempt {run.attempt} is placed on GPU(s) {missing} of "
                    f"{', '.join(sorted(run.assignments))}, but executor '{self.settings.executor_id}' has "
                    f"{self.gpus} GPU(s) (nvidia-smi: indices 0-{self.gpus - 1}); register the node with its "
                    "real GPU count", type=NO_SUCH_GPU, non_retryable=True)
        drained = self.attempts.drained() & set(run.assignments)
        if drained:
            log.warning("job %s attempt %s starts on draining node(s) %s (placed before the drain)",
                        run.job_id, run.attempt, ", ".join(sorted(drained)))
        job_dir = self.job_dir(run.job_id)
        job_dir.mkdir(parents=True, exist_ok=True)
        user = ensure_user(run.project) if self.isolating else None
        workdir = private_folder(self.work_dir(run.job_id), user)
        checkpoint, resumed_from = prepare_checkpoint(self.checkpoint_root, run, user)
        # a start that crashed between launching the shim and writing its record: adopt that shim
        pid = self.attempts.shim_pid(run.job_id, run.attempt) if previous is not None else None
        if pid is None:
            self._make_room(run)
        gpus = sorted(g for indices in run.assignments.values() for g in indices)
        rec = previous or AttemptRecord(run.job_id, run.attempt, list(run.command), dict(run.assignments),
                                        str(checkpoint), run.job_class)
        rec = self.attempts.update(rec, checkpoint_seen=newest_mtime(checkpoint), resumed_from=resumed_from)
        session, extra = prepare_address(rec, workdir)  # where a session says how to reach it (ADR 0055)
        rec = self.attempts.update(rec, extra=extra)
        if pid is None:
            env = job_environment(run.env, {
                "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus),
                "STEWARD_CHECKPOINT_DIR": str(checkpoint),
                "STEWARD_JOB_ID": run.job_id,
                "STEWARD_ATTEMPT": str(run.attempt),
                "STEWARD_RESUMED": "1" if resumed_from else "0",
                "STEWARD_RESUME_FROM": resumed_from,
                **session,
            }, workdir, user.name if user is not None else getpass.getuser())
            spec: dict[str, Any] = {"env": env, "cwd": str(workdir)}
            if user is not None:
                spec |= {"uid": user.uid, "gid": user.gid, "user": user.name}
            spec_file = self.attempts.path(run.job_id, run.attempt, ".spec")
            write_private(spec_file, spec)
            # the shim is the executor's (its environment, its files); only the job is the project user's
            with self.attempts.path(run.job_id, run.attempt, ".log").open("ab") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "steward.executor.shim",
                     "--exit-file", str(self.attempts.path(run.job_id, run.attempt, ".exit")),
                     "--pid-file", str(self.attempts.path(run.job_id, run.attempt, ".pid")),
                     "--spec", str(spec_file), "--", *run.command],
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=job_dir,
                    start_new_session=True,
                )
            self._children[(run.job_id, run.attempt)] = proc
            pid = proc.pid
        rec = self.attempts.update(rec, pid=pid, create_time=process_start_time(pid), started_at=time.time())
        with self._live_lock:
            if self._live is not None:
                self._live[(rec.job_id, rec.attempt)] = rec
        return rec

    def _make_room(self, run: JobRunInput) -> None:
        """Stop what must not run beside this attempt (`fencing.fence`), or refuse it when a newer attempt of
        its job runs here."""
        rule = fence(run.job_id, run.attempt, run.assignments, self.running())
        if rule.newer is not None:
            msg = (f"job {run.job_id} attempt {run.attempt} not started: attempt {rule.newer.attempt} of the job "
                   f"already runs on executor '{self.settings.executor_id}'")
            log.warning("%s", msg)
            raise ApplicationError(msg, type=SUPERSEDED, non_retryable=True)
        for rec in rule.stop:
            assert isinstance(rec, AttemptRecord)
            self._fence(rec, f"job {run.job_id} attempt {run.attempt} starts" +
                        (" (a newer attempt of the same job)" if rec.job_id == run.job_id else " on its GPUs"))

    def _fence(self, rec: AttemptRecord, why: str) -> None:
        """Stop a live attempt that lost its claim: the checkpoint signal, `orphan_grace_s`, then SIGKILL;
        from then on it holds no GPU here (only live processes do)."""
        log.warning("fencing job %s attempt %s (pid %s, GPUs %s): %s", rec.job_id, rec.attempt, rec.pid,
                    rec.assignments, why)
        rec = self.attempts.update(rec, extra=rec.extra | {"fenced": why})
        self._stop_process(rec)
        with self._live_lock:
            if self._live is not None:
                self._live.pop((rec.job_id, rec.attempt), None)

    @activity.defn(name="watch_job")
    async def watch_job(self, watch: WatchJob) -> ProcessOutcome:
        rec = self.attempts.load(watch.job_id, watch.attempt)
        if rec is None:
            raise ApplicationError(f"no attempt {watch.attempt} of {watch.job_id} here", type="UnknownAttempt",
                                   non_retryable=True)
        info = activity.info()
        tick = self.options.tick_s
        if info.heartbeat_timeout:
            tick = min(tick, max(info.heartbeat_timeout.total_seconds() / 3, 0.1))
        tracker = None
        cpu = TreeCpu(rec.pid)
        if rec.job_class == "interactive":
            tracker = IdleTracker(self.options.idle_cpu_percent, self.options.idle_gpu_percent,
                                  self.options.idle_min_s, rec.idle_since)
        deadline = time.monotonic() + max(watch.window_s, 0.0)
        while True:
            child = self._children.get((rec.job_id, rec.attempt))
            if child is not None:
                child.poll()  # reap our own shim
            ended = self.attempts.exit_of(rec)
            if ended is not None or not alive(rec):
                rec = await self._check_checkpoint(rec)
                self._children.pop((rec.job_id, rec.attempt), None)
                self._changed.set()
                return self._outcome(rec, ended)
            rec = await self._check_checkpoint(rec)
            if tracker is not None:
                rec = await self._check_idle(rec, tracker, cpu)
                rec = await report_new_address(rec, self.attempts, self._report)
            if time.monotonic() >= deadline:
                return ProcessOutcome(rec.job_id, rec.attempt, 0, "running")
            activity.heartbeat(rec.pid)
            await asyncio.sleep(min(tick, max(deadline - time.monotonic(), 0.01)))

    def _outcome(self, rec: AttemptRecord, ended: dict[str, object] | None) -> ProcessOutcome:
        fresh = self.attempts.load(rec.job_id, rec.attempt) or rec
        at = fresh.checkpoint_seen or None
        path = fresh.checkpoint_dir if at else ""
        if ended is not None:
            code = ended.get("exit_code")
            ended_at = ended.get("ended_at")
            return ProcessOutcome(rec.job_id, rec.attempt, int(code) if isinstance(code, int) else -1, "exited",
                                  float(ended_at) if isinstance(ended_at, int | float) else time.time(),
                                  path, at, fresh.killed)
        if fresh.killed:  # SIGKILL took the shim with it
            return ProcessOutcome(rec.job_id, rec.attempt, KILLED_EXIT_CODE, "exited", time.time(), path, at, True)
        return ProcessOutcome(rec.job_id, rec.attempt, -1, "vanished", time.time(), path, at, False)

    async def _check_checkpoint(self, rec: AttemptRecord) -> AttemptRecord:
        """Report a checkpoint when the attempt's checkpoint folder changed since the last report."""
        report = await asyncio.to_thread(new_checkpoint, rec)
        if report is None:
            return rec
        await self._report(report, f"checkpoint-{rec.job_id}-{rec.attempt}-{int(report.saved_at * 1e6)}")
        return self.attempts.update(rec, checkpoint_seen=report.saved_at)

    async def _check_idle(self, rec: AttemptRecord, tracker: IdleTracker, cpu: TreeCpu) -> AttemptRecord:
        percent = await asyncio.to_thread(cpu.percent)
        if percent is None:
            return rec
        gpus = sorted(g for indices in rec.assignments.values() for g in indices)
        gpu = await asyncio.to_thread(gpu_utilisation, gpus)
        sample = Sample(time.time(), percent, gpu, "nvidia-smi" if gpu is not None else "cpu")
        change = tracker.observe(sample)
        if change is None:
            return rec
        idle, since = change
        await self._report(ReportUtilisation(rec.job_id, rec.attempt, idle, since, sample.gpu_util,
                                             sample.cpu_percent, sample.source),
                           f"util-{rec.job_id}-{rec.attempt}-{'idle' if idle else 'busy'}-{int(since * 1e6)}")
        return self.attempts.update(rec, idle_since=since if idle else None)

    @activity.defn(name="signal_job")
    async def signal_job(self, request: SignalJob) -> SignalResult:
        rec = self.attempts.load(request.job_id, request.attempt)
        if rec is None:
            raise ApplicationError(f"no attempt {request.attempt} of {request.job_id} here", type="UnknownAttempt",
                                   non_retryable=True)
        sig = signal.SIGKILL if request.kill else self.options.signal_number(request.signal)
        name = "SIGKILL" if request.kill else (request.signal or self.options.checkpoint_signal)
        if self.attempts.exit_of(rec) is not None or not alive(rec):
            return SignalResult(rec.job_id, rec.attempt, False, name)
        # record first: a kill that lands while we crash must still read as "killed" on re-attach
        self.attempts.update(rec, killed=rec.killed or request.kill, signalled_at=rec.signalled_at or time.time())
        try:
            os.killpg(rec.pid, sig)
        except ProcessLookupError:
            return SignalResult(rec.job_id, rec.attempt, False, name)
        log.info("%s sent to job %s attempt %s (pid %s)", name, rec.job_id, rec.attempt, rec.pid)
        return SignalResult(rec.job_id, rec.attempt, True, name)

    @activity.defn(name="drain_node")
    async def drain_node(self, node: NodeRef) -> None:
        self.attempts.set_drained(self.attempts.drained() | {node.node_id})
        self._changed.set()
        log.info("node %s draining", node.node_id)

    @activity.defn(name="resume_node")
    async def resume_node(self, node: NodeRef) -> None:
        """The node was resumed in Steward: it is no longer reported as held out of service."""
        self.attempts.set_drained(self.attempts.drained() - {node.node_id})
        self._changed.set()
        log.info("node %s resumed", node.node_id)

    # -- lifecycle --------------------------------------------------------------------------------

    def running(self) -> list[AttemptRecord]:
        """The attempts whose process still runs: all records are read once (after a restart, to re-attach),
        then only the live ones are checked again."""
        with self._live_lock:
            candidates = self._live.values() if self._live is not None else self.attempts.all()
            self._live = {(r.job_id, r.attempt): r for r in list(candidates)
                          if self.attempts.exit_of(r) is None and alive(r)}
            return list(self._live.values())

    async def reconcile(self, client: Client) -> list[str]:
        """Stop attempts whose JobRun is over (they were lost, cancelled or preempted while this executor was
        down), then those a newer attempt of the same job supersedes; before anything else is served."""
        stopped = []
        for rec in self.running():
            wid = job_run_workflow_id(rec.job_id, rec.attempt)
            try:
                desc = await client.get_workflow_handle(wid).describe()
                over = desc.status != WorkflowExecutionStatus.RUNNING
            except RPCError:
                over = True
            if over:
                await asyncio.to_thread(self._stop_orphan, rec)
                stopped.append(wid)
        for old in superseded(self.running()):
            assert isinstance(old, AttemptRecord)
            await asyncio.to_thread(self._fence, old, "a newer attempt of the same job runs here")
            stopped.append(job_run_workflow_id(old.job_id, old.attempt))
        return stopped

    def _stop_orphan(self, rec: AttemptRecord) -> None:
        log.warning("stopping orphan attempt %s of job %s (its run is over)", rec.attempt, rec.job_id)
        self._stop_process(rec)

    def _stop_process(self, rec: AttemptRecord) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(rec.pid, self.options.signal_number())
        deadline = time.monotonic() + self.options.orphan_grace_s
        while time.monotonic() < deadline and alive(rec):
            time.sleep(0.1)
        if alive(rec):
            self.attempts.update(rec, killed=True)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(rec.pid, signal.SIGKILL)
            deadline = time.monotonic() + 5.0  # gone (or a zombie) before its GPUs are handed on
            while time.monotonic() < deadline and alive(rec):
                child = self._children.get((rec.job_id, rec.attempt))
                if child is not None:
                    child.poll()
                time.sleep(0.05)

    async def heartbeats(self, stop: asyncio.Event) -> None:
        """`ReportHeartbeat` through Kafka: on every change of what runs here, and at a low rate."""
        last: tuple[dict[str, int], list[str]] | None = None
        sent_at = 0.0
        while not stop.is_set():
            recs = await asyncio.to_thread(self.running)
            jobs = {r.job_id: r.attempt for r in recs}
            nodes = sorted({n for r in recs for n in r.nodes} | self.attempts.drained())
            if (jobs, nodes) != last or time.monotonic() - sent_at >= self.options.heartbeat_report_s:
                try:
                    await self._report(ReportHeartbeat(self.settings.executor_id, jobs, nodes),
                                       f"hb-{self.settings.executor_id}-{uuid.uuid4().hex}")
                    last, sent_at = (jobs, nodes), time.monotonic()
                except Exception:  # Kafka away: the next round tries again
                    log.exception("heartbeat not sent")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=min(self.options.heartbeat_report_s, 5.0))

    def activities(self) -> list[Callable[..., Any]]:
        return [self.start_job, self.watch_job, self.signal_job, self.drain_node, self.resume_node]


async def run_executor(settings: Settings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    # a burst of starts (each launches a process and waits for Kafka's ack) is not queued behind the
    # default pool's CPUs + 4 threads
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="executor-io"))
    client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace,
                                  interceptors=[CorrelationInterceptor()])  # correlation ids in headers
    serve_metrics("executor", settings)  # first: its /ready says so while the publisher waits for Kafka (ADR 0064)
    publisher = CommandPublisher(settings)
    executor = LocalExecutor(settings, publisher)
    executor_jobs(settings.executor_id, lambda: len(executor.running()))
    stopped = await executor.reconcile(client)
    if stopped:
        log.info("stopped %d orphan attempt(s): %s", len(stopped), ", ".join(stopped))
    worker = Worker(client, task_queue=executor_task_queue(settings.executor_id),
                    activities=executor.activities(), max_concurrent_activities=1024,
                    activity_task_poller_behavior=PollerBehaviorSimpleMaximum(ACTIVITY_POLLERS))
    beats = asyncio.create_task(executor.heartbeats(stop))
    log.info("local executor %s serving %s with %d GPU(s) per node (%s)", settings.executor_id,
             executor_task_queue(settings.executor_id), executor.gpus, executor.gpu_source)
    async with worker:
        await stop.wait()
    await beats
    publisher.close()
