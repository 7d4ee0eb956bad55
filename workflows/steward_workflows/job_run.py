"""JobRunWorkflow: one workflow per placed attempt of a job.

It runs the job on its executor (a long activity that heartbeats), and when the executor is lost (no
heartbeat) it records the attempt as lost through a command, so the store stays the one record.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from steward_workflows.contracts import (
        JobRunInput,
        JobRunResult,
        LostReport,
        ProcessOutcome,
        executor_task_queue,
    )

HEARTBEAT_TIMEOUT = timedelta(seconds=30)
RUN_LIMIT = timedelta(days=30)


@workflow.defn(name="JobRun")
class JobRunWorkflow:
    @workflow.run
    async def run(self, job: JobRunInput) -> JobRunResult:
        try:
            outcome: ProcessOutcome = await workflow.execute_activity(
                "run_job",
                job,
                task_queue=executor_task_queue(job.executor),
                start_to_close_timeout=RUN_LIMIT,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=1),
                result_type=ProcessOutcome,
            )
        except ActivityError as err:
            await workflow.execute_activity(
                "report_lost",
                LostReport(job.job_id, job.attempt, f"executor lost: {err.cause or err}", job.correlation_id),
                start_to_close_timeout=timedelta(minutes=5),
            )
            return JobRunResult(job.job_id, job.attempt, "lost", None)
        return JobRunResult(job.job_id, job.attempt, "exited", outcome.exit_code)
