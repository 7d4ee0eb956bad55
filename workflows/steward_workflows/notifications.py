"""Durable, at-least-once notification delivery (issue 24 "Being told", ADR 0050).

The notifier (`run_notifier`, a task of the worker process) tails the event store from its own position (a
`consumer_offsets` row, consumer "notifier"), folds each new event with the ledger's own `evolve`, asks the
domain's rules (`steward.domain.notifications`) which deliveries it makes, and starts one
`DeliverNotification` workflow per delivery, its workflow id the delivery's id (a second start after a crash
is refused by Temporal, and the receiver drops a second copy by the same id). Its position moves only after
the starts of a batch, so a crash re-reads the batch: at least once, never lost. The ledger never waits on
any of it: the notifier only reads the log.

The workflow (`steward_workflows.delivery`) runs the `deliver_notification` activity with the retry policy
frozen into its input (backoff up to `max_attempts`); when it gives up, `record_delivery_failed` publishes a
`RecordDeliveryFailed` command (message id `delivery-failed-<id>`: recorded once), which operators list
(`steward notify failed`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from temporalio import activity
from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError

from steward.bus.envelope import Envelope, command_envelope
from steward.bus.identity import SYSTEM_ROLE, WORKFLOWS_ACTOR
from steward.domain.commands import RecordDeliveryFailed
from steward.domain.notifications import Delivery
from steward.notify import metrics
from steward.notify.log import NotifierFold, first_position_of, load_position, save_position
from steward.notify.senders import DeliveryError, deliver
from steward.notify.settings import NotifySettings
from steward.store.eventstore import EventStore
from steward_workflows.delivery import (
    UNDELIVERABLE,
    DeliverNotificationWorkflow,
    DeliveryGivenUp,
    DeliveryJob,
    DeliveryRetries,
    workflow_id,
)
from steward_workflows.payloads import WORKFLOW_TASK_QUEUE

log = logging.getLogger("steward.notifier")

Publish = Callable[[Envelope], None]


class NotificationActivities:
    """Delivery (SMTP or webhook, `steward.notify.senders`) and the record of a delivery given up (`publish`:
    the worker's Kafka publisher in production)."""

    def __init__(self, settings: NotifySettings, publish: Publish) -> None:
        self.settings = settings
        self.publish = publish

    @activity.defn(name="deliver_notification")
    async def deliver_notification(self, delivery: Delivery) -> None:
        attempt = activity.info().attempt
        try:
            await asyncio.to_thread(deliver, self.settings, delivery)
        except DeliveryError as err:
            metrics.ATTEMPTS_FAILED.labels(delivery.channel, str(err.retryable).lower()).inc()
            log.warning("delivery %s (%s to %s) attempt %d failed: %s", delivery.delivery_id, delivery.channel,
                        delivery.target, attempt, err.message)
            raise ApplicationError(err.message, attempt, type=None if err.retryable else UNDELIVERABLE,
                                   non_retryable=not err.retryable) from None
        metrics.DELIVERED.labels(delivery.channel, delivery.kind).inc()

    @activity.defn(name="record_delivery_failed")
    async def record_delivery_failed(self, given_up: DeliveryGivenUp) -> None:
        d = given_up.delivery
        metrics.GAVE_UP.labels(d.channel, d.kind).inc()
        command = RecordDeliveryFailed(delivery_id=d.delivery_id, subscriber=d.subscriber, channel=d.channel,
                                       target=d.target, kind=d.kind, position=d.position,
                                       attempts=max(1, given_up.attempts), error=given_up.error)
        env = command_envelope(command, actor=WORKFLOWS_ACTOR, role=SYSTEM_ROLE,
                               message_id=f"delivery-failed-{d.delivery_id}")
        await asyncio.to_thread(self.publish, env)

    def all(self) -> list[Callable[..., object]]:
        return [self.deliver_notification, self.record_delivery_failed]


async def start_delivery(client: Client, delivery: Delivery, retries: DeliveryRetries,
                         task_queue: str = WORKFLOW_TASK_QUEUE) -> bool:
    """Start the delivery's workflow; False when it was already started (a batch read again)."""
    try:
        await client.start_workflow(DeliverNotificationWorkflow.run, DeliveryJob(delivery, retries),
                                    id=workflow_id(delivery.delivery_id), task_queue=task_queue,
                                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE)
    except WorkflowAlreadyStartedError:
        return False
    metrics.STARTED.labels(delivery.channel, delivery.kind).inc()
    return True


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def _follow_until_someone_subscribes(store: EventStore, settings: NotifySettings, stop: asyncio.Event,
                                          position: int) -> int:
    """While nobody has chosen any notification there is nobody to tell: the notifier follows the head
    without folding the log (a stack without notifications, a benchmark, pays nothing), and starts folding
    from the beginning once the first `NotificationsSet` is recorded. Returns the position to fold from."""
    if await asyncio.to_thread(first_position_of, store, "NotificationsSet") is not None:
        return position
    while not stop.is_set():
        head = await asyncio.to_thread(store.head)
        if await asyncio.to_thread(first_position_of, store, "NotificationsSet", position) is not None:
            break
        if head > position:
            position = head
            await asyncio.to_thread(save_position, store, position)
            metrics.POSITION.set(position)
        metrics.LAG.set(0)
        await _wait(stop, settings.poll_s)
    return position


async def notify_from(store: EventStore, client: Client, settings: NotifySettings, stop: asyncio.Event,
                      task_queue: str = WORKFLOW_TASK_QUEUE) -> None:
    """One run of the notifier: fold what was handed on, then hand on each new batch and move the position."""
    position = await asyncio.to_thread(load_position, store)
    position = await _follow_until_someone_subscribes(store, settings, stop, position)
    fold = NotifierFold()
    while fold.position < position:
        done = await asyncio.to_thread(store.read, fold.position, settings.batch, position)
        if not done:
            break
        await asyncio.to_thread(fold.catch_up, done)  # off the worker's event loop: a long log folds a while
    fold.position = max(fold.position, position)
    retries = DeliveryRetries.of(settings)
    log.info("notifier started after position %d", fold.position)
    while not stop.is_set():
        batch = await asyncio.to_thread(store.read, fold.position, settings.batch)
        if not batch:
            metrics.LAG.set(0)
            await _wait(stop, settings.poll_s)
            continue
        for d in await asyncio.to_thread(fold.advance, batch):
            await start_delivery(client, d, retries, task_queue)
        await asyncio.to_thread(save_position, store, fold.position)
        metrics.POSITION.set(fold.position)
        if len(batch) >= settings.batch:  # more to read: how far behind (a short batch reached the head)
            metrics.LAG.set(max(0, await asyncio.to_thread(store.head) - fold.position))


async def run_notifier(store: EventStore, client: Client, settings: NotifySettings, stop: asyncio.Event,
                       task_queue: str = WORKFLOW_TASK_QUEUE) -> None:
    """The notifier until `stop`: after a failure (the store or Temporal away) it starts again from its last
    saved position, so nothing is skipped and a re-read batch starts nothing twice."""
    while not stop.is_set():
        try:
            await notify_from(store, client, settings, stop, task_queue)
        except Exception:
            log.exception("the notifier failed; it starts again from its saved position")
            await _wait(stop, max(settings.poll_s, 2.0))
