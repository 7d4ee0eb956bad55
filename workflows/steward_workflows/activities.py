"""Activities of the workflow worker: they emit commands through Kafka (never write the store) and read
the store where a workflow needs facts (a node's jobs, a period's history)."""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.exceptions import ApplicationError

from steward.bus.envelope import Envelope, command_envelope
from steward.bus.identity import SYSTEM_ROLE, WORKFLOWS_ACTOR
from steward.bus.kafka import CommandPublisher
from steward.domain.commands import ReportJobLost, command_from_dict
from steward.domain.errors import DomainError
from steward_workflows.facts import StoreFacts
from steward_workflows.payloads import (
    CommandMessage,
    ExecutorLiveness,
    ExecutorRef,
    LostReport,
    NodeOccupancy,
    NodeRef,
    PeriodFigures,
    PeriodWindow,
)

LOST_EXIT_CODE = -1


class WorkerActivities:
    def __init__(self, publisher: CommandPublisher, facts: StoreFacts | None = None) -> None:
        self.publisher = publisher
        self.facts = facts

    @activity.defn(name="publish_command")
    async def publish_command(self, message: CommandMessage) -> None:
        """Publish a workflow's command; a malformed one is a bug, not retried."""
        try:
            command = command_from_dict(message.type, message.payload)
        except DomainError as err:
            raise ApplicationError(f"malformed {message.type}: {err.message}", type="MalformedCommand",
                                   non_retryable=True) from err
        env = command_envelope(command, actor=message.actor, role="system",
                               correlation_id=message.correlation_id or None, message_id=message.message_id)
        await asyncio.to_thread(self.publisher.publish, env)

    @activity.defn(name="report_lost")
    async def report_lost(self, report: LostReport) -> None:
        """Kept for histories recorded by the walking skeleton; now a `ReportJobLost` (requeued once)."""
        env: Envelope = command_envelope(
            ReportJobLost(report.job_id, report.attempt, report.reason),
            actor=WORKFLOWS_ACTOR, role=SYSTEM_ROLE, correlation_id=report.correlation_id or None,
            message_id=f"lost-{report.job_id}-{report.attempt}",
        )
        await asyncio.to_thread(self.publisher.publish, env)

    @activity.defn(name="node_occupancy")
    async def node_occupancy(self, node: NodeRef) -> NodeOccupancy:
        if self.facts is None:
            raise ApplicationError("this worker reads no store", type="NoStore", non_retryable=True)
        return await asyncio.to_thread(self.facts.node_occupancy, node.node_id)

    @activity.defn(name="executor_liveness")
    async def executor_liveness(self, ref: ExecutorRef) -> ExecutorLiveness:
        """The executor's last recorded heartbeat, for a start that waits (ADR 0069)."""
        if self.facts is None:
            raise ApplicationError("this worker reads no store", type="NoStore", non_retryable=True)
        return await asyncio.to_thread(self.facts.executor_liveness, ref.executor, ref.job_id)

    @activity.defn(name="compute_period")
    async def compute_period(self, window: PeriodWindow) -> PeriodFigures:
        if self.facts is None:
            raise ApplicationError("this worker reads no store", type="NoStore", non_retryable=True)
        return await asyncio.to_thread(self.facts.period, window.start, window.end)
