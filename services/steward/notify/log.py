"""The notifier's side of the log: its own position (a `consumer_offsets` row of its own, consumer
"notifier"), the fold that turns each new event into deliveries, and the reading of subscriptions and failed
deliveries for the API. It only reads the events; the ledger never waits on it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, insert, select

from steward.domain.identity import person
from steward.domain.notifications import (
    Delivery,
    Subscription,
    apply_notifications_set,
    deliveries,
    notices_for,
    wanted_kinds,
)
from steward.domain.state import LedgerState, evolve
from steward.store import schema
from steward.store.eventstore import EventStore, RecordedEvent, row_to_recorded

NOTIFIER = "notifier"
_TOPIC = "store"  # the offsets row's topic: the position it holds is the log's, not a Kafka offset


def load_position(store: EventStore, consumer: str = NOTIFIER) -> int:
    """The last position the notifier handed on (0: none yet)."""
    return store.load_offsets(consumer).get((_TOPIC, 0), 0)


def save_position(store: EventStore, position: int, consumer: str = NOTIFIER) -> None:
    t = schema.consumer_offsets
    with store.engine.begin() as conn:
        conn.execute(delete(t).where(t.c.consumer == consumer, t.c.topic == _TOPIC, t.c.partition == 0))
        conn.execute(insert(t).values(consumer=consumer, topic=_TOPIC, partition=0, next_offset=position))


@dataclass
class NotifierFold:
    """The ledger's state and the subscriptions as of `position`, folded event by event; `step` returns the
    deliveries an event asks for (the rules are `steward.domain.notifications`)."""

    state: LedgerState = field(default_factory=LedgerState)
    subscriptions: dict[tuple[str, str, str, str], Subscription] = field(default_factory=dict)
    position: int = 0

    def step(self, recorded: RecordedEvent, tell: bool = True) -> list[Delivery]:
        event = recorded.as_event()
        before = self.state
        self.state = evolve(before, event, recorded.recorded_at)
        self.position = recorded.position
        if event.type == "NotificationsSet":
            self.subscriptions = apply_notifications_set(self.subscriptions, event.payload)
            return []
        if not tell or not self.subscriptions:
            return []
        meta = recorded.metadata or {}
        by = person(meta["actor"], meta.get("actor_name")) if meta.get("actor") else ""
        notices = notices_for(before, event, self.state, wanted_kinds(self.subscriptions), by)
        if not notices:
            return []
        parents = {n: a.parent for n, a in self.state.allocations.items()}
        return deliveries(notices, self.subscriptions, parents, recorded.position)

    def advance(self, events: Iterable[RecordedEvent]) -> list[Delivery]:
        """The deliveries a batch of new events asks for, in order."""
        return [d for ev in events for d in self.step(ev)]

    def catch_up(self, events: Iterable[RecordedEvent]) -> None:
        """Fold what was already handed on (after a restart), telling nobody."""
        for ev in events:
            self.step(ev, tell=False)


def _of_type(store: EventStore, kind: str, after: int = 0, limit: int | None = None) -> list[RecordedEvent]:
    ev = schema.events
    q = select(ev).where(ev.c.type == kind, ev.c.position > after).order_by(ev.c.position)
    if limit is not None:
        q = q.limit(limit)
    with store.engine.connect() as conn:
        rows = conn.execute(q).all()
        conn.rollback()
    return [row_to_recorded(r) for r in rows]


def first_position_of(store: EventStore, kind: str, after: int = 0) -> int | None:
    """The first position after `after` holding an event of type `kind` (None: none yet); by the type index."""
    ev = schema.events
    q = select(ev.c.position).where(ev.c.type == kind, ev.c.position > after).order_by(ev.c.position).limit(1)
    with store.engine.connect() as conn:
        found = conn.execute(q).scalar()
        conn.rollback()
    return None if found is None else int(found)


def subscriptions(store: EventStore) -> list[Subscription]:
    """The subscriptions in force, from the `NotificationsSet` events."""
    subs: dict[tuple[str, str, str, str], Subscription] = {}
    for rec in _of_type(store, "NotificationsSet"):
        subs = apply_notifications_set(subs, rec.payload)
    return sorted(subs.values(), key=lambda s: s.key)


def failed_deliveries(store: EventStore, after: int = 0, limit: int = 100) -> list[dict[str, Any]]:
    """Deliveries given up (`NotificationFailed`), oldest first, each with its log position."""
    return [rec.payload | {"recorded_position": rec.position, "recorded_at": rec.recorded_at}
            for rec in _of_type(store, "NotificationFailed", after, limit)]
