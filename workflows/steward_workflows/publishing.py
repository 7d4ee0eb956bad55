"""Workflow-side helpers: every outcome leaves a workflow as a domain command published by an activity."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from steward.domain.commands import Command, command_to_dict
    from steward_workflows.payloads import WORKFLOW_TASK_QUEUE, CommandMessage

PUBLISH_TIMEOUT = timedelta(seconds=30)
PUBLISH_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10))


# ADR 0074: a workflow's commands leave through a local activity (run by the worker that runs the workflow, its
# result a marker in the history): no activity task on the server, no workflow task to hear its end. Runs begun
# before it keep the activity task (their histories replay unchanged).
PUBLISH_LOCALLY = "publish-as-a-local-activity"


async def publish(command: Command, message_id: str, correlation_id: str = "") -> None:
    """Publish `command` (retried until Kafka takes it; the ledger records a message id once)."""
    message = CommandMessage(command.TYPE, command_to_dict(command), message_id, correlation_id)
    if workflow.patched(PUBLISH_LOCALLY):
        await workflow.execute_local_activity(
            "publish_command", message, start_to_close_timeout=PUBLISH_TIMEOUT, retry_policy=PUBLISH_RETRY)
        return
    await workflow.execute_activity(
        "publish_command",
        message,
        task_queue=WORKFLOW_TASK_QUEUE,
        start_to_close_timeout=PUBLISH_TIMEOUT,
        retry_policy=PUBLISH_RETRY,
    )


def seconds(value: float) -> timedelta | None:
    """A timeout in seconds; 0 or less turns it off."""
    return timedelta(seconds=value) if value > 0 else None
