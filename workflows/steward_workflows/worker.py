"""The Temporal worker process: workflows and the worker's activities, plus the run dispatcher."""

from __future__ import annotations

import asyncio
import logging

from temporalio.client import Client
from temporalio.worker import Worker

from steward.bus.kafka import CommandPublisher
from steward.config import Settings
from steward_workflows.activities import WorkerActivities
from steward_workflows.contracts import WORKFLOW_TASK_QUEUE
from steward_workflows.dispatcher import dispatch
from steward_workflows.job_run import JobRunWorkflow

log = logging.getLogger("steward.worker")

WORKFLOWS = [JobRunWorkflow]


async def run_worker(settings: Settings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
    publisher = CommandPublisher(settings)
    acts = WorkerActivities(publisher)
    worker = Worker(client, task_queue=WORKFLOW_TASK_QUEUE, workflows=WORKFLOWS,
                    activities=[acts.report_lost])
    dispatcher = asyncio.create_task(dispatch(settings, client, stop))
    log.info("temporal worker started on %s", settings.temporal_address)
    async with worker:
        await stop.wait()
    await dispatcher
    publisher.close()
