"""JobRunWorkflow ("JobRun"): one workflow per placed attempt of a job, keeping the time-slicing contract
(DESIGN.md "The time-slicing contract") through crashes of the worker, the executor or the server.

1. start the process on its executor (`start_job`, idempotent: an executor never starts an attempt twice),
   waiting while the executor is alive however long its queue is (ADR 0069: lost only once its heartbeats are
   `lost_after_s` old, `steward.domain.liveness`);
2. protect it: a durable timer until `started_at + protection_s` (0 when unfunded); for a session, a child
   `Session` workflow times the cap, its warnings and idleness;
3. watch it: `watch_job` long-polls (answers at the exit or after `watch_window_s`, heartbeating), again
   and again; an exit is recorded as completed or failed; a silent executor (heartbeat timeout, then no
   executor taking the retry within `lost_after_s` while its own heartbeats are that old too) as lost,
   exactly once. Polls rather than one endless
   activity keep the history small, make continue-as-new clean, and let the test server skip time;
4. a preemption is the update `request_preemption`, whose validator refuses it while the attempt is
   protected (a refused update writes nothing to the history); once accepted: checkpoint request (the
   executor's checkpoint signal), grace period (a durable timer), SIGKILL if the grace ran out, then
   `ReportJobPreempted` with its evidence — the ledger requeues it with its original submit time and
   the checkpoint to resume from;
5. continue-as-new when the history grows past `max_history`, between two polls (the process keeps
   running; the new run watches it again).

Every outcome leaves as a command through Kafka (`publish_command`), so the event store stays the record.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, replace
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeout
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from steward.domain.commands import ReachSessionCap, ReportJobExited, ReportJobLost, ReportJobPreempted
    from steward.domain.liveness import StartWait, start_wait
    from steward_workflows.payloads import (
        WORKFLOW_TASK_QUEUE,
        CancelRun,
        CapReached,
        ExecutorLiveness,
        ExecutorRef,
        JobRunInput,
        JobRunResult,
        PreemptionAccepted,
        PreemptionRequest,
        ProcessOutcome,
        ProcessStarted,
        Revocation,
        RunCarry,
        RunStatus,
        SessionInput,
        SessionResult,
        SignalJob,
        WatchJob,
        executor_task_queue,
        session_workflow_id,
    )
    from steward_workflows.publishing import publish, seconds
    from steward_workflows.session import SessionWorkflow

START_TIMEOUT = timedelta(seconds=60)
# `start_job` heartbeats while it starts (a resumed job's checkpoint may take a while to copy): a start the
# server handed to an executor that was stopping (its last polls) is retried after this, not after
# START_TIMEOUT (docs/benchmarks.md "Lease": a minute's stall of a few starts after each executor restart).
START_HEARTBEAT_S = 10.0
POLL_MARGIN = timedelta(seconds=60)
SIGNAL_TIMEOUT = timedelta(seconds=30)
EXECUTOR_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=5),
                             non_retryable_error_types=["UnknownAttempt"])
SESSION_CAP_REASON = "session_cap"
# ADR 0069: a start waits while its executor is alive (runs begun before it keep the schedule-to-start loss)
START_WAITS_FOR_A_SILENT_EXECUTOR = "start-waits-for-a-silent-executor"
LIVENESS_TIMEOUT = timedelta(seconds=10)
LIVENESS_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=5),
                             non_retryable_error_types=["NoStore"])

# Validator refusals: their `type` tells the dispatcher whether to try again shortly.
NOT_STARTED = "NotStarted"
PROTECTED = "Protected"
ALREADY_STOPPING = "AlreadyStopping"


@dataclass(frozen=True)
class LostStart:
    """A start that did not happen: why, and whether the executor said so itself (`answered`: it is alive, so
    the ledger suspects none of its nodes, ADR 0087) or went silent."""

    reason: str
    answered: bool


@dataclass
class StopOrder:
    reason: str
    grace_s: float
    requested_at: float
    report: bool = True  # False for a cancelled job: the ledger already recorded its end
    for_job_id: str = ""


@workflow.defn(name="JobRun")
class JobRunWorkflow:
    def __init__(self) -> None:
        self._job: JobRunInput | None = None
        self._phase = "starting"
        self._started_at: float | None = None
        self._pid = 0
        self._protection_over = False
        self._revoked = False
        self._session_started = False
        self._cap_action: str | None = None
        self._cap_handled = False
        self._stop: StopOrder | None = None
        self._session: workflow.ChildWorkflowHandle[SessionWorkflow, SessionResult] | None = None
        self._outcome: ProcessOutcome | None = None
        self._lost_reason: str | None = None
        self._polls = 0
        self._poll_now = False
        self._can_ready = False
        self._waiting = ""

    # -- the run ----------------------------------------------------------------------------------

    @workflow.run
    async def run(self, job: JobRunInput) -> JobRunResult:
        self._job = job
        t = job.timings
        if job.carry is not None:
            self._resume_from_carry(job.carry)
        else:
            if workflow.patched(START_WAITS_FOR_A_SILENT_EXECUTOR):
                started_or_lost = await self._start_while_alive()
                if isinstance(started_or_lost, LostStart):
                    return await self._lost(started_or_lost.reason, answered=started_or_lost.answered)
                started = started_or_lost
            else:  # runs begun before ADR 0069: a start not taken within lost_after_s was lost
                try:
                    started = await workflow.execute_activity(
                        "start_job", job, task_queue=executor_task_queue(job.executor),
                        start_to_close_timeout=START_TIMEOUT, schedule_to_start_timeout=seconds(t.lost_after_s),
                        heartbeat_timeout=seconds(min(START_HEARTBEAT_S, t.heartbeat_timeout_s)),
                        retry_policy=EXECUTOR_RETRY, result_type=ProcessStarted,
                    )
                except ActivityError as err:
                    return await self._lost(f"executor '{job.executor}' did not start the attempt: {_cause(err)}")
            self._waiting = ""
            self._started_at, self._pid = started.started_at, started.pid
        self._phase = "running"
        timer = asyncio.create_task(self._protection_timer())
        if job.job_class == "interactive" and not self._session_started:
            await self._start_session()
        watcher = asyncio.create_task(self._watch(allow_continue_as_new=True))
        while True:
            await workflow.wait_condition(
                lambda: self._ended() or self._stop is not None or self._cap_pending() or self._can_ready
            )
            if self._ended() or self._stop is not None:
                break
            if self._cap_pending():
                await self._on_cap()
                continue
            timer.cancel()
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(replace(job, carry=self._carry()))
        if self._stop is not None and not self._ended():
            if watcher.done():  # it stopped for a continue-as-new that a stop overtook
                watcher = asyncio.create_task(self._watch(allow_continue_as_new=False))
            return await self._stop_saga(self._stop)
        if self._lost_reason is not None:
            return await self._lost(self._lost_reason)
        assert self._outcome is not None
        return await self._exited(self._outcome)

    async def _start_while_alive(self) -> ProcessStarted | LostStart:
        """ADR 0069: start the attempt, waiting as long as its executor is alive. The start waits in the
        executor's queue with no schedule-to-start timeout; every `lost_after_s` (then whenever the last
        heartbeat seen would turn stale) the run reads the executor's last recorded heartbeat, and the rule
        (`steward.domain.liveness.start_wait`) says whether the executor is silent (the attempt is lost: the
        start is cancelled, the reason returned) or busy (wait on; the placement keeps its GPUs)."""
        job = self._job
        assert job is not None
        t = job.timings
        start = workflow.start_activity(
            "start_job", job, task_queue=executor_task_queue(job.executor), start_to_close_timeout=START_TIMEOUT,
            heartbeat_timeout=seconds(min(START_HEARTBEAT_S, t.heartbeat_timeout_s)), retry_policy=EXECUTOR_RETRY,
            result_type=ProcessStarted,
        )
        if t.lost_after_s <= 0:  # no loss window (time-skipping tests): wait for the executor
            return await self._started(start)
        since = workflow.now().timestamp()
        recheck = t.lost_after_s
        while True:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(start.done, timeout=recheck)
            if start.done():
                return await self._started(start)
            verdict = await self._executor_verdict(since)
            if start.done():  # taken while we looked
                return await self._started(start)
            if verdict.lost:
                start.cancel()
                with contextlib.suppress(ActivityError, asyncio.CancelledError):
                    await start
                return LostStart(f"executor '{job.executor}' did not start the attempt: {verdict.reason}", False)
            waiting = f"starting: {verdict.reason}"
            if waiting.split(" (")[0] != self._waiting.split(" (")[0]:
                workflow.logger.info("job %s attempt %s %s", job.job_id, job.attempt, waiting)
            self._waiting = waiting
            recheck = verdict.recheck_s

    async def _executor_verdict(self, since: float) -> StartWait:
        """Whether the executor is silent or only busy (ADR 0069): its last recorded heartbeat, read by the
        worker (`executor_liveness`), through the rule. A log unreadable for a whole window says nothing alive."""
        job = self._job
        assert job is not None
        t = job.timings
        try:
            seen: ExecutorLiveness = await workflow.execute_activity(
                "executor_liveness", ExecutorRef(job.executor, job.job_id), task_queue=WORKFLOW_TASK_QUEUE,
                start_to_close_timeout=LIVENESS_TIMEOUT, schedule_to_close_timeout=seconds(t.lost_after_s),
                retry_policy=LIVENESS_RETRY, result_type=ExecutorLiveness,
            )
            heard_at, queued, seen_at = seen.heard_at, seen.queued, seen.read_at
        except ActivityError as err:
            workflow.logger.warning("no liveness of executor %s: %s", job.executor, _cause(err))
            heard_at, queued, seen_at = None, 0, 0.0
        now = workflow.now().timestamp()
        # judged when the log was read: a worker minutes behind on its workflow tasks (the 2,000-pod bench)
        # must not make a heartbeat it read fresh look stale
        return start_wait(job.executor, heard_at, now - since, seen_at or now, t.lost_after_s, queued)

    async def _started(self, start: workflow.ActivityHandle[ProcessStarted]) -> ProcessStarted | LostStart:
        job = self._job
        assert job is not None
        try:
            return await start
        except ActivityError as err:  # the executor's own error says it is alive; a timeout says nothing
            return LostStart(f"executor '{job.executor}' did not start the attempt: {_cause(err)}",
                             isinstance(err.cause, ApplicationError))

    async def _watch(self, allow_continue_as_new: bool) -> None:
        """Poll the executor until the attempt ends; a poll that fails (heartbeat timeout, then nobody
        taking the retry within `lost_after_s`) means the executor is lost."""
        job = self._job
        assert job is not None
        t = job.timings
        queued_since: float | None = None
        wait_s = t.lost_after_s  # how long a poll may wait to be taken before the executor is looked at
        while True:
            try:
                outcome: ProcessOutcome = await workflow.execute_activity(
                    "watch_job", WatchJob(job.job_id, job.attempt, job.job_class, t.watch_window_s),
                    task_queue=executor_task_queue(job.executor),
                    start_to_close_timeout=timedelta(seconds=t.watch_window_s) + POLL_MARGIN,
                    heartbeat_timeout=seconds(t.heartbeat_timeout_s),
                    schedule_to_start_timeout=seconds(wait_s), retry_policy=EXECUTOR_RETRY,
                    result_type=ProcessOutcome,
                )
            except ActivityError as err:
                if _not_taken(err) and workflow.patched(START_WAITS_FOR_A_SILENT_EXECUTOR):
                    # ADR 0069: a poll not taken within lost_after_s waits behind a busy executor unless it is silent
                    if queued_since is None:
                        queued_since = workflow.now().timestamp() - t.lost_after_s
                    verdict = await self._executor_verdict(queued_since)
                    if not verdict.lost:
                        workflow.logger.info("job %s attempt %s: watch %s", job.job_id, job.attempt, verdict.reason)
                        wait_s = verdict.recheck_s
                        continue
                    self._lost_reason = f"executor '{job.executor}' stopped answering: {verdict.reason}"
                    return
                self._lost_reason = f"executor '{job.executor}' stopped answering: {_cause(err)}"
                return
            queued_since, wait_s = None, t.lost_after_s
            self._polls += 1
            if outcome.status != "running":
                self._outcome = outcome
                return
            if t.watch_gap_s > 0:
                self._poll_now = False
                with contextlib.suppress(TimeoutError):
                    await workflow.wait_condition(
                        lambda: self._poll_now or (allow_continue_as_new and self._history_full()),
                        timeout=t.watch_gap_s)
            if allow_continue_as_new and self._history_full():
                self._can_ready = True  # between two polls: nothing outstanding to abandon
                return

    async def _protection_timer(self) -> None:
        """DESIGN.md "Funded occupancy": protected for `min_runtime` from each start (a durable timer)."""
        until = self._protected_until()
        if until is not None:
            delay = until - workflow.now().timestamp()
            if delay > 0:
                await workflow.sleep(delay)
        self._protection_over = True

    async def _start_session(self) -> None:
        job = self._job
        assert job is not None and self._started_at is not None
        self._session = await workflow.start_child_workflow(
            SessionWorkflow.run,
            SessionInput(job.job_id, job.attempt, workflow.info().workflow_id, self._started_at,
                         job.session_cap_s, job.timings, job.restored_from, job.correlation_id),
            id=session_workflow_id(job.job_id, job.attempt),
            parent_close_policy=ParentClosePolicy.ABANDON,
        )
        self._session_started = True

    async def _end_session(self) -> None:
        job = self._job
        assert job is not None
        if not self._session_started or self._cap_action is not None:  # none, or it ended at its cap
            return
        if self._session is not None and self._session.done():
            return
        try:
            await workflow.get_external_workflow_handle(session_workflow_id(job.job_id, job.attempt)).cancel()
        except Exception:
            workflow.logger.debug("session of %s attempt %s already closed", job.job_id, job.attempt)

    async def _on_cap(self) -> None:
        """DESIGN.md "Interactive sessions": at the cap, checkpointed and stopped (or made preemptible)."""
        job = self._job
        assert job is not None and self._cap_action is not None
        action = self._cap_action
        self._cap_handled = True
        await publish(ReachSessionCap(job.job_id, job.attempt, action),
                      f"cap-{job.job_id}-{job.attempt}", job.correlation_id)
        self._protection_over = True
        if action == "stop" and self._stop is None:
            self._stop = StopOrder(SESSION_CAP_REASON, job.timings.grace_s, workflow.now().timestamp())

    async def _stop_saga(self, order: StopOrder) -> JobRunResult:
        """Checkpoint request, grace period, stop; then record the preemption with its evidence."""
        job = self._job
        assert job is not None
        self._phase = "stopping"
        queue = executor_task_queue(job.executor)
        lost_after = seconds(job.timings.lost_after_s)
        signalled = True
        try:
            await workflow.execute_activity(
                "signal_job", SignalJob(job.job_id, job.attempt, reason=order.reason, for_job_id=order.for_job_id),
                task_queue=queue,
                start_to_close_timeout=SIGNAL_TIMEOUT, schedule_to_start_timeout=lost_after,
                retry_policy=EXECUTOR_RETRY,
            )
        except ActivityError:
            signalled = False  # the executor is gone; the watcher will say so
        self._poll_now = True
        grace_expired = False
        if signalled:
            try:
                await workflow.wait_condition(self._ended, timeout=max(order.grace_s, 0.001))
            except TimeoutError:
                grace_expired = True
                with contextlib.suppress(ActivityError):
                    await workflow.execute_activity(
                        "signal_job", SignalJob(job.job_id, job.attempt, kill=True), task_queue=queue,
                        start_to_close_timeout=SIGNAL_TIMEOUT, schedule_to_start_timeout=lost_after,
                        retry_policy=EXECUTOR_RETRY,
                    )
                self._poll_now = True
        await workflow.wait_condition(self._ended)
        if self._lost_reason is not None:
            return await self._lost(f"{self._lost_reason} (during a stop: {order.reason})")
        outcome = self._outcome
        assert outcome is not None
        await self._end_session()
        self._phase = "ended"
        if not order.report:
            return JobRunResult(job.job_id, job.attempt, "cancelled", outcome.exit_code)
        evidence = {
            "requested_at": order.requested_at, "grace_s": order.grace_s, "signalled": signalled,
            "stopped_at": outcome.ended_at or workflow.now().timestamp(), "killed": outcome.killed,
            "pid": self._pid, "protected_until": self._protected_until(), "workflow_id": workflow.info().workflow_id,
        }
        if order.for_job_id:
            evidence["for_job_id"] = order.for_job_id
        if outcome.ended_at:  # the executor's time of the stop (Slurm's EndTime): where the books end the run
            evidence["ended_at"] = outcome.ended_at
        await publish(
            ReportJobPreempted(job.job_id, job.attempt, order.reason, outcome.exit_code, grace_expired,
                               outcome.checkpoint_path, outcome.checkpoint_at, evidence),
            f"preempted-{job.job_id}-{job.attempt}", job.correlation_id,
        )
        kind = "session_cap" if order.reason == SESSION_CAP_REASON else "preempted"
        return JobRunResult(job.job_id, job.attempt, kind, outcome.exit_code)

    async def _exited(self, outcome: ProcessOutcome) -> JobRunResult:
        job = self._job
        assert job is not None
        await self._end_session()
        self._phase = "ended"
        if outcome.status != "exited":  # requeued: no exit of the job's (ADR 0083: a node's refusal says why)
            return await self._lost(outcome.reason or f"the process vanished without an exit code ({outcome.status})",
                                    answered=True)
        await publish(ReportJobExited(job.job_id, job.attempt, outcome.exit_code, outcome.ended_at),
                      f"exited-{job.job_id}-{job.attempt}", job.correlation_id)
        return JobRunResult(job.job_id, job.attempt, "exited", outcome.exit_code)

    async def _lost(self, reason: str, answered: bool = False) -> JobRunResult:
        """The attempt is lost: recorded once (the message id names the attempt), then requeued by the ledger;
        `answered`: the executor said why itself (ADR 0087: none of its nodes is suspected)."""
        job = self._job
        assert job is not None
        await self._end_session()
        self._phase = "ended"
        await publish(ReportJobLost(job.job_id, job.attempt, reason, executor_answered=answered),
                      f"lost-{job.job_id}-{job.attempt}", job.correlation_id)
        return JobRunResult(job.job_id, job.attempt, "lost", None)

    # -- state ------------------------------------------------------------------------------------

    def _protected_until(self) -> float | None:
        job = self._job
        if job is None or self._started_at is None:
            return None
        return self._started_at + (job.protection_s if job.funded else 0.0)

    def _protected(self) -> bool:
        """DESIGN.md: "nothing preempts it for fairness during that time"; an idle session's protection
        is revoked; at a session's cap it ends."""
        until = self._protected_until()
        if self._protection_over or self._revoked or until is None:
            return False
        return workflow.now().timestamp() < until

    def _ended(self) -> bool:
        return self._outcome is not None or self._lost_reason is not None

    def _cap_pending(self) -> bool:
        return self._cap_action is not None and not self._cap_handled

    def _history_full(self) -> bool:
        job = self._job
        if job is None or self._phase != "running" or self._stop is not None:
            return False
        info = workflow.info()
        return info.get_current_history_length() > job.timings.max_history or info.is_continue_as_new_suggested()

    def _carry(self) -> RunCarry:
        assert self._started_at is not None
        return RunCarry(self._started_at, self._pid, self._protection_over, self._revoked, self._session_started,
                        self._cap_handled)

    def _resume_from_carry(self, carry: RunCarry) -> None:
        self._started_at, self._pid = carry.started_at, carry.pid
        self._protection_over, self._revoked = carry.protection_over, carry.revoked
        self._session_started, self._cap_handled = carry.session_started, carry.cap_handled

    # -- messages ---------------------------------------------------------------------------------

    @workflow.update
    async def request_preemption(self, request: PreemptionRequest) -> PreemptionAccepted:
        job = self._job
        assert job is not None
        grace = request.grace_s if request.grace_s >= 0 else job.timings.grace_s
        self._stop = StopOrder(request.reason, grace, workflow.now().timestamp(), True, request.for_job_id)
        return PreemptionAccepted(job.job_id, job.attempt, request.reason, grace)

    @request_preemption.validator
    def _validate_preemption(self, request: PreemptionRequest) -> None:
        """Refuse while protected (DESIGN.md "Funded occupancy"); a refused update leaves no history."""
        if self._phase == "starting" or self._started_at is None:
            raise ApplicationError("the attempt has not started yet", type=NOT_STARTED)
        if self._stop is not None or self._phase in ("stopping", "ended"):
            raise ApplicationError(f"the attempt is already {self._phase}", type=ALREADY_STOPPING)
        if self._protected():
            until = self._protected_until()
            assert until is not None
            left = until - workflow.now().timestamp()
            raise ApplicationError(f"protected for {left:.1f} s more", {"protected_until": until}, type=PROTECTED)

    @workflow.signal
    def session_cap_reached(self, cap: CapReached) -> None:
        if self._cap_action is None:
            self._cap_action = cap.action

    @workflow.signal
    def revoke_protection(self, revocation: Revocation) -> None:
        self._revoked = True

    @workflow.signal
    def cancel(self, request: CancelRun) -> None:
        """The job was cancelled (already recorded): stop the process, report nothing more."""
        if self._stop is None:
            grace = self._job.timings.grace_s if self._job is not None else 0.0
            self._stop = StopOrder("cancelled", grace, workflow.now().timestamp(), report=False)

    @workflow.query
    def status(self) -> RunStatus:
        job = self._job
        assert job is not None
        return RunStatus(job.job_id, job.attempt, self._phase, self._started_at, self._protected_until(),
                         self._protected(), self._stop.reason if self._stop else "", self._polls, self._waiting)


def _not_taken(err: ActivityError) -> bool:
    """The activity waited in its executor's queue for its whole schedule-to-start timeout."""
    cause = err.cause
    return isinstance(cause, ActivityTimeout) and cause.type == TimeoutType.SCHEDULE_TO_START


def _cause(err: ActivityError) -> str:
    cause = err.cause
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(err)
