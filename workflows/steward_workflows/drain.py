"""NodeDrainWorkflow ("NodeDrain"): an operator's drain request carried out (issue 3 "Draining"), and
NodeResumeWorkflow ("NodeResume"): a resumed node given back by its executor.

The ledger already refuses new placements on a draining node. This workflow tells the node's executor,
waits for the node to empty and records `NodeDrained`; a node resumed meanwhile ends it. The jobs are
stopped as their protection ends (never inside it: DESIGN.md "Funded occupancy") by the scheduler's
policy cycle (`Stop(reason="drain")`); with `stop_jobs` this workflow asks for those preemptions itself
(reason `drain`: checkpoint, grace, stop, requeue — the JobRun does the saga).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from steward.domain.commands import ReportNodeDrained, RequestPreemption
    from steward_workflows.payloads import (
        DrainInput,
        DrainResult,
        NodeOccupancy,
        NodeRef,
        ResumeInput,
        executor_task_queue,
    )
    from steward_workflows.publishing import PUBLISH_RETRY, publish, seconds


async def tell_executor(activity: str, node_id: str, executor: str, lost_after_s: float, retry: RetryPolicy,
                        reason: str = "") -> bool:
    """Run a node activity (`drain_node`, `resume_node`) on the node's executor, with the drain's reason; False when
    it did not take it (gone longer than `lost_after_s`, or failing past `retry`)."""
    try:
        await workflow.execute_activity(
            activity, NodeRef(node_id, reason), task_queue=executor_task_queue(executor),
            start_to_close_timeout=timedelta(seconds=30), schedule_to_start_timeout=seconds(lost_after_s),
            retry_policy=retry,
        )
    except ActivityError:
        workflow.logger.warning("executor %s did not take %s of %s", executor, activity, node_id)
        return False
    return True


@workflow.defn(name="NodeDrain")
class NodeDrainWorkflow:
    @workflow.run
    async def run(self, inp: DrainInput) -> DrainResult:
        await tell_executor("drain_node", inp.node_id, inp.executor, inp.lost_after_s, PUBLISH_RETRY, inp.reason)
        requested: list[str] = []
        while True:
            occ: NodeOccupancy = await workflow.execute_activity(
                "node_occupancy", NodeRef(inp.node_id), start_to_close_timeout=timedelta(seconds=60),
                retry_policy=PUBLISH_RETRY, result_type=NodeOccupancy,
            )
            if occ.state != "draining":
                return DrainResult(inp.node_id, "resumed" if occ.state == "ready" else "unknown", requested)
            if not occ.jobs:
                await publish(ReportNodeDrained(inp.node_id), f"drained-{inp.node_id}-{workflow.info().workflow_id}")
                return DrainResult(inp.node_id, "drained", requested)
            now = workflow.now().timestamp()
            wake = now + inp.poll_s
            for job in occ.jobs:
                key = f"{job.job_id}-{job.attempt}"
                if not inp.stop_jobs or job.state != "RUNNING" or job.preempting or key in requested:
                    continue
                until = job.protected_until or now
                if until > now:
                    wake = min(wake, until)
                    continue
                evidence = {"node": inp.node_id, "node_state": occ.state, "protected_until": job.protected_until,
                            "drain_reason": inp.reason}
                await publish(RequestPreemption(job.job_id, "drain", job.attempt, inp.grace_s, True, "", evidence),
                              f"drain-{inp.node_id}-{key}")
                requested.append(key)
            await workflow.sleep(max(wake - workflow.now().timestamp(), 0.5))


RESUME_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30),
                           maximum_attempts=10)


@workflow.defn(name="NodeResume")
class NodeResumeWorkflow:
    """A node an operator resumed (`NodeResumed`) is given back by the executor that holds it out of service for
    Steward: the node agent forgets its drain, Slurm resumes a node Steward drained, Kubernetes uncordons a node
    Steward cordoned (issue 23 "Drains from Steward become Slurm drains", and their end). A drain someone else
    made in the cluster manager stays theirs. A node drained again meanwhile is left alone."""

    @workflow.run
    async def run(self, inp: ResumeInput) -> str:
        occ: NodeOccupancy = await workflow.execute_activity(
            "node_occupancy", NodeRef(inp.node_id), start_to_close_timeout=timedelta(seconds=60),
            retry_policy=PUBLISH_RETRY, result_type=NodeOccupancy,
        )
        if occ.state in ("draining", "drained"):
            return "drained again"
        if not occ.executor:
            return "unknown node"
        taken = await tell_executor("resume_node", inp.node_id, occ.executor, inp.lost_after_s, RESUME_RETRY)
        return "resumed" if taken else "not taken"
