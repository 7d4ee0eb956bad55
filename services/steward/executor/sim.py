"""The simulated executor: many virtual nodes whose jobs take virtual time, for load tests of the live
stack (API, Kafka, ledger, scheduler, Temporal). It serves the same activities as the local executor on
`executor-<id>`, so the JobRun workflow cannot tell them apart.

A job's virtual duration is `sleep N` (its command), `--duration N` in it, `--steps N --step-s S` (the
sample job's own length, N x S), `STEWARD_SIM_DURATION` in its env, or the default; `speed` virtual
seconds pass per real second. A checkpoint request saves the work done so far (a resumable job's next
attempt runs only the rest) and exits 0 after `checkpoint_s` virtual seconds; SIGKILL loses the work
since the last checkpoint. State lives in memory (it is a simulator).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker

from steward.bus.envelope import command_envelope
from steward.bus.kafka import CommandPublisher
from steward.config import Settings
from steward.domain.commands import (
    Command,
    RegisterNode,
    ReportCheckpointSaved,
    ReportHeartbeat,
    ReportJobStarted,
)
from steward.domain.liveness import HEARTBEAT_REPORT_S
from steward_workflows.payloads import (
    JobRunInput,
    NodeRef,
    ProcessOutcome,
    ProcessStarted,
    SignalJob,
    SignalResult,
    WatchJob,
    executor_task_queue,
)

# enough pollers to cover every partition of the task queue at once (a burst of starts otherwise waits
# for the server to forward tasks between partitions; docs/benchmarks.md "Lease")
ACTIVITY_POLLERS = 16

log = logging.getLogger("steward.executor.sim")


def virtual_duration(command: list[str], env: dict[str, str], default_s: float) -> float:
    if len(command) >= 2 and command[0].rsplit("/", 1)[-1] == "sleep":
        try:
            return float(command[1])
        except ValueError:
            pass
    if "--duration" in command[:-1]:
        try:
            return float(command[command.index("--duration") + 1])
        except ValueError:
            pass
    if "--steps" in command[:-1]:  # examples/resumable_train.py: --steps N (0: forever) of --step-s S (0.1)
        try:
            steps = float(command[command.index("--steps") + 1])
            step_s = float(command[command.index("--step-s") + 1]) if "--step-s" in command[:-1] else 0.1
            if steps > 0:
                return steps * step_s
        except ValueError:
            pass
    if "STEWARD_SIM_DURATION" in env:
        return float(env["STEWARD_SIM_DURATION"])
    return default_s


@dataclass
class SimAttempt:
    job_id: str
    attempt: int
    pid: int
    started_at: float  # wall clock (reported)
    start_mono: float
    done_at_start_s: float  # virtual work already done (resumed)
    duration_s: float
    resumable: bool
    exit_code: int | None = None
    ended_at: float = 0.0
    killed: bool = False
    checkpoint_at: float | None = None
    exited: asyncio.Event = field(default_factory=asyncio.Event)


class SimExecutor:
    def __init__(self, settings: Settings, publisher: CommandPublisher, speed: float = 60.0,
                 default_duration_s: float = 3600.0, checkpoint_s: float = 30.0) -> None:
        self.settings = settings
        self.publisher = publisher
        self.speed = speed
        self.default_duration_s = default_duration_s
        self.checkpoint_s = checkpoint_s
        self.attempts: dict[tuple[str, int], SimAttempt] = {}
        self.progress: dict[str, float] = {}  # job id -> virtual seconds done at its last checkpoint
        self.drained: set[str] = set()
        self._pids = itertools.count(100_000)

    async def _report(self, command: Command, mid: str) -> None:
        env = command_envelope(command, actor=f"executor:{self.settings.executor_id}", role="system",
                               message_id=mid)
        await asyncio.to_thread(self.publisher.publish, env, wait=False)

    def _virtual_done(self, a: SimAttempt) -> float:
        return a.done_at_start_s + (time.monotonic() - a.start_mono) * self.speed

    def _finish(self, a: SimAttempt, code: int, killed: bool = False) -> None:
        if a.exit_code is None:
            a.exit_code, a.killed, a.ended_at = code, killed, time.time()
            a.exited.set()

    @activity.defn(name="start_job")
    async def start_job(self, run: JobRunInput) -> ProcessStarted:
        key = (run.job_id, run.attempt)
        a = self.attempts.get(key)
        if a is None:
            done = self.progress.get(run.job_id, 0.0) if (run.resumable and run.resume_from) else 0.0
            a = SimAttempt(run.job_id, run.attempt, next(self._pids), time.time(), time.monotonic(), done,
                           virtual_duration(run.command, run.env, self.default_duration_s), run.resumable)
            self.attempts[key] = a
        await self._report(ReportJobStarted(run.job_id, run.attempt, a.pid, a.started_at),
                           f"started-{run.job_id}-{run.attempt}")
        return ProcessStarted(run.job_id, run.attempt, a.pid, a.started_at, f"sim://{run.job_id}",
                              run.resume_from if a.done_at_start_s else "")

    @activity.defn(name="watch_job")
    async def watch_job(self, watch: WatchJob) -> ProcessOutcome:
        a = self.attempts.get((watch.job_id, watch.attempt))
        if a is None:
            raise ApplicationError(f"no attempt {watch.attempt} of {watch.job_id} here", type="UnknownAttempt",
                                   non_retryable=True)
        deadline = time.monotonic() + max(watch.window_s, 0.0)
        while a.exit_code is None:
            left_virtual = a.duration_s - self._virtual_done(a)
            if left_virtual <= 0:
                self.progress.pop(a.job_id, None)
                self._finish(a, 0)
                break
            if time.monotonic() >= deadline:
                return ProcessOutcome(a.job_id, a.attempt, 0, "running")
            activity.heartbeat(a.pid)
            wait = min(left_virtual / self.speed, max(deadline - time.monotonic(), 0.0), 5.0)
            try:
                await asyncio.wait_for(a.exited.wait(), timeout=max(wait, 0.001))
            except TimeoutError:
                continue
        path = f"sim://{a.job_id}" if a.checkpoint_at else ""
        return ProcessOutcome(a.job_id, a.attempt, a.exit_code if a.exit_code is not None else -1, "exited",
                              a.ended_at, path, a.checkpoint_at, a.killed)

    @activity.defn(name="signal_job")
    async def signal_job(self, request: SignalJob) -> SignalResult:
        a = self.attempts.get((request.job_id, request.attempt))
        if a is None:
            raise ApplicationError("unknown attempt", type="UnknownAttempt", non_retryable=True)
        if a.exit_code is not None:
            return SignalResult(a.job_id, a.attempt, False)
        if request.kill:
            self._finish(a, -9, killed=True)
            return SignalResult(a.job_id, a.attempt, True, "SIGKILL")
        asyncio.get_running_loop().create_task(self._checkpoint_then_exit(a))
        return SignalResult(a.job_id, a.attempt, True, request.signal or "SIGTERM")

    async def _checkpoint_then_exit(self, a: SimAttempt) -> None:
        await asyncio.sleep(self.checkpoint_s / self.speed)
        if a.exit_code is not None:
            return
        if a.resumable:
            self.progress[a.job_id] = min(self._virtual_done(a), a.duration_s)
            a.checkpoint_at = time.time()
            await self._report(ReportCheckpointSaved(a.job_id, a.attempt, f"sim://{a.job_id}", a.checkpoint_at,
                                                     {"virtual_s_done": self.progress[a.job_id]}),
                               f"checkpoint-{a.job_id}-{a.attempt}-{int(a.checkpoint_at * 1e6)}")
        self._finish(a, 0)

    @activity.defn(name="drain_node")
    async def drain_node(self, node: NodeRef) -> None:
        self.drained.add(node.node_id)

    @activity.defn(name="resume_node")
    async def resume_node(self, node: NodeRef) -> None:
        self.drained.discard(node.node_id)

    def activities(self) -> list[Callable[..., Any]]:
        return [self.start_job, self.watch_job, self.signal_job, self.drain_node, self.resume_node]

    async def heartbeats(self, stop: asyncio.Event, check_s: float = 5.0,
                         report_s: float = HEARTBEAT_REPORT_S) -> None:
        """`ReportHeartbeat` through Kafka as the local executor sends it (on a change of what runs here,
        at least every `report_s`): without it, nodes marked unhealthy after a lost attempt never recover."""
        last: dict[str, int] | None = None
        sent_at = 0.0
        while not stop.is_set():
            jobs = {a.job_id: a.attempt for a in self.attempts.values() if a.exit_code is None}
            if jobs != last or time.monotonic() - sent_at >= report_s:
                try:
                    await self._report(ReportHeartbeat(self.settings.executor_id, jobs, sorted(self.drained)),
                                       f"hb-{self.settings.executor_id}-{uuid.uuid4().hex}")
                    last, sent_at = jobs, time.monotonic()
                except Exception:  # Kafka away: the next round tries again
                    log.exception("heartbeat not sent")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=check_s)


def virtual_nodes(executor_id: str, count: int, gpus: int, per_block: int = 8,
                  gpu_model: str = "SIM") -> list[RegisterNode]:
    """`count` nodes named `<executor>-n<i>` under blocks of `per_block` (path block/node)."""
    return [RegisterNode(f"{executor_id}-n{i}", gpus, gpu_model, [f"{executor_id}-b{i // per_block}",
                                                                   f"{executor_id}-n{i}"], executor_id)
            for i in range(count)]


async def run_sim_executor(settings: Settings, stop: asyncio.Event, speed: float = 60.0,
                           default_duration_s: float = 3600.0, register_nodes: int = 0, gpus: int = 8,
                           checkpoint_s: float = 30.0) -> None:
    client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
    publisher = CommandPublisher(settings)
    sim = SimExecutor(settings, publisher, speed, default_duration_s, checkpoint_s)
    for node in virtual_nodes(settings.executor_id, register_nodes, gpus):
        env = command_envelope(node, actor=f"executor:{settings.executor_id}", role="system",
                               message_id=f"register-{node.node_id}")
        await asyncio.to_thread(publisher.publish, env)
    worker = Worker(client, task_queue=executor_task_queue(settings.executor_id), activities=sim.activities(),
                    max_concurrent_activities=10_000,
                    activity_task_poller_behavior=PollerBehaviorSimpleMaximum(ACTIVITY_POLLERS))
    log.info("simulated executor %s (x%g) serving %s", settings.executor_id, speed,
             executor_task_queue(settings.executor_id))
    beats = asyncio.create_task(sim.heartbeats(stop))
    async with worker:
        await stop.wait()
    await beats
    publisher.close()
