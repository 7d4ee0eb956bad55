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


async def publish(command: Command, message_id: str, correlation_id: str = "") -> None:
    """Publish `command` (retried until Kafka takes it; the ledger records a message id once)."""
    await workflow.execute_activity(
        "publish_command",
        CommandMessage(command.TYPE, command_to_dict(command), message_id, correlation_id),
        task_queue=WORKFLOW_TASK_QUEUE,
        start_to_close_timeout=PUBLISH_TIMEOUT,
        retry_policy=PUBLISH_RETRY,
    )


def seconds(value: float) -> timedelta | None:
    """A timeout in seconds; 0 or less turns it off."""
    return timedelta(seconds=value) if value > 0 else None
