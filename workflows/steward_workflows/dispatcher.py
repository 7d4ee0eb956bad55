"""Starts a JobRun workflow for every `JobPlaced` event read from the `events` topic.

The workflow id names the job and attempt and duplicates are refused, so re-reading the topic after a
crash (at-least-once) starts each run exactly once.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from steward.bus.kafka import make_consumer
from steward.config import Settings
from steward_workflows.contracts import WORKFLOW_TASK_QUEUE, JobRunInput
from steward_workflows.job_run import JobRunWorkflow

log = logging.getLogger("steward.dispatcher")


def job_run_workflow_id(job_id: str, attempt: int) -> str:
    return f"job-{job_id}-attempt-{attempt}"


def job_run_input(event: dict[str, Any]) -> JobRunInput:
    p = event["payload"]
    return JobRunInput(
        job_id=p["job_id"], attempt=p["attempt"], executor=p["executor"], command=p["command"],
        assignments=p["assignments"], correlation_id=event["metadata"].get("correlation_id") or "",
    )


async def start_run(client: Client, run: JobRunInput) -> bool:
    try:
        await client.start_workflow(
            JobRunWorkflow.run, run, id=job_run_workflow_id(run.job_id, run.attempt),
            task_queue=WORKFLOW_TASK_QUEUE, id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:
        return False
    return True


async def dispatch(settings: Settings, client: Client, stop: asyncio.Event) -> None:
    consumer = make_consumer(settings, "steward-dispatcher")
    consumer.subscribe([settings.topic("events")])
    try:
        while not stop.is_set():
            polled = await asyncio.to_thread(consumer.poll, 200, 200)
            for records in polled.values():
                for r in records:
                    event = json.loads(r.value)
                    if event["type"] == "JobPlaced":
                        started = await start_run(client, job_run_input(event))
                        log.info("job %s attempt %s: %s", event["payload"]["job_id"],
                                 event["payload"]["attempt"], "started" if started else "already running")
            if polled:
                await asyncio.to_thread(consumer.commit)
    finally:
        await asyncio.to_thread(consumer.close)
