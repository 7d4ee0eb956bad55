"""Turns recorded events (the Kafka `events` topic) into workflow actions:

| event                    | action                                                                  |
| ------------------------ | ----------------------------------------------------------------------- |
| JobPlaced                | start JobRun `job-<id>-attempt-<n>` (duplicates refused)                |
| JobPreemptionRequested   | update `request_preemption` (update id = the event's position)          |
| JobCancelled (running)   | signal `cancel`: stop the process                                       |
| SessionIdle / Active     | signal `utilisation` to `session-<id>-attempt-<n>`                      |
| NodeDrainRequested       | start NodeDrain `drain-<node>-<position>`                               |
| PolicySet                | the timings of runs started from now on follow the recorded policy      |

A run's contract timings are frozen into its input: the recorded policy's (grace, session warnings, at
cap) where it sets them, the worker's STEWARD_CONTRACT_* environment otherwise (`RecordedPolicy`, read
from the store when the dispatcher starts, then followed on the topic).

Events of one stream are handled in order; streams of a batch concurrently; offsets (of the consumer
group `steward-dispatcher`, all partitions assigned, no rebalancing) are committed after the batch, so
a crash re-reads it and every action is idempotent (workflow ids, update ids, signals of
absolute state). A placement is started only if the store still shows that attempt placed or running,
so re-reading an old topic never re-runs finished jobs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from kafka import TopicPartition
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError

from steward.bus.kafka import make_consumer
from steward.config import Settings
from steward.logs import correlation
from steward_workflows.drain import NodeDrainWorkflow, NodeResumeWorkflow
from steward_workflows.job_run import ALREADY_STOPPING, NOT_STARTED, PROTECTED, JobRunWorkflow
from steward_workflows.payloads import (
    WORKFLOW_TASK_QUEUE,
    CancelRun,
    ContractTimings,
    DrainInput,
    JobRunInput,
    PreemptionRequest,
    ResumeInput,
    UtilisationSignal,
    job_run_workflow_id,
    session_workflow_id,
)
from steward_workflows.settings import ContractSettings

log = logging.getLogger("steward.dispatcher")

__all__ = ["RecordedPolicy", "dispatch", "job_run_input", "job_run_workflow_id", "request_preemption", "start_run"]

# A refusal for these reasons is retried this long (the ledger and the workflow agree on protection up to
# clock skew; an attempt the ledger saw start may not yet be known to its workflow).
RETRY_REFUSED_FOR_S = 30.0
COMMIT_TIMEOUT_MS = 10_000  # a commit that cannot reach the group coordinator (Kafka restarting) gives up
STALL_CHECK_S = 15.0  # how often an idle dispatcher asks the broker whether events wait for it
STALL_LIMIT_S = 60.0  # events waiting this long with nothing read: the consumer is wedged (see `stalled`)

AttemptCheck = Callable[[str, int], bool]
ProjectOf = Callable[[str], str]  # a job's project (its executor runs it as that project's OS user)


class RecordedPolicy:
    """The policy overrides in force (the `settings` of the last `PolicySet`), as the dispatcher saw them."""

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        self.settings: dict[str, Any] = dict(settings or {})

    def follow(self, event: dict[str, Any]) -> bool:
        if event.get("type") != "PolicySet":
            return False
        settings = dict(event["payload"].get("settings") or {})
        if settings != self.settings:
            self.settings = settings
            log.info("new runs follow the recorded policy %s", self.settings)
        return True

    def timings(self, contract: ContractSettings) -> ContractTimings:
        return contract.timings(self.settings)


def job_run_input(event: dict[str, Any], timings: ContractTimings | None = None, project: str = "") -> JobRunInput:
    p = event["payload"]
    return JobRunInput(
        job_id=p["job_id"], attempt=p["attempt"], executor=p["executor"], command=p["command"], project=project,
        assignments=p["assignments"], correlation_id=event["metadata"].get("correlation_id") or "",
        job_class=p.get("job_class", "batch"), resumable=bool(p.get("resumable", False)),
        funded=bool(p.get("funded", True)), protection_s=float(p.get("protection_s", 0.0)),
        session_cap_s=float(p.get("session_cap_s", 0.0)), resume_from=p.get("resume_from") or "",
        restored_from=p.get("restored_from") or "", timings=timings or ContractTimings(),
    )


async def start_run(client: Client, run: JobRunInput) -> bool:
    try:
        await client.start_workflow(
            JobRunWorkflow.run, run, id=job_run_workflow_id(run.job_id, run.attempt),
            task_queue=WORKFLOW_TASK_QUEUE, id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            request_eager_start=True,  # the worker in this process takes the first task at once
        )
    except WorkflowAlreadyStartedError:
        return False
    return True


async def request_preemption(client: Client, job_id: str, attempt: int, request: PreemptionRequest,
                             retry_for_s: float = RETRY_REFUSED_FOR_S) -> str:
    """Send the update; returns "accepted" or why not. Refusals that may pass shortly are retried."""
    handle = client.get_workflow_handle(job_run_workflow_id(job_id, attempt))
    deadline = time.monotonic() + retry_for_s
    while True:
        try:
            await handle.execute_update(JobRunWorkflow.request_preemption, request, id=request.request_id or None)
            return "accepted"
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            kind = cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
            if kind in (NOT_STARTED, PROTECTED) and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
                continue
            if kind != ALREADY_STOPPING:
                log.warning("preemption of %s attempt %s refused: %s", job_id, attempt, cause)
            return f"refused: {kind}"
        except RPCError as err:
            log.warning("preemption of %s attempt %s: no run to update (%s)", job_id, attempt, err)
            return "no run"


async def _signal(client: Client, workflow_id: str, name: str, arg: Any) -> str:
    try:
        await client.get_workflow_handle(workflow_id).signal(name, arg)
    except RPCError as err:
        return f"no run ({err.status.name})"
    return "signalled"


async def handle_event(client: Client, event: dict[str, Any], contract: ContractSettings,
                       attempt_current: AttemptCheck | None = None, policy: RecordedPolicy | None = None,
                       project_of: ProjectOf | None = None) -> str:
    kind, p = event["type"], event["payload"]
    if kind == "JobPlaced":
        if attempt_current is not None and not await asyncio.to_thread(attempt_current, p["job_id"], p["attempt"]):
            return "stale placement"
        timings = policy.timings(contract) if policy is not None else contract.timings()
        project = await asyncio.to_thread(project_of, p["job_id"]) if project_of is not None else ""
        return "started" if await start_run(client, job_run_input(event, timings, project)) else "already running"
    if kind == "PolicySet" and policy is not None:
        policy.follow(event)
        return "policy followed"
    if kind == "JobPreemptionRequested":
        request = PreemptionRequest(p["reason"], f"preempt-{event['position']}", float(p["grace_s"]),
                                    bool(p["requeue"]), p.get("for_job_id", ""))
        return await request_preemption(client, p["job_id"], p["attempt"], request)
    if kind == "JobCancelled" and p.get("was") in ("PLACED", "RUNNING"):
        return await _signal(client, job_run_workflow_id(p["job_id"], p["attempt"]), "cancel",
                             CancelRun(p.get("reason", "")))
    if kind in ("SessionIdle", "SessionActive"):
        return await _signal(client, session_workflow_id(p["job_id"], p["attempt"]), "utilisation",
                             UtilisationSignal(kind == "SessionIdle", float(p["since"])))
    if kind == "NodeDrainRequested":
        drain = DrainInput(p["node_id"], p.get("executor", "local"), p.get("reason", ""), contract.drain_poll_s,
                           contract.grace_s, contract.lost_after_s)
        try:
            await client.start_workflow(NodeDrainWorkflow.run, drain, id=f"drain-{p['node_id']}-{event['position']}",
                                        task_queue=WORKFLOW_TASK_QUEUE)
        except WorkflowAlreadyStartedError:
            return "already draining"
        return "draining"
    if kind == "NodeResumed":
        try:
            await client.start_workflow(NodeResumeWorkflow.run, ResumeInput(p["node_id"], contract.lost_after_s),
                                        id=f"resume-{p['node_id']}-{event['position']}", task_queue=WORKFLOW_TASK_QUEUE)
        except WorkflowAlreadyStartedError:
            return "already resuming"
        return "resuming"
    return "ignored"


async def _handle_stream(client: Client, events: list[dict[str, Any]], contract: ContractSettings,
                         attempt_current: AttemptCheck | None, policy: RecordedPolicy | None = None,
                         project_of: ProjectOf | None = None) -> None:
    for event in events:
        with correlation((event.get("metadata") or {}).get("correlation_id")):
            try:
                outcome = await handle_event(client, event, contract, attempt_current, policy, project_of)
            except Exception:
                log.exception("event %s (%s) not dispatched", event.get("position"), event.get("type"))
                raise
            if outcome != "ignored":
                log.info("%s %s at %s: %s", event["type"], event["stream_id"], event["position"], outcome)


async def assign_all(consumer: Any, topic: str, stop: asyncio.Event) -> None:
    """Read every partition of `topic` from the group's committed offsets, without group membership: a
    restarted worker dispatches at once instead of waiting for a rebalance (every action is idempotent,
    so two workers reading the same events is harmless)."""
    while not stop.is_set():
        partitions = await asyncio.to_thread(consumer.partitions_for_topic, topic)
        if partitions:
            consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
            return
        await asyncio.sleep(0.5)


class DispatcherStalled(RuntimeError):
    """The events consumer read nothing for STALL_LIMIT_S while the topic held events past its position."""


def stalled(behind: bool, progress_at: float, now: float, limit_s: float = STALL_LIMIT_S) -> bool:
    """A consumer is wedged when events wait past its position and it has read nothing for `limit_s`
    (seen after a broker restart: the client lost its coordinator and never read again, stranding every
    placement behind it). Idle with nothing waiting is not stalled."""
    return behind and now - progress_at >= limit_s


def _behind(consumer: Any) -> bool:
    """Whether any assigned partition holds events past the consumer's position (a broker round trip)."""
    parts = list(consumer.assignment())
    ends = consumer.end_offsets(parts, COMMIT_TIMEOUT_MS)
    return any(ends.get(tp, 0) > (consumer.position(tp, COMMIT_TIMEOUT_MS) or 0) for tp in parts)


async def _commit(consumer: Any) -> None:
    """Commit what was dispatched; when Kafka cannot take it now, go on: the offsets are committed with the
    next batch, and a restart re-reads at most these events (every action is idempotent)."""
    try:
        await asyncio.to_thread(consumer.commit, None, COMMIT_TIMEOUT_MS)
    except Exception as err:  # KafkaTimeoutError, CommitFailedError, a lost coordinator
        log.warning("dispatcher: offsets not committed now (%s: %s); committed with the next batch",
                    type(err).__name__, err)


async def dispatch(settings: Settings, client: Client, stop: asyncio.Event,
                   contract: ContractSettings | None = None, attempt_current: AttemptCheck | None = None,
                   policy: RecordedPolicy | None = None, project_of: ProjectOf | None = None) -> None:
    contract = contract or ContractSettings()
    policy = policy or RecordedPolicy()
    consumer = make_consumer(settings, "steward-dispatcher")
    await assign_all(consumer, settings.topic("events"), stop)
    progress_at = checked_at = time.monotonic()
    try:
        while not stop.is_set():
            polled = await asyncio.to_thread(consumer.poll, 200, 200)
            now = time.monotonic()
            if polled:
                progress_at = now
            elif now - checked_at >= STALL_CHECK_S:
                checked_at = now
                try:
                    behind = await asyncio.to_thread(_behind, consumer)
                except Exception as err:  # the broker unreachable: not a wedge of ours, ask again later
                    log.warning("dispatcher: the events topic's end not read (%s)", type(err).__name__)
                    behind = False
                if not behind:
                    progress_at = now
                elif stalled(behind, progress_at, now):
                    raise DispatcherStalled(
                        f"the dispatcher read no event for {now - progress_at:.0f} s while events waited on "
                        f"{settings.topic('events')}: its Kafka consumer is wedged; the worker exits so that its "
                        "supervisor starts it again with a new one")
            streams: dict[str, list[dict[str, Any]]] = {}
            for records in polled.values():
                for r in records:
                    event = json.loads(r.value)
                    streams.setdefault(event["stream_id"], []).append(event)
            for event in streams.get("policy", ()):  # before the batch's placements: they run under it
                policy.follow(event)
            while streams and not stop.is_set():
                try:
                    await asyncio.gather(*(_handle_stream(client, evs, contract, attempt_current, policy, project_of)
                                           for evs in streams.values()))
                    break
                except Exception:  # Temporal unreachable, say: every action is idempotent, so try again
                    await asyncio.sleep(1.0)
            if polled:
                await _commit(consumer)
    finally:
        await asyncio.to_thread(consumer.close)
