"""The Temporal worker process: workflows and the worker's activities, the event dispatcher, and the
schedule that closes budget periods."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)
from temporalio.worker import PollerBehaviorSimpleMaximum, UnsandboxedWorkflowRunner, Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from steward.bus.kafka import CommandPublisher
from steward.config import Settings
from steward.logs_temporal import CorrelationInterceptor
from steward.metrics import serve as serve_metrics
from steward.notify.settings import NotifySettings
from steward.store.eventstore import EventStore
from steward_workflows.activities import WorkerActivities
from steward_workflows.delivery import DeliverNotificationWorkflow
from steward_workflows.dispatcher import RecordedPolicy, dispatch
from steward_workflows.drain import NodeDrainWorkflow, NodeResumeWorkflow
from steward_workflows.facts import StoreFacts
from steward_workflows.job_run import JobRunWorkflow
from steward_workflows.notifications import NotificationActivities, run_notifier
from steward_workflows.payloads import WORKFLOW_TASK_QUEUE, PeriodCloseInput
from steward_workflows.periods import SCHEDULE_ID, PeriodCloseWorkflow
from steward_workflows.session import SessionWorkflow
from steward_workflows.settings import ContractSettings

log = logging.getLogger("steward.worker")

WORKFLOWS = [JobRunWorkflow, SessionWorkflow, NodeDrainWorkflow, NodeResumeWorkflow, PeriodCloseWorkflow,
             DeliverNotificationWorkflow]


def workflow_runner(sandbox: bool) -> WorkflowRunner:
    """With the sandbox (our own deterministic modules passed through, imported once) or without it.
    Without, a new run's first task costs milliseconds instead of hundreds (most of a job's start
    latency on a busy machine, docs/benchmarks.md "Lease"); determinism is then guarded by the replay
    tests, which always run in the sandbox (tests/replay/)."""
    if not sandbox:
        return UnsandboxedWorkflowRunner()
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("steward", "steward_workflows"))


def activities_of(acts: WorkerActivities) -> list[Callable[..., Any]]:
    return [acts.publish_command, acts.report_lost, acts.node_occupancy, acts.executor_liveness, acts.compute_period]


async def ensure_period_schedule(client: Client, contract: ContractSettings) -> bool:
    """Create the schedule that closes each budget period (idempotent); False when periods are off."""
    if contract.period_s <= 0:
        return False
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(PeriodCloseWorkflow.run, PeriodCloseInput(contract.period_s),
                                           id="period-close", task_queue=WORKFLOW_TASK_QUEUE),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=contract.period_s),
                                                          offset=timedelta(seconds=contract.period_lag_s))]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )
    with contextlib.suppress(ScheduleAlreadyRunningError):
        await client.create_schedule(SCHEDULE_ID, schedule)
    return True


# Threads for the blocking calls made from the event loop (`asyncio.to_thread`): the dispatcher's Kafka poll
# and store checks, each activity's Kafka publish waiting for its ack. The default (CPUs + 4, so 6 here)
# queued a burst of starts behind a burst of publishes.
IO_THREADS = 32


# ADR 0074: the worker's capacity for thousands of runs at once (the 2,000-pod bench). The SDK's defaults (1,000
# runs cached, 5 workflow-task pollers of which a fifth poll the normal queue, 10 s on the sticky queue) made every
# run past the thousandth, and every task not taken within 10 s, fall back to the normal queue and replay its
# whole history there, behind one poller: tasks waited 50-100 s (Temporal's task_schedule_to_start_latency)
WORKER_CAPACITY: dict[str, Any] = {
    "max_cached_workflows": 20_000,  # more than the runs in flight: a run's next task finds it in memory
    # slots for tasks in progress: a run is started eagerly (its first task in the start's answer, not queued) only
    # while one is free, and each is held until the server took the completion (seconds on a busy dev server)
    "max_concurrent_workflow_tasks": 1_000,
    "workflow_task_poller_behavior": PollerBehaviorSimpleMaximum(16),
    "nonsticky_to_sticky_poll_ratio": 0.5,  # new runs' first tasks (when not started eagerly) come this way
    "sticky_queue_schedule_to_start_timeout": timedelta(seconds=30),
    "activity_task_poller_behavior": PollerBehaviorSimpleMaximum(8),
}


async def run_worker(settings: Settings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="worker-io"))
    contract = ContractSettings()
    client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace,
                                  interceptors=[CorrelationInterceptor()])  # correlation ids in headers
    serve_metrics("worker", settings)
    publisher = CommandPublisher(settings)
    store = EventStore.from_url(settings.resolved_store_url)
    facts = StoreFacts(store)
    acts = WorkerActivities(publisher, facts)
    notify = NotifySettings()
    notifying = NotificationActivities(notify, publisher.publish)
    worker = Worker(client, task_queue=WORKFLOW_TASK_QUEUE, workflows=WORKFLOWS,
                    activities=[*activities_of(acts), *notifying.all()],
                    workflow_runner=workflow_runner(contract.sandbox), **WORKER_CAPACITY)
    try:
        await ensure_period_schedule(client, contract)
    except Exception:  # the worker runs without it; the next start tries again
        log.exception("could not create the period-close schedule")
    try:
        policy = RecordedPolicy(await asyncio.to_thread(facts.recorded_policy))
    except Exception:  # the store restarts: runs take the environment's timings until the next PolicySet
        log.exception("could not read the recorded policy; new runs use STEWARD_CONTRACT_* until one is set")
        policy = RecordedPolicy()
    dispatcher = asyncio.create_task(dispatch(settings, client, stop, contract, facts.attempt_current, policy,
                                              facts.project_of))
    # a dispatcher that dies takes the worker with it (its exit status and error name why), so that the
    # supervisor starts a new one: a worker that ran on without it stranded every placement (chaos, ADR 0061)
    dispatcher.add_done_callback(lambda task: stop.set() if not task.cancelled() and task.exception() else None)
    # notifications (ADR 0050): the notifier reads the log from its own position; the ledger never waits on it
    notifier = asyncio.create_task(run_notifier(store, client, notify, stop)) if notify.enabled else None
    log.info("temporal worker started on %s", settings.temporal_address)
    async with worker:
        await stop.wait()
    await dispatcher
    if notifier is not None:
        await notifier
    publisher.close()
