"""The ledger's unit of work, without Kafka: decide a batch of messages and record the outcome.

`Ledger.process(batch, offsets)` is one database transaction holding the events, the dedup ids, the
projection rows and the consumed offsets: a crash anywhere neither loses nor duplicates an event.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from steward.bus.envelope import Envelope
from steward.domain.commands import command_from_dict
from steward.domain.decide import decide_or_reject
from steward.domain.errors import DomainError
from steward.domain.state import LedgerState, evolve
from steward.store import projections
from steward.store.eventstore import EventStore, PendingAppend, RecordedEvent

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    raw: bytes | None
    error: str
    source: str


def fold(store: EventStore) -> tuple[LedgerState, int]:
    """Rebuild the ledger state from the whole log."""
    state = LedgerState()
    head = 0
    for rec in store.iterate():
        state = evolve(state, rec.as_event(), rec.recorded_at)
        head = rec.position
    return state, head


class Ledger:
    def __init__(self, store: EventStore, consumer_name: str = "ledger",
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.consumer_name = consumer_name
        self.clock = clock
        self.state, self.head = fold(store)

    def process(
        self,
        messages: Sequence[tuple[str, bytes | None]],
        offsets: dict[tuple[str, int], int],
    ) -> tuple[list[RecordedEvent], list[DeadLetter]]:
        """Decide and record `messages` (source, raw bytes) and store `offsets`, in one transaction."""
        now = self.clock()
        state = self.state
        dead: list[DeadLetter] = []
        decoded: list[Envelope] = []
        for source, raw in messages:
            try:
                env = Envelope.decode(raw)
                command_from_dict(env.type, env.payload)
            except (ValueError, DomainError) as err:
                dead.append(DeadLetter(raw, str(err), source))
                continue
            decoded.append(env)
        with self.store.engine.begin() as conn:
            seen = self.store.seen_messages(conn, (e.id for e in decoded))
            batch: list[PendingAppend] = []
            touched = projections.Touched()
            for env in decoded:
                if env.id in seen:
                    continue  # a redelivered message: recorded already
                seen.add(env.id)
                command = command_from_dict(env.type, env.payload)
                events = decide_or_reject(state, command, now)
                for ev in events:
                    state = evolve(state, ev, now)
                    touched.add(ev.type, ev.payload)
                meta = dict(env.meta) | {"causation_id": env.id, "command": env.type}
                batch.append(PendingAppend(events, meta, env.id))
            recorded = self.store.append(conn, batch, now) if batch else []
            position = recorded[-1].position if recorded else self.head
            first_position: dict[str, int] = {}
            for rec in recorded:
                if rec.message_id is not None:
                    first_position.setdefault(rec.message_id, rec.position)
            self.store.mark_processed(conn, [(p.message_id, first_position.get(p.message_id or ""))
                                             for p in batch if p.message_id])
            projections.write(conn, state, touched, position)
            self.store.save_offsets(conn, self.consumer_name, offsets)
        self.state, self.head = state, position
        return recorded, dead
