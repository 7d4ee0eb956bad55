"""The DeliverNotification workflow (ADR 0050): one notification delivery, retried by Temporal with the policy
frozen into its input; when the retries are spent (or the receiver refuses for good), the delivery is recorded
as given up. Its activities and the notifier that starts it are `steward_workflows.notifications`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from steward.domain.notifications import Delivery
    from steward.notify.settings import NotifySettings

UNDELIVERABLE = "Undeliverable"  # the receiver refused for good: not retried


@dataclass(frozen=True, slots=True)
class DeliveryRetries:
    max_attempts: int = 8
    first_retry_s: float = 2.0
    backoff: float = 2.0
    max_retry_s: float = 300.0

    @staticmethod
    def of(settings: NotifySettings) -> DeliveryRetries:
        return DeliveryRetries(settings.max_attempts, settings.first_retry_s, settings.backoff, settings.max_retry_s)


@dataclass(frozen=True, slots=True)
class DeliveryJob:
    delivery: Delivery
    retries: DeliveryRetries


@dataclass(frozen=True, slots=True)
class DeliveryGivenUp:
    delivery: Delivery
    attempts: int
    error: str


def workflow_id(delivery_id: str) -> str:
    return f"notify-{delivery_id}"


@workflow.defn(name="DeliverNotification")
class DeliverNotificationWorkflow:
    @workflow.run
    async def run(self, job: DeliveryJob) -> str:
        r = job.retries
        policy = RetryPolicy(initial_interval=timedelta(seconds=r.first_retry_s), backoff_coefficient=r.backoff,
                             maximum_interval=timedelta(seconds=max(r.max_retry_s, r.first_retry_s)),
                             maximum_attempts=r.max_attempts, non_retryable_error_types=[UNDELIVERABLE])
        try:
            await workflow.execute_activity("deliver_notification", job.delivery, retry_policy=policy,
                                            start_to_close_timeout=timedelta(seconds=60))
            return "delivered"
        except ActivityError as err:
            cause = err.cause
            attempts = r.max_attempts
            message = str(cause or err)
            if isinstance(cause, ApplicationError):
                message = cause.message
                if cause.details and isinstance(cause.details[0], int):
                    attempts = cause.details[0]
            await workflow.execute_activity(
                "record_delivery_failed", DeliveryGivenUp(job.delivery, attempts, message),
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=60)))
            return "failed"


