"""Record the histories that tests/replay/test_replay.py replays: `python -m tests.replay.record [NAME ...]`
(only the named scenarios when names are given: the others keep the history their older code recorded).

Run it after a deliberate, compatible change to a workflow (and say so in the change); never to make a
failing replay pass — a failing replay means running workflows would break (use `workflow.patched`).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from temporalio.client import WorkflowHandle

from steward_workflows.drain import NodeDrainWorkflow
from steward_workflows.job_run import JobRunWorkflow
from steward_workflows.payloads import (
    WORKFLOW_TASK_QUEUE,
    DrainInput,
    JobOnNode,
    NodeOccupancy,
    PeriodCloseInput,
    PeriodFigures,
    PreemptionRequest,
    Revocation,
    UtilisationSignal,
    session_workflow_id,
)
from steward_workflows.periods import PeriodCloseWorkflow
from steward_workflows.session import SessionWorkflow
from tests.unit.workflows.fakes import EXECUTOR, FakeExecutor, Harness, harness, job, skip, timings_for_tests

HISTORIES = Path(__file__).resolve().parent / "histories"


async def save(h: Harness, workflow_id: str, name: str) -> None:
    history = await h.client.get_workflow_handle(workflow_id).fetch_history()
    (HISTORIES / f"{name}.json").write_text(history.to_json())


async def start(h: Harness, **over: object) -> WorkflowHandle[JobRunWorkflow, object]:
    inp = job(**over)  # type: ignore[arg-type]
    handle = await h.client.start_workflow(JobRunWorkflow.run, inp, id="job-j1-attempt-1",
                                           task_queue=WORKFLOW_TASK_QUEUE)
    await h.running(handle)
    return handle  # type: ignore[return-value]


async def preempted_after_protection(suffix: str = "") -> None:
    async with harness() as h:
        handle = await start(h, protection_s=600.0)
        await h.env.sleep(skip(601))
        await handle.execute_update(JobRunWorkflow.request_preemption, PreemptionRequest("fair_share", "p1", 30.0))
        await handle.result()
        await save(h, "job-j1-attempt-1", f"job_run_preempted{suffix}")


async def grace_expired() -> None:
    async with harness(FakeExecutor(on_checkpoint="ignore")) as h:
        handle = await start(h, protection_s=0.0)
        await handle.execute_update(JobRunWorkflow.request_preemption, PreemptionRequest("fair_share", grace_s=45))
        await handle.result()
        await save(h, "job-j1-attempt-1", "job_run_grace_expired")


async def exited(suffix: str = "") -> None:
    async with harness() as h:
        handle = await start(h)
        h.executor.procs[("j1", 1)].exit(0)
        await handle.result()
        await save(h, "job-j1-attempt-1", f"job_run_exited{suffix}")


async def lost() -> None:
    async with harness() as h:
        handle = await start(h, timings=timings_for_tests(heartbeat_timeout_s=2.0, lost_after_s=5.0))
        await h.eventually(lambda: h.executor.procs[("j1", 1)].watches >= 1)
        await h.stop_executor()
        await handle.result()
        await save(h, "job-j1-attempt-1", "job_run_lost")


async def start_waited() -> None:
    """ADR 0069: the start waits behind a live executor past lost_after_s (two looks), then runs and exits."""
    async with harness(with_executor=False) as h:
        h.acts.alive, h.acts.queued = True, 3
        handle = await h.client.start_workflow(
            JobRunWorkflow.run, job(timings=timings_for_tests(heartbeat_timeout_s=2.0, lost_after_s=2.0)),
            id="job-j1-attempt-1", task_queue=WORKFLOW_TASK_QUEUE)
        await h.eventually(lambda: len(h.acts.looks) >= 2, timeout=30)
        await h.start_executor()
        await h.running(handle)
        h.executor.procs[("j1", 1)].exit(0)
        await handle.result()
        await save(h, "job-j1-attempt-1", "job_run_start_waited")


async def start_lost_silent() -> None:
    """ADR 0069: the start waits; the executor's last heartbeat turns stale: lost, the start cancelled."""
    async with harness(with_executor=False) as h:
        h.acts.alive = True
        handle = await h.client.start_workflow(
            JobRunWorkflow.run, job(timings=timings_for_tests(heartbeat_timeout_s=2.0, lost_after_s=2.0)),
            id="job-j1-attempt-1", task_queue=WORKFLOW_TASK_QUEUE)
        await h.eventually(lambda: len(h.acts.looks) >= 1, timeout=30)
        h.acts.heard_at, h.acts.alive = h.acts.looks[-1], False
        await handle.result()
        await save(h, "job-j1-attempt-1", "job_run_start_lost_silent")


async def continued_as_new() -> None:
    async with harness() as h:
        handle = await start(h, protection_s=600.0, timings=timings_for_tests(max_history=40))
        first = (await handle.describe()).run_id
        for _ in range(12):
            await handle.signal(JobRunWorkflow.revoke_protection, Revocation("idle"))
        fresh = h.client.get_workflow_handle("job-j1-attempt-1")
        await h.eventually(lambda: _changed(fresh, first))
        history = await h.client.get_workflow_handle("job-j1-attempt-1", run_id=first).fetch_history()
        (HISTORIES / "job_run_continued_as_new.json").write_text(history.to_json())
        h.executor.procs[("j1", 1)].exit(0)
        await handle.result()


async def _changed(handle: WorkflowHandle[object, object], first: str | None) -> bool:
    return (await handle.describe()).run_id != first


async def session_cap(suffix: str = "") -> None:
    async with harness() as h:
        timings = timings_for_tests(watch_gap_s=600.0, idle_limit_s=1800.0, idle_grace_s=600.0)
        handle = await start(h, job_class="interactive", session_cap_s=8 * 3600.0, protection_s=8 * 3600.0,
                             resumable=True, timings=timings)
        await h.eventually(lambda: bool(h.acts.of_type("OpenSession")))
        session = h.client.get_workflow_handle(session_workflow_id("j1", 1))
        await session.signal(SessionWorkflow.utilisation, UtilisationSignal(True, await h.now()))
        await h.env.sleep(skip(1805))
        await session.signal(SessionWorkflow.utilisation, UtilisationSignal(False, await h.now()))
        await handle.result()
        await save(h, "job-j1-attempt-1", f"job_run_session_cap{suffix}")
        await save(h, session_workflow_id("j1", 1), f"session_cap_with_idle{suffix}")


async def drain(suffix: str = "") -> None:
    async with harness() as h:
        now = await h.now()
        busy = NodeOccupancy("n0", "draining", [JobOnNode("j1", 1, "RUNNING", now + 600, False, True)])
        h.acts.occupancy = [busy, busy, busy, NodeOccupancy("n0", "draining", [])]
        drain_input = DrainInput("n0", EXECUTOR, "disk", 300.0, stop_jobs=True)
        await (await h.client.start_workflow(NodeDrainWorkflow.run, drain_input, id="drain-n0-1",
                                             task_queue=WORKFLOW_TASK_QUEUE)).result()
        await save(h, "drain-n0-1", f"node_drain{suffix}")


async def period(suffix: str = "") -> None:
    async with harness() as h:
        h.acts.figures = PeriodFigures(0, 0, 100.0, {"a1": {"owed_gpu_s": 10.0, "delivered_gpu_s": 8.0}})
        await (await h.client.start_workflow(PeriodCloseWorkflow.run, PeriodCloseInput(86_400.0, 2 * 86_400.0 + 1),
                                             id="period-close", task_queue=WORKFLOW_TASK_QUEUE)).result()
        await save(h, "period-close", f"period_close{suffix}")


async def published_locally() -> None:
    """ADR 0074: the commands leave through a local activity (the patch marker, then markers, no activity tasks):
    the histories of every workflow that publishes, recorded again under new names (the old ones are kept)."""
    for scenario in (preempted_after_protection, exited, session_cap, drain, period):
        await scenario(PUBLISHED_LOCALLY)


PUBLISHED_LOCALLY = "_publish_local"

SCENARIOS: list[Callable[[], Awaitable[None]]] = [
    preempted_after_protection, grace_expired, exited, lost, continued_as_new, session_cap, drain, period,
    start_waited, start_lost_silent, published_locally,
]


async def main(names: list[str]) -> None:
    """Record every scenario, or only those named (`python -m tests.replay.record start_waited`): a history
    recorded by an older workflow (before a `workflow.patched` change) is kept as the old code's proof."""
    HISTORIES.mkdir(parents=True, exist_ok=True)
    unknown = set(names) - {s.__name__ for s in SCENARIOS}
    if unknown:
        raise SystemExit(f"no such scenario: {', '.join(sorted(unknown))}")
    for scenario in SCENARIOS:
        if names and scenario.__name__ not in names:
            continue
        await asyncio.wait_for(scenario(), 120)
        print(f"recorded {scenario.__name__}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
