"""What the executors of a cluster manager Steward does not run (Slurm, Kubernetes: ADR 0043, ADR 0051) share:
watching an attempt until the cluster says it ended, the heartbeat loop, finding the attempts whose JobRun is
over, and serving the activities on the executor's task queue."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker

from steward.config import Settings
from steward.domain.commands import ReportHeartbeat
from steward.executor.attempts import AttemptRecord
from steward.executor.metrics import RoundMetrics
from steward_workflows.payloads import ProcessOutcome, WatchJob, executor_task_queue, job_run_workflow_id

log = logging.getLogger("steward.executor.cluster")

ACTIVITY_POLLERS = 16
MAX_ACTIVITIES = 1024


async def watch_attempt(watch: WatchJob, rec: AttemptRecord, poll_s: float,
                        outcome: Callable[[AttemptRecord], Awaitable[ProcessOutcome | None]]) -> ProcessOutcome:
    """Ask `outcome` every `poll_s` (a third of the activity's heartbeat timeout at most, heartbeating) until
    it names the attempt's end, or answer "running" when the watch's window is over."""
    tick = poll_s
    info = activity.info()
    if info.heartbeat_timeout:
        tick = min(tick, max(info.heartbeat_timeout.total_seconds() / 3, 0.1))
    began = time.monotonic()
    deadline = began + max(watch.window_s, 0.0)
    while True:
        ended = await outcome(rec)
        if ended is not None:
            return ended
        if time.monotonic() >= deadline:
            return ProcessOutcome(rec.job_id, rec.attempt, 0, "running")
        if time.monotonic() - began >= tick:  # ADR 0074: not at once (the SDK sends a first heartbeat at once, a
            activity.heartbeat(rec.pid)      # write on the server): a watch answered within a tick sends none
        await asyncio.sleep(min(tick, max(deadline - time.monotonic(), 0.01)))


async def heartbeat_loop(stop: asyncio.Event, changed: asyncio.Event, beat: Callable[[], ReportHeartbeat],
                         send: Callable[[ReportHeartbeat, str], Awaitable[None]], executor_id: str, poll_s: float,
                         report_every_s: float) -> None:
    """`beat()` (in a thread) every `poll_s` or when `changed` is set; sent on every change and at least every
    `report_every_s`. A round that fails (the cluster or Kafka away) is logged and tried again. Each round is
    counted and timed (`steward.executor.metrics`)."""
    last: ReportHeartbeat | None = None
    sent_at = 0.0
    metrics = RoundMetrics.of()
    while not stop.is_set():
        began, ok = time.monotonic(), False
        try:
            now = await asyncio.to_thread(beat)
            if now != last or time.monotonic() - sent_at >= report_every_s:
                await send(now, f"hb-{executor_id}-{uuid.uuid4().hex}")
                last, sent_at = now, time.monotonic()
                metrics.sent.labels(executor=executor_id).inc()
            ok = True
        except Exception:
            log.exception("heartbeat not sent")
        metrics.observe(executor_id, time.monotonic() - began, ok)
        changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout=poll_s)


async def runs_over(client: Client, recs: Sequence[AttemptRecord]) -> list[AttemptRecord]:
    """The attempts whose JobRun workflow is no longer running (or unknown): left while the executor was down."""
    over = []
    for rec in recs:
        wid = job_run_workflow_id(rec.job_id, rec.attempt)
        try:
            done = (await client.get_workflow_handle(wid).describe()).status != WorkflowExecutionStatus.RUNNING
        except RPCError:
            done = True
        if done:
            over.append(rec)
    return over


async def serve(client: Client, settings: Settings, activities: Sequence[Callable[..., Any]],
                beats: Awaitable[None], stop: asyncio.Event, max_activities: int = MAX_ACTIVITIES) -> None:
    """Serve the activities on `executor-<id>` with the heartbeat loop beside them, until `stop`: at most
    `max_activities` at once (every running attempt holds one `watch_job`)."""
    worker = Worker(client, task_queue=executor_task_queue(settings.executor_id), activities=list(activities),
                    max_concurrent_activities=max_activities,
                    activity_task_poller_behavior=PollerBehaviorSimpleMaximum(ACTIVITY_POLLERS))
    task = asyncio.ensure_future(beats)
    async with worker:
        await stop.wait()
    await task
