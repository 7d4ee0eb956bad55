"""The ledger's unit of work, without Kafka: decide a batch of messages and record the outcome.

`Ledger.process(batch, offsets)` is one database transaction holding the events, the dedup ids, the
projection rows and the consumed offsets: a crash anywhere neither loses nor duplicates an event.

The state is a `Projector`: `decide` reads it whole (no copy), and each recorded event is folded with
the domain's `evolve` on just the job it names, so a message costs the same with 10 or 10 million jobs
in the state. A batch that fails is rolled back in memory as in the database.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from steward.audit.snapshots import events_for_fold, load_snapshot
from steward.bus.envelope import Envelope
from steward.domain.commands import Command, command_from_dict
from steward.domain.decide import decide_or_reject
from steward.domain.errors import DomainError
from steward.domain.state import LedgerState, evolve
from steward.store import projections
from steward.store.eventstore import EventStore, PendingAppend, RecordedEvent
from steward.store.projections import Projector

log = logging.getLogger(__name__)

# Commands larger than this are dead-lettered unread (a command is a few hundred bytes).
MAX_MESSAGE_BYTES = int(os.environ.get("STEWARD_MAX_COMMAND_BYTES", str(256 * 1024)))


@dataclass(frozen=True, slots=True)
class DeadLetter:
    raw: bytes | None
    error: str
    source: str


def fold(store: EventStore) -> tuple[LedgerState, int]:
    """The reference fold: the whole log through the domain's `evolve`, from the start (for tests and
    audits; the ledger starts from a snapshot instead)."""
    state = LedgerState()
    head = 0
    for rec in store.iterate():
        state = evolve(state, rec.as_event(), rec.recorded_at)
        head = rec.position
    return state, head


def load_projector(store: EventStore) -> Projector:
    """The newest readable snapshot plus the tail of the log."""
    proj = load_snapshot(store) or Projector()
    for position, ev, at, h in events_for_fold(store, proj.position):
        proj.apply(ev, at, position, h)
    return proj


class Ledger:
    def __init__(self, store: EventStore, consumer_name: str = "ledger",
                 clock: Callable[[], float] = time.time, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.store = store
        self.consumer_name = consumer_name
        self.clock = clock
        self.max_message_bytes = max_message_bytes
        self.proj = load_projector(store)

    @property
    def state(self) -> LedgerState:
        return self.proj.state()

    @property
    def head(self) -> int:
        return self.proj.position

    def _decode(self, source: str, raw: bytes | None) -> tuple[Envelope, Command] | DeadLetter:
        if raw is not None and len(raw) > self.max_message_bytes:
            return DeadLetter(raw[:4096], f"oversized: {len(raw)} bytes, the limit is {self.max_message_bytes}",
                              source)
        try:
            env = Envelope.decode(raw)
            return env, command_from_dict(env.type, env.payload)
        except (ValueError, DomainError) as err:
            return DeadLetter(raw, str(err), source)

    def process(
        self,
        messages: Sequence[tuple[str, bytes | None]],
        offsets: dict[tuple[str, int], int],
        before_commit: Callable[[list[DeadLetter]], None] | None = None,
    ) -> tuple[list[RecordedEvent], list[DeadLetter]]:
        """Decide and record `messages` (source, raw bytes) in order, and store `offsets`, in one
        transaction. Messages of one aggregate come from one partition, in order, so deciding the batch
        in sequence keeps every aggregate's order. `before_commit` gets the dead letters first (to publish
        them before the offsets that skip them are stored)."""
        now = self.clock()
        dead: list[DeadLetter] = []
        decoded: list[tuple[str, Envelope, Command]] = []
        for source, raw in messages:
            item = self._decode(source, raw)
            if isinstance(item, DeadLetter):
                dead.append(item)
            else:
                decoded.append((source, *item))
        proj = self.proj
        proj.begin()
        try:
            with self.store.engine.begin() as conn:
                position, _ = self.store.lock_head(conn)  # held to commit: our positions are next
                seen = self.store.seen_messages(conn, (e.id for _, e, _ in decoded))
                batch: list[PendingAppend] = []
                changed: list[tuple[str, str]] = []
                for source, env, command in decoded:
                    if env.id in seen:
                        continue  # a redelivered message: recorded already
                    seen.add(env.id)
                    events = decide_or_reject(proj.view(), command, now)
                    for ev in events:
                        position += 1
                        changed += proj.apply(ev, now, position)
                    meta = dict(env.meta) | {"causation_id": env.id, "command": env.type, "source": source}
                    if events and events[0].type == "CommandRejected":
                        meta["input"] = env.payload  # a rejection's event cannot carry the command itself
                    batch.append(PendingAppend(events, meta, env.id))
                recorded = self.store.append(conn, batch, now) if batch else []
                if recorded:
                    if recorded[-1].position != position:
                        raise RuntimeError(f"the log moved under the ledger: head {recorded[-1].position}, "
                                           f"expected {position} (is a second ledger running?)")
                    proj.head_hash = recorded[-1].hash
                first_position: dict[str, int] = {}
                for rec in recorded:
                    if rec.message_id is not None:
                        first_position.setdefault(rec.message_id, rec.position)
                self.store.mark_processed(conn, [(p.message_id, first_position.get(p.message_id))
                                                 for p in batch if p.message_id])
                projections.write(conn, proj, changed)
                self.store.save_offsets(conn, self.consumer_name, offsets)
                if before_commit is not None:
                    before_commit(dead)
        except BaseException:
            proj.rollback()
            raise
        proj.commit()
        return recorded, dead
