"""The local executor (node agent): runs each job attempt as a real subprocess.

It serves the Temporal task queue `executor-<id>` with the `run_job` activity: start the process with
`CUDA_VISIBLE_DEVICES` (its assigned GPU indices) and `STEWARD_CHECKPOINT_DIR` set, report the start
through Kafka, heartbeat while it runs, report the exit (with its code) through Kafka. A cancelled
activity (a stop) sends SIGTERM, waits the grace period, then SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from pathlib import Path

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from steward.bus.envelope import command_envelope
from steward.bus.kafka import CommandPublisher
from steward.config import Settings
from steward.domain.commands import ReportJobExited, ReportJobStarted
from steward_workflows.contracts import JobRunInput, ProcessOutcome, executor_task_queue

log = logging.getLogger("steward.executor")

HEARTBEAT_EVERY_S = 5.0


class LocalExecutor:
    def __init__(self, settings: Settings, publisher: CommandPublisher, grace_s: float = 120.0) -> None:
        self.settings = settings
        self.publisher = publisher
        self.grace_s = grace_s
        self.root = settings.run_dir / "executor" / settings.executor_id

    def job_dir(self, job_id: str) -> Path:
        return self.root / "jobs" / job_id

    async def _report(self, command: ReportJobStarted | ReportJobExited, run: JobRunInput, mid: str) -> None:
        env = command_envelope(command, actor=f"executor:{self.settings.executor_id}", role="system",
                               correlation_id=run.correlation_id or None, message_id=mid)
        await asyncio.to_thread(self.publisher.publish, env)

    @activity.defn(name="run_job")
    async def run_job(self, run: JobRunInput) -> ProcessOutcome:
        job_dir = self.job_dir(run.job_id)
        checkpoint_dir = job_dir / "checkpoint"
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        gpus = sorted(g for indices in run.assignments.values() for g in indices)
        env = os.environ | run.env | {
            "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus),
            "STEWARD_CHECKPOINT_DIR": str(checkpoint_dir),
            "STEWARD_JOB_ID": run.job_id,
            "STEWARD_ATTEMPT": str(run.attempt),
        }
        log_path = job_dir / f"attempt-{run.attempt}.log"
        with log_path.open("ab") as out:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *run.command, stdout=out, stderr=asyncio.subprocess.STDOUT, env=env,
                    cwd=job_dir, start_new_session=True,
                )
            except OSError as err:
                out.write(f"steward: cannot start {run.command[0]!r}: {err}\n".encode())
                await self._report(ReportJobStarted(run.job_id, run.attempt, 0), run,
                                   f"started-{run.job_id}-{run.attempt}")
                await self._report(ReportJobExited(run.job_id, run.attempt, 127), run,
                                   f"exited-{run.job_id}-{run.attempt}")
                return ProcessOutcome(run.job_id, run.attempt, 127)
        await self._report(ReportJobStarted(run.job_id, run.attempt, proc.pid), run,
                           f"started-{run.job_id}-{run.attempt}")
        try:
            while True:
                try:
                    code = await asyncio.wait_for(proc.wait(), timeout=HEARTBEAT_EVERY_S)
                    break
                except TimeoutError:
                    activity.heartbeat(proc.pid)
        except asyncio.CancelledError:
            code = await self._stop(proc)
            await self._report(ReportJobExited(run.job_id, run.attempt, code), run,
                               f"exited-{run.job_id}-{run.attempt}")
            raise
        await self._report(ReportJobExited(run.job_id, run.attempt, code), run,
                           f"exited-{run.job_id}-{run.attempt}")
        return ProcessOutcome(run.job_id, run.attempt, code)

    async def _stop(self, proc: asyncio.subprocess.Process) -> int:
        """Checkpoint request (SIGTERM to the process group), grace period, then SIGKILL."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            return await asyncio.wait_for(proc.wait(), timeout=self.grace_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            return await proc.wait()


async def run_executor(settings: Settings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
    publisher = CommandPublisher(settings)
    executor = LocalExecutor(settings, publisher)
    worker = Worker(client, task_queue=executor_task_queue(settings.executor_id),
                    activities=[executor.run_job], max_concurrent_activities=256)
    log.info("local executor %s serving %s", settings.executor_id, executor_task_queue(settings.executor_id))
    async with worker:
        await stop.wait()
    publisher.close()
