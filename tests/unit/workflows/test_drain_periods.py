"""NodeDrain and PeriodClose under time skipping."""

from __future__ import annotations

import pytest

from steward_workflows.drain import NodeDrainWorkflow, NodeResumeWorkflow
from steward_workflows.payloads import (
    WORKFLOW_TASK_QUEUE,
    DrainInput,
    JobOnNode,
    NodeOccupancy,
    NodeRef,
    PeriodCloseInput,
    PeriodFigures,
    ResumeInput,
)
from steward_workflows.periods import PeriodCloseWorkflow
from tests.unit.workflows.fakes import EXECUTOR, harness, run

pytestmark = pytest.mark.timeout(90)


def test_drain_waits_for_protection_then_asks_for_preemption_and_records_the_drain() -> None:
    async def scenario() -> None:
        async with harness() as h:
            now = await h.now()
            busy = NodeOccupancy("n0", "draining", [
                JobOnNode("j1", 1, "RUNNING", now + 600, False, True),
                JobOnNode("j2", 2, "RUNNING", now - 1, False, False),
            ])
            h.acts.occupancy = [busy, busy, busy, busy, NodeOccupancy("n0", "draining", [])]
            result = await (await h.client.start_workflow(
                NodeDrainWorkflow.run,
                DrainInput("n0", EXECUTOR, "disk", poll_s=300.0, grace_s=60.0, stop_jobs=True),
                id="drain-n0-1", task_queue=WORKFLOW_TASK_QUEUE)).result()
            assert result.outcome == "drained"
            assert h.executor.drained == [NodeRef("n0", "disk")]  # the operator's reason reaches the executor
            asked = h.acts.of_type("RequestPreemption")
            assert [(a.payload["job_id"], a.payload["attempt"], a.payload["reason"]) for a in asked] == [
                ("j2", 2, "drain"), ("j1", 1, "drain")]
            assert asked[1].at >= now + 600  # never inside its protection
            assert h.acts.types()[-1] == "ReportNodeDrained"

    run(scenario)


def test_a_resumed_node_ends_its_drain() -> None:
    async def scenario() -> None:
        async with harness() as h:
            h.acts.occupancy = [NodeOccupancy("n0", "ready", [])]
            result = await (await h.client.start_workflow(
                NodeDrainWorkflow.run, DrainInput("n0", EXECUTOR), id="drain-n0-2",
                task_queue=WORKFLOW_TASK_QUEUE)).result()
            assert result.outcome == "resumed" and h.acts.published == []

    run(scenario)


@pytest.mark.parametrize(("state", "executor", "outcome", "resumed"), [
    ("ready", EXECUTOR, "resumed", ["n0"]),          # the executor gives the node back
    ("unhealthy", EXECUTOR, "resumed", ["n0"]),      # not Steward's to judge: the executor keeps its own downs
    ("draining", EXECUTOR, "drained again", []),     # a later drain wins
    ("drained", EXECUTOR, "drained again", []),
    ("unknown", "", "unknown node", []),
])
def test_a_resumed_node_is_given_back_by_its_executor(state: str, executor: str, outcome: str,
                                                       resumed: list[str]) -> None:
    async def scenario() -> None:
        async with harness() as h:
            h.acts.occupancy = [NodeOccupancy("n0", state, [], executor)]
            result = await (await h.client.start_workflow(
                NodeResumeWorkflow.run, ResumeInput("n0"), id="resume-n0-1", task_queue=WORKFLOW_TASK_QUEUE)).result()
            assert (result, h.executor.resumed) == (outcome, resumed)
            assert h.acts.published == []  # nothing to record: the ledger already holds NodeResumed

    run(scenario)


def test_period_close_records_owed_and_delivered_once_per_period() -> None:
    async def scenario() -> None:
        async with harness() as h:
            h.acts.figures = PeriodFigures(0, 0, 100.0, {"a1": {"owed_gpu_s": 10.0, "delivered_gpu_s": 8.0}})
            result = await (await h.client.start_workflow(
                PeriodCloseWorkflow.run, PeriodCloseInput(86_400.0, at=2 * 86_400.0 + 300), id="period-close",
                task_queue=WORKFLOW_TASK_QUEUE)).result()
            assert result.period_id == "19700102T000000Z-19700103T000000Z" and result.allocations == 1
            (closed,) = h.acts.of_type("ClosePeriod")
            assert closed.message.message_id == f"period-{result.period_id}"
            assert closed.payload["start"] == 86_400.0 and closed.payload["allocations"]["a1"]["owed_gpu_s"] == 10.0

    run(scenario)
