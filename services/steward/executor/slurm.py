"""The Slurm executor (issue 23; docs/adr/0043-slurm-division-of-labour.md): Steward governs a real Slurm
cluster through its own clients (`sbatch`, `scancel`, `scontrol`), behind the same activities as the node
agent on `executor-<id>`, so the JobRun workflow cannot tell them apart.

- `start_job`: a Steward placement becomes one Slurm job (`sbatch`) pinned to the placement's nodes
  (`--nodelist`, `--nodes`) with its GPU count per node (`--gres=gpu:N`), running as the project's OS user
  (`--uid/--gid`, steward.executor.isolation) in its private working folder, with an environment built from
  scratch and its checkpoint folder (`STEWARD_CHECKPOINT_DIR`; the same rules as the node agent,
  steward.executor.checkpoints); `--no-requeue`: Steward, not Slurm, decides what runs again. The Slurm job
  is named `steward-<job>-a<attempt>`: a start retried after a crash adopts the job of that name instead of
  submitting twice. Reported started once Slurm runs it. The attempt's record keeps the Slurm job id (as its
  `pid`), so an executor restart re-attaches.
- `watch_job`: polls `scontrol -o show job`: an exit code when Slurm ends the job, "vanished" when Slurm lost
  it (NODE_FAIL, BOOT_FAIL) or forgot it; checkpoints reported as the node agent does.
- `signal_job`: the checkpoint signal (`scancel --full --signal=<signal>`: the batch step too, which is the
  job's command itself) or, to end it, `scancel --full --signal=KILL` then `scancel`.
- `drain_node`: `scontrol update State=DRAIN Reason="steward: <the operator's reason>"` (`drain_reason`).

Heartbeats name the attempts Slurm still runs and, as `down`, the registered nodes Slurm holds out of service
on its own (down, failed, not responding, drained by anyone but Steward). At start the nodes are registered
from Slurm's inventory and topology.conf (steward.executor.slurm_inventory); later, each heartbeat registers a
node Slurm lists that is not registered, and retires one Slurm no longer lists once missing for a while with
none of Steward's jobs on it (steward.executor.retirement, ADR 0078)."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import os
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings, SettingsConfigDict
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from steward.bus.envelope import command_envelope
from steward.bus.kafka import CommandPublisher
from steward.config import Settings
from steward.domain.commands import Command, RegisterNode, ReportHeartbeat, ReportJobStarted
from steward.domain.ids import shown
from steward.executor.attempts import AttemptRecord, AttemptStore
from steward.executor.checkpoints import new_checkpoint, prepare_checkpoint
from steward.executor.cluster import heartbeat_loop, runs_over, serve, watch_attempt
from steward.executor.isolation import (
    IsolationError,
    check_mode,
    ensure_user,
    job_environment,
    prepare_executor_folders,
    private_folder,
)
from steward.executor.node_clusters import NodeClusters
from steward.executor.retirement import Retirements, warn_if_refused
from steward.executor.session_address import prepare as prepare_address
from steward.executor.session_address import report_new_address
from steward.executor.settings import ClusterSettingError, ExecutorSettings
from steward.executor.slurm_commands import (
    Runner,
    SlurmError,
    SlurmJob,
    SlurmNode,
    drain_reason,
    parse_jobs,
    parse_nodes,
    run_command,
)
from steward.executor.slurm_inventory import read_topology, registrations
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

log = logging.getLogger("steward.executor.slurm")

IO_THREADS = 16
KILLED_EXIT_CODE = -9
NOT_ISOLATED = "NotIsolated"
SLURM_FAILED = "SlurmFailed"


class SlurmSettings(BaseSettings):
    """Where the cluster is (prefix STEWARD_SLURM_): its slurm.conf (empty: Slurm's own default, or SLURM_CONF
    in the environment), the partition Steward's jobs go to (empty: the cluster's default), how often it is
    polled, and how long a submitted job may wait in Slurm's queue before it is reported started anyway."""

    model_config = SettingsConfigDict(env_prefix="STEWARD_SLURM_", extra="ignore")

    conf: str = ""
    partition: str = ""
    poll_s: float = 2.0
    start_wait_s: float = 60.0


def job_name(job_id: str, attempt: int) -> str:
    return f"steward-{job_id}-a{attempt}"


def gpus_per_node(assignments: Mapping[str, Sequence[int]]) -> int:
    """Slurm asks GPUs per node: the most any node of the placement holds (Steward's gangs are even)."""
    return max((len(g) for g in assignments.values()), default=0)


def sbatch_argv(run: JobRunInput, script: Path, workdir: Path, uid: int | None, gid: int | None,
                partition: str = "") -> list[str]:
    """The `sbatch` command line of an attempt: pinned to its nodes with its GPUs, never requeued by Slurm."""
    nodes = sorted(run.assignments)
    argv = ["sbatch", "--parsable", f"--job-name={job_name(run.job_id, run.attempt)}",
            f"--nodelist={','.join(nodes)}", f"--nodes={len(nodes)}", "--ntasks-per-node=1",
            "--no-requeue", f"--chdir={workdir}", f"--output={workdir / f'slurm-attempt-{run.attempt}.log'}",
            "--export=ALL"]
    gpus = gpus_per_node(run.assignments)
    if gpus:
        argv.append(f"--gres=gpu:{gpus}")
    if partition:
        argv.append(f"--partition={partition}")
    if uid is not None and gid is not None:
        argv += [f"--uid={uid}", f"--gid={gid}"]
    return [*argv, str(script)]


def outcome_of(rec: AttemptRecord, job: SlurmJob | None, now: float) -> ProcessOutcome | None:
    """What Slurm's record of an attempt's job says (None while Slurm still runs it)."""
    if job is not None and job.active:
        return None
    if job is None or job.lost or job.state == "PREEMPTED":  # gone without the job's own exit code
        return ProcessOutcome(rec.job_id, rec.attempt, -1, "vanished", now)
    now = job.end_time or now  # when Slurm ended it, not when we looked
    if rec.killed:
        return ProcessOutcome(rec.job_id, rec.attempt, KILLED_EXIT_CODE, "exited", now, killed=True)
    if job.state == "CANCELLED":  # by someone else (an operator's scancel): the signal that ended it
        return ProcessOutcome(rec.job_id, rec.attempt, -(job.exit_signal or 15), "exited", now)
    code = job.exit_code if job.exit_code or not job.exit_signal else 128 + job.exit_signal
    if job.state != "COMPLETED" and code == 0:  # TIMEOUT, OUT_OF_MEMORY: failed without a code of its own
        code = 1
    return ProcessOutcome(rec.job_id, rec.attempt, code, "exited", now)


def foreign_load(nodes: Sequence[SlurmNode], jobs: Mapping[int, SlurmJob], records: Sequence[AttemptRecord],
                 registered: set[str]) -> dict[str, int]:
    """GPUs per registered node held by jobs Steward did not submit (issue 23 "foreign load"): what Slurm has
    allocated on the node (`GresUsed`) less what Steward's own Slurm jobs hold there (each asked its
    placement's GPUs per node on every node Slurm gave it). Nodes without foreign load are left out."""
    ours: dict[str, int] = {}
    for rec in records:
        job = jobs.get(rec.pid)
        if job is None or not job.holding:
            continue
        for node in job.nodes:
            ours[node] = ours.get(node, 0) + gpus_per_node(rec.assignments)
    load = {n.name: min(n.gpus, n.gpus_used - ours.get(n.name, 0)) for n in nodes if n.name in registered}
    return {name: gpus for name, gpus in sorted(load.items()) if gpus > 0}


def drain_argv(node: NodeRef) -> list[str]:
    """The `scontrol` command of a drain: the node, and the operator's reason as Slurm's one-string Reason."""
    return ["scontrol", "update", f"NodeName={node.node_id}", "State=DRAIN", f"Reason={drain_reason(node.reason)}"]


def down_nodes(nodes: Sequence[SlurmNode], registered: set[str]) -> list[str]:
    """The registered nodes Slurm holds out of service on its own (a drain Steward asked for is Steward's)."""
    return sorted(n.name for n in nodes if n.name in registered and not n.available and not n.drained_by_steward)


class SlurmExecutor:
    def __init__(self, settings: Settings, publisher: CommandPublisher, options: ExecutorSettings | None = None,
                 slurm: SlurmSettings | None = None, runner: Runner = run_command) -> None:
        self.settings = settings
        self.publisher = publisher
        self.options = options or ExecutorSettings()
        self.cluster = slurm or SlurmSettings()
        self.runner = runner
        # ADR 0085: the cluster its nodes are registered in ("": each keeps the one it was last registered in)
        self.cluster_setting = self.options.checked_cluster()
        check_mode(self.options.isolation)
        self.isolating = self.options.isolation == "user"
        # a folder of its own: its records' `pid` is a Slurm job id, which a node agent started later on the same
        # run folder (its default id is the same) must never read as a process of this machine to stop
        self.root = under(settings.run_dir / "executor-slurm", settings.executor_id)
        self.attempts = AttemptStore(self.root)
        root = self.options.checkpoint_root
        self.checkpoint_root = Path(root) if root else settings.run_dir / "checkpoints"
        work = self.options.work_root
        self.work_root = Path(work) if work else self.root / "work"
        self.conf = self.cluster.conf or os.environ.get("SLURM_CONF", "")
        self.registered: set[str] = set()
        self.node_clusters = NodeClusters(self.root)  # the cluster of each node's last registration (ADR 0085)
        self.retirements = Retirements(self.root / "retired.json")  # nodes gone from Slurm (ADR 0078)
        self.attempts_running = 0  # Slurm jobs of Steward's at the last heartbeat (`steward_executor_jobs`)
        self._starting: dict[tuple[str, int], asyncio.Lock] = {}
        self._changed = asyncio.Event()
        self._prepare_folders()
        # the attempts whose Slurm job may still run, read from the disk once a process: a poll reads these,
        # not every record ever written (the cost grew with the history)
        self._open = {(r.job_id, r.attempt) for r in self.attempts.all() if r.pid > 0}

    def _prepare_folders(self) -> None:
        prepare_executor_folders(self.root, self.work_root, self.checkpoint_root, self.isolating)

    # -- Slurm ------------------------------------------------------------------------------------

    def _env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        base = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")}
        if "TZ" in os.environ:  # Slurm prints times in the client's zone: ours, to read them back right
            base["TZ"] = os.environ["TZ"]
        if self.conf:
            base["SLURM_CONF"] = self.conf
        return base | dict(extra or {})

    def slurm(self, *argv: str, env: Mapping[str, str] | None = None) -> str:
        return self.runner(list(argv), self._env(env))

    def job(self, slurm_id: int) -> SlurmJob | None:
        """Slurm's record of one job; None when Slurm no longer knows it (purged, or never was)."""
        try:
            jobs = parse_jobs(self.slurm("scontrol", "-o", "show", "job", str(slurm_id)))
        except SlurmError as err:
            if "Invalid job id" in str(err):
                return None
            raise
        return next((j for j in jobs if j.job_id == slurm_id), None)

    def jobs(self) -> dict[int, SlurmJob]:
        text = self.slurm("scontrol", "-o", "show", "job")
        return {j.job_id: j for j in parse_jobs(text)}

    def nodes(self) -> list[SlurmNode]:
        """The cluster's nodes; `-d` for the GPUs allocated on each (`GresUsed`)."""
        return parse_nodes(self.slurm("scontrol", "-o", "-d", "show", "node"))

    def inventory(self) -> list[RegisterNode]:
        """The cluster's nodes with GPUs, placed in topology.conf's switch tree and in their cluster (ADR 0085)."""
        return self.placed(self.nodes())

    def placed(self, nodes: Sequence[SlurmNode]) -> list[RegisterNode]:
        """The registrations of `nodes`: in the configured cluster, else each in the one it was last registered
        in (ADR 0085: a restart without the setting never moves a node back to the default cluster)."""
        listed = registrations(nodes, read_topology(self.conf), self.settings.executor_id,
                               cluster=self.cluster_setting)
        return self.node_clusters.placed(listed, self.cluster_setting)

    # -- reporting --------------------------------------------------------------------------------

    async def _report(self, command: Command, mid: str, correlation_id: str = "") -> None:
        env = command_envelope(command, actor=f"executor:{self.settings.executor_id}", role="system",
                               correlation_id=correlation_id or None, message_id=mid)
        await asyncio.to_thread(self.publisher.publish, env)

    async def register_nodes(self) -> list[RegisterNode]:
        nodes = await asyncio.to_thread(self.inventory)
        for node in nodes:
            warn_if_refused(node, log)
            await self._report(node, self.retirements.register_id(node))
        self.registered |= {n.node_id for n in nodes}
        self.node_clusters.sent(nodes)
        self.retirements.registered(n.node_id for n in nodes)
        return nodes

    def _publish(self, command: Command, mid: str) -> None:
        self.publisher.publish(command_envelope(command, actor=f"executor:{self.settings.executor_id}",
                                                role="system", message_id=mid))

    def follow_inventory(self, nodes: Sequence[SlurmNode], busy: set[str]) -> list[str]:
        """Register the nodes with GPUs Slurm lists that are not registered (added, or back after a retirement),
        and retire the registered ones it no longer lists once missing for a while with no attempt of this
        executor's on them (ADR 0078); the nodes retired."""
        new = [n for n in self.placed(nodes) if n.node_id not in self.registered]
        for node in new:
            warn_if_refused(node, log)
            self._publish(node, self.retirements.register_id(node))
            self.registered.add(node.node_id)
        self.node_clusters.sent(new)
        self.retirements.registered(n.node_id for n in new)
        # only a node Slurm no longer lists at all is retired, not one whose GPUs Slurm stopped showing for a while
        due = self.retirements.due((n.name for n in nodes), busy, time.monotonic(), "Slurm")
        for command, mid in due:
            self._publish(command, mid)
            self.registered.discard(command.node_id)
            log.info("node %s retired: %s", command.node_id, command.reason)
        return [c.node_id for c, _ in due]

    # -- activities -------------------------------------------------------------------------------

    @activity.defn(name="start_job")
    async def start_job(self, run: JobRunInput) -> ProcessStarted:
        try:
            self.attempts.job_dir(run.job_id)
        except UnsafePath as err:
            raise ApplicationError(f"job {shown(run.job_id)} attempt {run.attempt} not started: {err}",
                                   type=NOT_ISOLATED, non_retryable=True) from None
        async with self._starting.setdefault((run.job_id, run.attempt), asyncio.Lock()):
            rec = self.attempts.load(run.job_id, run.attempt)
            if rec is None or rec.pid <= 0:
                rec = await asyncio.to_thread(self._submit, run, rec)
            if not rec.started_at:
                rec = await self._until_running(rec)
        self._starting.pop((run.job_id, run.attempt), None)
        await self._report(ReportJobStarted(run.job_id, run.attempt, rec.pid, rec.started_at),
                           f"started-{run.job_id}-{run.attempt}", run.correlation_id)
        self._changed.set()
        return ProcessStarted(run.job_id, run.attempt, rec.pid, rec.started_at, rec.checkpoint_dir, rec.resumed_from)

    def _submit(self, run: JobRunInput, previous: AttemptRecord | None) -> AttemptRecord:
        try:
            return self._submit_isolated(run, previous)
        except (UnsafePath, IsolationError) as err:
            raise ApplicationError(f"job {shown(run.job_id)} attempt {run.attempt} not started: {err}",
                                   type=NOT_ISOLATED, non_retryable=True) from None
        except SlurmError as err:
            raise ApplicationError(f"job {shown(run.job_id)} attempt {run.attempt} not submitted to Slurm: {err}",
                                   type=SLURM_FAILED) from None

    def _adoptable(self, name: str) -> int | None:
        """The Slurm job a crashed start already submitted under this attempt's name (None when none)."""
        out = self.slurm("squeue", "--noheader", "--states=all", "--format=%i", f"--name={name}")
        ids = [int(line) for line in out.split() if line.isdigit()]
        return max(ids) if ids else None

    def _submit_isolated(self, run: JobRunInput, previous: AttemptRecord | None) -> AttemptRecord:
        job_dir = self.attempts.job_dir(run.job_id)
        job_dir.mkdir(parents=True, exist_ok=True)
        user = ensure_user(run.project) if self.isolating else None
        workdir = private_folder(under(self.work_root, run.job_id), user)
        checkpoint, resumed_from = prepare_checkpoint(self.checkpoint_root, run, user)
        rec = previous or AttemptRecord(run.job_id, run.attempt, list(run.command), dict(run.assignments),
                                        str(checkpoint), run.job_class)
        session, extra = prepare_address(rec, workdir)  # where a session says how to reach it (ADR 0055)
        rec = self.attempts.update(rec, resumed_from=resumed_from, extra=extra)
        slurm_id = self._adoptable(job_name(run.job_id, run.attempt)) if previous is not None else None
        if slurm_id is None:
            script = self.attempts.path(run.job_id, run.attempt, ".sbatch")
            # the batch step is the job's command itself (exec), so the checkpoint signal reaches it
            script.write_text(f"#!/bin/sh\nexec {shlex.join(run.command)}\n")
            os.chmod(script, 0o600)  # sbatch reads it as the executor and hands Slurm its content
            env = job_environment(run.env, {
                "STEWARD_CHECKPOINT_DIR": str(checkpoint),
                "STEWARD_JOB_ID": run.job_id,
                "STEWARD_ATTEMPT": str(run.attempt),
                "STEWARD_RESUMED": "1" if resumed_from else "0",
                "STEWARD_RESUME_FROM": resumed_from,
                **session,
            }, workdir, user.name if user is not None else getpass.getuser())
            argv = sbatch_argv(run, script, workdir, user.uid if user else None, user.gid if user else None,
                               self.cluster.partition)
            out = self.runner(argv, env | ({"SLURM_CONF": self.conf} if self.conf else {}))
            slurm_id = int(out.strip().split(";", 1)[0])
            log.info("job %s attempt %s is Slurm job %d on %s", run.job_id, run.attempt, slurm_id,
                     ",".join(sorted(run.assignments)))
        submitted = self.attempts.update(rec, pid=slurm_id, extra=rec.extra | {"slurm_job": slurm_id})
        self._open.add((run.job_id, run.attempt))
        return submitted

    async def _until_running(self, rec: AttemptRecord) -> AttemptRecord:
        """Wait (heartbeating) until Slurm runs the job, or ends it, or `start_wait_s` passes; started when
        Slurm says it started (its StartTime), so Steward's delivered time and Slurm's records agree."""
        deadline = time.monotonic() + self.cluster.start_wait_s
        job = None
        while time.monotonic() < deadline:
            job = await asyncio.to_thread(self.job, rec.pid)
            if job is None or job.state not in ("PENDING", "CONFIGURING"):
                break
            activity.heartbeat("pending in Slurm")
            await asyncio.sleep(min(self.cluster.poll_s, 0.5))
        else:
            log.warning("job %s attempt %s still pending in Slurm after %.0f s; reported started", rec.job_id,
                        rec.attempt, self.cluster.start_wait_s)
        started = job.start_time if job is not None and job.start_time else time.time()
        return self.attempts.update(rec, started_at=started)

    @activity.defn(name="watch_job")
    async def watch_job(self, watch: WatchJob) -> ProcessOutcome:
        rec = self.attempts.load(watch.job_id, watch.attempt)
        if rec is None:
            raise ApplicationError(f"no attempt {watch.attempt} of {watch.job_id} here", type="UnknownAttempt",
                                   non_retryable=True)

        async def ended(first: AttemptRecord) -> ProcessOutcome | None:
            # the record as stored now: a checkpoint seen by an earlier poll is not reported again
            current = self.attempts.load(first.job_id, first.attempt) or first
            job = await asyncio.to_thread(self.job, current.pid)
            current = await self._check_checkpoint(current)
            current = await report_new_address(current, self.attempts, self._report)
            current = self.attempts.load(first.job_id, first.attempt) or current  # a signal recorded meanwhile
            outcome = outcome_of(current, job, time.time())
            if outcome is None:
                return None
            self._changed.set()
            at = current.checkpoint_seen or None
            return ProcessOutcome(outcome.job_id, outcome.attempt, outcome.exit_code, outcome.status,
                                  outcome.ended_at, current.checkpoint_dir if at else "", at, outcome.killed)

        return await watch_attempt(watch, rec, self.cluster.poll_s, ended)

    async def _check_checkpoint(self, rec: AttemptRecord) -> AttemptRecord:
        report = await asyncio.to_thread(new_checkpoint, rec)
        if report is None:
            return rec
        await self._report(report, f"checkpoint-{rec.job_id}-{rec.attempt}-{int(report.saved_at * 1e6)}")
        return self.attempts.update(rec, checkpoint_seen=report.saved_at)

    @activity.defn(name="signal_job")
    async def signal_job(self, request: SignalJob) -> SignalResult:
        rec = self.attempts.load(request.job_id, request.attempt)
        if rec is None:
            raise ApplicationError(f"no attempt {request.attempt} of {request.job_id} here", type="UnknownAttempt",
                                   non_retryable=True)
        name = "SIGKILL" if request.kill else (request.signal or self.options.checkpoint_signal)
        number = 9 if request.kill else self.options.signal_number(request.signal)
        job = await asyncio.to_thread(self.job, rec.pid)
        if job is None or not job.active:
            return SignalResult(rec.job_id, rec.attempt, False, name)
        # record first: a kill that lands while we crash must still read as "killed" on re-attach
        self.attempts.update(rec, killed=rec.killed or request.kill, signalled_at=rec.signalled_at or time.time())
        try:
            await asyncio.to_thread(self.slurm, "scancel", "--full", f"--signal={number}", str(rec.pid))
            if request.kill:  # and Slurm's own end of the job (its record then reads CANCELLED)
                with contextlib.suppress(SlurmError):
                    await asyncio.to_thread(self.slurm, "scancel", str(rec.pid))
        except SlurmError as err:
            log.warning("%s not delivered to Slurm job %d (job %s attempt %s): %s", name, rec.pid, rec.job_id,
                        rec.attempt, err)
            return SignalResult(rec.job_id, rec.attempt, False, name)
        log.info("%s sent to job %s attempt %s (Slurm job %d)", name, rec.job_id, rec.attempt, rec.pid)
        return SignalResult(rec.job_id, rec.attempt, True, name)

    @activity.defn(name="drain_node")
    async def drain_node(self, node: NodeRef) -> None:
        await asyncio.to_thread(self.slurm, *drain_argv(node))
        self.attempts.set_drained(self.attempts.drained() | {node.node_id})
        self._changed.set()
        log.info("node %s draining in Slurm", node.node_id)

    @activity.defn(name="resume_node")
    async def resume_node(self, node: NodeRef) -> None:
        """The node was resumed in Steward: Slurm resumes it if the drain was Steward's (a drain an operator
        made in Slurm, or a node Slurm holds down, stays Slurm's)."""
        current = next((n for n in await asyncio.to_thread(self.nodes) if n.name == node.node_id), None)
        if current is not None and current.drained_by_steward:
            await asyncio.to_thread(self.slurm, "scontrol", "update", f"NodeName={node.node_id}", "State=RESUME")
            log.info("node %s resumed in Slurm", node.node_id)
        elif current is not None and "DRAIN" in current.flags:
            log.warning("node %s resumed in Steward stays drained in Slurm (%s): not Steward's drain", node.node_id,
                        current.reason or "no reason")
        self.attempts.set_drained(self.attempts.drained() - {node.node_id})
        self._changed.set()

    def activities(self) -> list[Callable[..., Any]]:
        return [self.start_job, self.watch_job, self.signal_job, self.drain_node, self.resume_node]

    # -- lifecycle --------------------------------------------------------------------------------

    def open_attempts(self) -> list[AttemptRecord]:
        """The attempts submitted to Slurm and not yet seen ended, as stored now."""
        return [r for job_id, attempt in sorted(self._open)
                if (r := self.attempts.load(job_id, attempt)) is not None and r.pid > 0]

    def running(self, recs: Sequence[AttemptRecord] | None = None,
                jobs: Mapping[int, SlurmJob] | None = None) -> list[AttemptRecord]:
        """The attempts whose Slurm job Slurm still runs (one `scontrol show job` for all of them), of `recs`
        (the open attempts, read before `jobs` was asked for). One whose Slurm job Slurm shows ended, or no
        longer shows (it forgets ended jobs after MinJobAge; a job submitted before `jobs` was asked for is in
        it), is closed: with `--no-requeue`, an ended Slurm job never runs again."""
        recs = self.open_attempts() if recs is None else recs
        if not recs:
            return []
        jobs = self.jobs() if jobs is None else jobs
        running = [r for r in recs if r.pid in jobs and jobs[r.pid].active]
        self._open -= {(r.job_id, r.attempt) for r in recs} - {(r.job_id, r.attempt) for r in running}
        return running

    def heartbeat(self) -> ReportHeartbeat:
        """What Slurm runs of Steward's, the registered nodes Slurm holds out of service on its own, and the
        GPUs jobs submitted outside Steward hold on them (foreign load: busy for Steward, never preempted)."""
        recs = self.open_attempts()  # before the list of jobs: each of these Slurm jobs is in it unless ended
        jobs = self.jobs()
        recs = self.running(recs, jobs)
        self.attempts_running = len(recs)
        down: list[str] = []
        foreign: dict[str, int] = {}
        if self.registered or self.retirements.known:
            nodes = self.nodes()
            self.follow_inventory(nodes, {n for r in recs for n in r.nodes})
            down = down_nodes(nodes, self.registered)
            foreign = foreign_load(nodes, jobs, recs, self.registered)
        held = sorted({n for r in recs for n in r.nodes} | self.attempts.drained())
        return ReportHeartbeat(self.settings.executor_id, {r.job_id: r.attempt for r in recs}, held, down, foreign)

    async def heartbeats(self, stop: asyncio.Event) -> None:
        """`ReportHeartbeat` through Kafka on every change (what Slurm runs, the nodes it holds down) and at a
        low rate otherwise; Slurm is polled every `poll_s`."""
        await heartbeat_loop(stop, self._changed, self.heartbeat, self._report, self.settings.executor_id,
                             self.cluster.poll_s, self.options.heartbeat_report_s)

    async def reconcile(self, client: Client) -> list[str]:
        """Cancel the Slurm jobs whose JobRun is over (they were lost while this executor was down)."""
        stopped = []
        for rec in await runs_over(client, await asyncio.to_thread(self.running)):
            log.warning("cancelling orphan Slurm job %d (job %s attempt %s: its run is over)", rec.pid,
                        rec.job_id, rec.attempt)
            self.attempts.update(rec, killed=True)
            await asyncio.to_thread(self.slurm, "scancel", str(rec.pid))
            stopped.append(job_run_workflow_id(rec.job_id, rec.attempt))
        return stopped


async def run_slurm_executor(settings: Settings, stop: asyncio.Event | None = None) -> None:
    try:
        ExecutorSettings().checked_cluster()  # before anything starts: a bad name is the one line it prints
    except ClusterSettingError as err:
        raise SystemExit(str(err)) from None
    stop = stop or asyncio.Event()
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="slurm-io"))
    client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace,
                                  interceptors=[CorrelationInterceptor()])
    serve_metrics("executor", settings)  # first: its /ready says so while the publisher waits for Kafka (ADR 0064)
    publisher = CommandPublisher(settings)
    executor = SlurmExecutor(settings, publisher)
    executor_jobs(settings.executor_id, lambda: executor.attempts_running)  # as of the last heartbeat
    nodes = await executor.register_nodes()
    stopped = await executor.reconcile(client)
    if stopped:
        log.info("cancelled %d orphan Slurm job(s): %s", len(stopped), ", ".join(stopped))
    log.info("Slurm executor %s serving %s: %d node(s), %d GPU(s) (SLURM_CONF=%s, cluster %s)", settings.executor_id,
             executor_task_queue(settings.executor_id), len(nodes), sum(n.gpus for n in nodes),
             executor.conf or "Slurm's default", executor.cluster_setting or "unset: each node keeps its own")
    await serve(client, settings, executor.activities(), executor.heartbeats(stop), stop)
    publisher.close()
