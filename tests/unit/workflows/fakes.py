"""Fakes for workflow tests: an executor whose processes the test controls, and a publisher that records
the commands the workflows emit (with the server time they were scheduled at)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from steward.config import REPO_ROOT
from steward_workflows.payloads import (
    WORKFLOW_TASK_QUEUE,
    CommandMessage,
    ContractTimings,
    ExecutorLiveness,
    ExecutorRef,
    JobRunInput,
    NodeOccupancy,
    NodeRef,
    PeriodFigures,
    PeriodWindow,
    ProcessOutcome,
    ProcessStarted,
    SignalJob,
    SignalResult,
    WatchJob,
    executor_task_queue,
)
from steward_workflows.worker import WORKFLOWS

TEST_SERVER = REPO_ROOT / ".venv" / "bin" / "temporal-test-server"
EXECUTOR = "fake"


@dataclass
class FakeProcess:
    job_id: str
    attempt: int
    started_at: float
    on_checkpoint: str = "exit"  # "exit": saves and exits 0; "ignore": keeps running (grace runs out)
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    exit_code: int = 0
    killed: bool = False
    checkpoint_at: float | None = None
    signals: list[str] = field(default_factory=list)
    refused: str = ""  # the node refused it (ADR 0083): the watch says "refused" with this reason
    starts: int = 0
    watches: int = 0

    def exit(self, code: int) -> None:
        self.exit_code = code
        self.exited.set()


class FakeExecutor:
    def __init__(self, on_checkpoint: str = "exit", heartbeat: bool = True) -> None:
        self.procs: dict[tuple[str, int], FakeProcess] = {}
        self.on_checkpoint = on_checkpoint
        self.heartbeat = heartbeat
        self.hung = asyncio.Event()
        self.resumed: list[str] = []
        self.asked: list[SignalJob] = []  # every signal asked, with its reason
        self.drained: list[NodeRef] = []
        self.start_fails = ""  # the start fails for good with this reason (a gang's bind failed, ADR 0083)

    @activity.defn(name="start_job")
    async def start_job(self, run: JobRunInput) -> ProcessStarted:
        if self.start_fails:
            raise ApplicationError(self.start_fails, type="StartFailed", non_retryable=True)
        key = (run.job_id, run.attempt)
        if key not in self.procs:
            at = activity.info().current_attempt_scheduled_time.timestamp()
            self.procs[key] = FakeProcess(run.job_id, run.attempt, at, self.on_checkpoint)
        proc = self.procs[key]
        proc.starts += 1
        return ProcessStarted(run.job_id, run.attempt, 1000 + len(self.procs), proc.started_at, "/ck/" + run.job_id)

    @activity.defn(name="watch_job")
    async def watch_job(self, watch: WatchJob) -> ProcessOutcome:
        proc = self.procs.get((watch.job_id, watch.attempt))
        if proc is None:
            raise ApplicationError("unknown attempt", type="UnknownAttempt", non_retryable=True)
        proc.watches += 1
        if not self.heartbeat:  # a dying executor: never answers, never heartbeats (until it is stopped)
            self.hung.set()
            await asyncio.Event().wait()
        if not proc.exited.is_set():  # a poll with no window: answer at once (so the test server skips time)
            return ProcessOutcome(watch.job_id, watch.attempt, 0, "running")
        if proc.refused:
            return ProcessOutcome(watch.job_id, watch.attempt, -1, "refused", time.time(), reason=proc.refused)
        return ProcessOutcome(watch.job_id, watch.attempt, proc.exit_code, "exited", time.time(),
                              "/ck/" + watch.job_id if proc.checkpoint_at else "", proc.checkpoint_at, proc.killed)

    @activity.defn(name="signal_job")
    async def signal_job(self, request: SignalJob) -> SignalResult:
        proc = self.procs[(request.job_id, request.attempt)]
        self.asked.append(request)
        name = "SIGKILL" if request.kill else "SIGTERM"
        proc.signals.append(name)
        if request.kill:
            proc.killed = True
            proc.exit(-9)
        elif proc.on_checkpoint == "exit":
            proc.checkpoint_at = activity.info().current_attempt_scheduled_time.timestamp()
            proc.exit(0)
        return SignalResult(request.job_id, request.attempt, True, name)

    @activity.defn(name="drain_node")
    async def drain_node(self, node: NodeRef) -> None:
        self.drained.append(node)

    @activity.defn(name="resume_node")
    async def resume_node(self, node: NodeRef) -> None:
        self.resumed.append(node.node_id)

    def activities(self) -> list[Callable[..., Any]]:
        return [self.start_job, self.watch_job, self.signal_job, self.drain_node, self.resume_node]


@dataclass
class Published:
    message: CommandMessage
    at: float  # server (skipped) time the publish was scheduled

    @property
    def type(self) -> str:
        return self.message.type

    @property
    def payload(self) -> dict[str, Any]:
        return self.message.payload


class FakeWorkerActivities:
    def __init__(self) -> None:
        self.published: list[Published] = []
        self.clock: Callable[[], Awaitable[datetime]] | None = None  # the test server's time (`harness` sets it)
        self.occupancy: list[NodeOccupancy] = []
        self.figures: PeriodFigures | None = None
        # the executor's last recorded heartbeat as the log says (None: never heard; a silent executor),
        # and its placements not yet started; `alive` answers with the server's time at each look
        self.heard_at: float | None = None
        self.alive = False
        self.queued = 0
        self.looks: list[float] = []

    @activity.defn(name="publish_command")
    async def publish_command(self, message: CommandMessage) -> None:
        info = activity.info()
        # a local activity (ADR 0074) is scheduled on the worker's wall clock: the test server's (skipped) time it is
        at = (await self.clock()).timestamp() if info.is_local and self.clock is not None \
            else info.current_attempt_scheduled_time.timestamp()
        self.published.append(Published(message, at))

    @activity.defn(name="node_occupancy")
    async def node_occupancy(self, node: NodeRef) -> NodeOccupancy:
        return self.occupancy.pop(0) if len(self.occupancy) > 1 else self.occupancy[0]

    @activity.defn(name="executor_liveness")
    async def executor_liveness(self, ref: ExecutorRef) -> ExecutorLiveness:
        now = activity.info().current_attempt_scheduled_time.timestamp()
        self.looks.append(now)
        return ExecutorLiveness(ref.executor, now if self.alive else self.heard_at, self.queued, now)

    @activity.defn(name="compute_period")
    async def compute_period(self, window: PeriodWindow) -> PeriodFigures:
        assert self.figures is not None
        return PeriodFigures(window.start, window.end, self.figures.capacity_gpu_s, self.figures.allocations, 3)

    def activities(self) -> list[Callable[..., Any]]:
        return [self.publish_command, self.node_occupancy, self.executor_liveness, self.compute_period]

    def of_type(self, kind: str) -> list[Published]:
        return [p for p in self.published if p.type == kind]

    def types(self) -> list[str]:
        return [p.type for p in self.published]


@dataclass
class Harness:
    env: WorkflowEnvironment
    executor: FakeExecutor
    acts: FakeWorkerActivities
    executor_worker: Worker | None = None

    async def start_executor(self) -> None:
        """The executor (back or finally free) takes tasks from its queue."""
        if self.executor_worker is None:
            self.executor_worker = Worker(self.env.client, task_queue=executor_task_queue(EXECUTOR),
                                          activities=self.executor.activities(),
                                          graceful_shutdown_timeout=timedelta(0))
            await self.executor_worker.__aenter__()

    async def stop_executor(self) -> None:
        """The executor dies: its worker stops polling (its activities are cancelled at once)."""
        if self.executor_worker is not None:
            await self.executor_worker.__aexit__(None, None, None)
            self.executor_worker = None

    @property
    def client(self) -> Client:
        return self.env.client

    async def now(self) -> float:
        return (await self.env.get_current_time()).timestamp()

    async def eventually(self, check: Callable[[], bool | Awaitable[bool]], timeout: float = 15.0,
                         what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = check()
            if isinstance(result, Awaitable):
                result = await result
            if result:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what or check}; published: {self.acts.types()}")

    async def running(self, handle: WorkflowHandle[Any, Any]) -> None:
        async def started() -> bool:
            from steward_workflows.job_run import JobRunWorkflow

            status = await handle.query(JobRunWorkflow.status)
            return status.phase == "running"

        await self.eventually(started, what="the attempt running")


def timings_for_tests(**over: Any) -> ContractTimings:
    """No heartbeat or schedule-to-start timeouts (time jumps by hours), polls without a window every 60 s."""
    base: dict[str, Any] = dict(grace_s=30.0, heartbeat_timeout_s=0.0, lost_after_s=0.0, idle_limit_s=600.0,
                                idle_grace_s=300.0, watch_window_s=0.0, watch_gap_s=60.0)
    return ContractTimings(**(base | over))


def job(job_id: str = "j1", attempt: int = 1, **over: Any) -> JobRunInput:
    timings = over.pop("timings", None) or timings_for_tests()
    base = dict(job_id=job_id, attempt=attempt, executor=EXECUTOR, command=["train"], assignments={"n0": [0]},
                protection_s=600.0, timings=timings)
    return JobRunInput(**(base | over))


@asynccontextmanager
async def harness(executor: FakeExecutor | None = None, with_executor: bool = True) -> AsyncIterator[Harness]:
    env = await WorkflowEnvironment.start_time_skipping(test_server_existing_path=str(TEST_SERVER))
    executor = executor or FakeExecutor()
    acts = FakeWorkerActivities()
    acts.clock = env.get_current_time
    async with env:
        worker = Worker(env.client, task_queue=WORKFLOW_TASK_QUEUE, workflows=WORKFLOWS,
                        activities=acts.activities(), graceful_shutdown_timeout=timedelta(0))
        await worker.__aenter__()
        h = Harness(env, executor, acts)
        if with_executor:
            await h.start_executor()
        try:
            yield h
        finally:
            await h.stop_executor()
            await worker.__aexit__(None, None, None)


def save_history(handle_history_json: str, name: str, folder: Path | None = None) -> Path:
    folder = folder or Path(__file__).resolve().parents[2] / "replay" / "histories"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(handle_history_json)
    return path


def run(scenario: Callable[[], Awaitable[None]], timeout: float = 60.0) -> None:
    """Run a scenario in a fresh event loop, bounded (a stuck scenario fails instead of hanging the suite)."""
    asyncio.run(asyncio.wait_for(scenario(), timeout))


def skip(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


__all__: Sequence[str] = ["FakeExecutor", "FakeWorkerActivities", "Harness", "harness", "job", "skip"]
