"""Activities of the workflow worker: they emit commands through Kafka (never write the store)."""

from __future__ import annotations

import asyncio

from temporalio import activity

from steward.bus.envelope import command_envelope
from steward.bus.kafka import CommandPublisher
from steward.domain.commands import ReportJobExited
from steward_workflows.contracts import LostReport

LOST_EXIT_CODE = -1


class WorkerActivities:
    def __init__(self, publisher: CommandPublisher) -> None:
        self.publisher = publisher

    @activity.defn(name="report_lost")
    async def report_lost(self, report: LostReport) -> None:
        env = command_envelope(
            ReportJobExited(report.job_id, report.attempt, LOST_EXIT_CODE),
            actor="temporal-worker", role="system", correlation_id=report.correlation_id or None,
            message_id=f"lost-{report.job_id}-{report.attempt}",
        )
        await asyncio.to_thread(self.publisher.publish, env)
