"""Notifications in the API (issue 24 "Being told", ADR 0050): choosing them (`setNotifications`, a
`SetNotifications` command through the ledger), listing one's own (`notificationSubscriptions`), the kinds
(`notificationKinds`) and the deliveries given up (`failedDeliveries`, operators).

The subscriber is the caller's identity (`Principal.subject`: an API token's subject today, a person's once
sign-in lands); an admin may set or list anyone's. A subscription follows an allocation the caller sees
(a manager's subtree node, a researcher's project); the whole tree (`cluster`) only for those who see it all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import strawberry
from strawberry.types import Info

from steward.api import fields
from steward.api.commands import Outcome
from steward.api.context import BadInput, Context, Forbidden
from steward.api.payloads import InvalidInput, NotAuthorised, Rejected
from steward.api.scalars import BigInt
from steward.auth.access import ROOT, Capability
from steward.domain.commands import Command, SetNotifications
from steward.domain.notifications import KINDS, Subscription, target_problem
from steward.notify.log import failed_deliveries, subscriptions

Execute = Callable[[Context, Command], Awaitable[Outcome]]


@strawberry.type
class NotificationKind:
    name: str
    description: str


@strawberry.type
class NotificationSubscription:
    subscriber: str
    allocation: str
    channel: str = strawberry.field(description="email or webhook")
    target: str = strawberry.field(description="the e-mail address or the webhook URL")
    kinds: list[str]

    @staticmethod
    def of(s: Subscription) -> NotificationSubscription:
        return NotificationSubscription(subscriber=s.subscriber, allocation=s.allocation, channel=s.channel,
                                        target=s.target, kinds=sorted(s.kinds))


@strawberry.type
class NotificationsChosen:
    subscription: NotificationSubscription
    position: BigInt


SetNotificationsResult = Annotated[NotificationsChosen | Rejected | InvalidInput | NotAuthorised,
                                   strawberry.union("SetNotificationsResult")]


@strawberry.type
class FailedDelivery:
    delivery_id: str
    subscriber: str
    channel: str
    target: str
    kind: str
    position: BigInt = strawberry.field(description="the log position of the event it told")
    attempts: int
    error: str
    failed_at: float
    recorded_position: BigInt = strawberry.field(description="where the failure is recorded (NotificationFailed)")

    @staticmethod
    def of(p: dict[str, Any]) -> FailedDelivery:
        return FailedDelivery(delivery_id=p["delivery_id"], subscriber=p["subscriber"], channel=p["channel"],
                              target=p["target"], kind=p["kind"], position=int(p["position"]),
                              attempts=int(p["attempts"]), error=p["error"], failed_at=float(p["failed_at"]),
                              recorded_position=int(p["recorded_position"]))


def _ctx(info: Info[Context, None]) -> Context:
    return info.context


@strawberry.type
class NotificationQueries:
    @fields.field("The notification kinds a subscriber can choose, with what each tells.")
    def notification_kinds(self) -> list[NotificationKind]:
        return [NotificationKind(name=k, description=d) for k, d in KINDS.items()]

    @fields.field("Your notification subscriptions (admins: everyone's, or one `subscriber`'s).")
    async def notification_subscriptions(self, info: Info[Context, None],
                                         subscriber: str | None = None) -> list[NotificationSubscription]:
        ctx = _ctx(info)
        ctx.no_cache()
        access = await ctx.access("notificationSubscriptions")
        me = ctx.who("notificationSubscriptions").subject
        if subscriber not in (None, me) and not access.can(Capability.operate):
            await ctx.deny("notificationSubscriptions", f"subscriber:{subscriber}", "not the caller's own")
            return []
        everyone = subscriber is None and access.can(Capability.operate)
        subs = await asyncio.to_thread(subscriptions, ctx.services.store)
        return [NotificationSubscription.of(s) for s in subs if everyone or s.subscriber == (subscriber or me)]

    @fields.field("Notification deliveries given up after their retries, oldest first (admins, auditors).")
    async def failed_deliveries(self, info: Info[Context, None], first: int = 100,
                                after_position: BigInt = 0) -> list[FailedDelivery]:
        ctx = _ctx(info)
        ctx.no_cache()
        access = await ctx.access("failedDeliveries")
        if not (access.can(Capability.operate) or access.can(Capability.read_audit)):
            await ctx.deny("failedDeliveries", "*", f"role {access.role.value} lacks operate")
            raise Forbidden("failedDeliveries")
        if not 1 <= first <= ctx.services.settings.api_max_page:
            raise BadInput(f"'first' must be between 1 and {ctx.services.settings.api_max_page}, got {first}")
        rows = await asyncio.to_thread(failed_deliveries, ctx.services.store, after_position, first)
        return [FailedDelivery.of(p) for p in rows]


async def set_notifications(ctx: Context, execute: Execute, allocation: str, channel: str, target: str,
                            kinds: list[str], subscriber: str | None) -> SetNotificationsResult:
    """The `setNotifications` mutation (`execute`: the schema's path to the ledger)."""
    operation = "setNotifications"
    access = await ctx.access(operation)
    me = ctx.who(operation).subject
    who = subscriber or me
    if who != me and not access.can(Capability.operate):
        await ctx.deny(operation, f"subscriber:{who}", "not the caller's own")
        return NotAuthorised(message="you may choose your own notifications only")
    if (allocation == ROOT and access.visible_projects() is not None) or not access.sees(allocation):
        await ctx.deny(operation, f"allocation:{allocation}", "outside the principal's scopes")
        return NotAuthorised(message=f"no allocation '{allocation}' you may follow")
    problem = target_problem(channel, target)
    if problem is not None:
        return InvalidInput(field="channel" if channel not in ("email", "webhook") else "target", message=problem)
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        return InvalidInput(field="kinds", message=f"unknown notification kind(s) {', '.join(unknown)}; "
                                                   f"known: {', '.join(KINDS)}")
    command = SetNotifications(subscriber=who, allocation=allocation, channel=channel, target=target,
                               kinds=sorted(set(kinds)))
    outcome = await execute(ctx, command)
    rejected = outcome.rejected
    if rejected is not None:
        return Rejected(code=rejected.payload["code"], reason=rejected.payload["reason"])
    return NotificationsChosen(subscription=NotificationSubscription(
        subscriber=who, allocation=allocation, channel=channel, target=target, kinds=sorted(set(kinds))),
        position=outcome.position)
