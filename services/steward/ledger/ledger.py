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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace

from sqlalchemy import Connection

from steward.audit.snapshots import events_for_fold, load_snapshot
from steward.bus.identity import sender_of_topic
from steward.domain.leadership import COMMAND_ROLES
from steward.domain.rules_version import CURRENT as RULES
from steward.domain.state import LedgerState, evolve
from steward.ledger.deciding.refusals import RefusalLog, Window
from steward.ledger.deciding.steps import DeadLetter as DeadLetter  # re-exported: the service publishes them
from steward.ledger.deciding.steps import (
    Decoded,
    Opened,
    batch_versions,
    decide_messages,
    decided_a_duplicate,
    decode_commands,
    ids_and_new_keys,
    in_flight_duplicates,
    merge_versions,
    open_envelopes,
    processed_messages,
    unknown_streams,
)
from steward.ledger.recording.writer import WriterStage
from steward.store import projections
from steward.store.encoding import PendingAppend
from steward.store.eventstore import EventStore, RecordedEvent, encode_events
from steward.store.leases import Fence, lease_epochs
from steward.store.projections import Projector
from steward.store.projector import Key
from steward.store.recorder import EventRecorder, RecordBatch, record_batch
from steward.store.recorder import LogMoved as LogMoved  # re-exported: the service settles batches on it

log = logging.getLogger(__name__)

# Commands larger than this are dead-lettered unread (a command is a few hundred bytes).
MAX_MESSAGE_BYTES = int(os.environ.get("STEWARD_MAX_COMMAND_BYTES", str(256 * 1024)))


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


@dataclass(slots=True)
class Prepared(RecordBatch):
    """A decided batch: what its transaction writes (`RecordBatch`), the dead letters to publish before it
    commits, and the ids of its messages (skipped by the batches decided while it is recorded)."""

    dead: list[DeadLetter]
    message_ids: set[str]


class Ledger:
    """Decides batches of messages and records them, one transaction per batch.

    `process` does both in turn. The ledger service splits them: `prepare` decides batch N+1 in memory
    (positions, hash chain, projection rows) while `record` writes batch N in another thread, and
    `committed` / `abort` settle each batch in order. Every batch's transaction still holds its events,
    dedup ids, projection rows and offsets, and checks under the head lock that the log ends where the
    batch was decided to follow (`LogMoved` otherwise)."""

    def __init__(self, store: EventStore, consumer_name: str = "ledger",
                 clock: Callable[[], float] = time.time, max_message_bytes: int = MAX_MESSAGE_BYTES,
                 keep_connections: bool = False, writer: WriterStage | None = None,
                 topic_prefix: str | None = None, fence: Fence | None = None, rules: int = RULES) -> None:
        self.store = store
        # the write side of the store: only the ledger holds one; `fence`: the lease epoch it writes with (ADR 0060)
        self.recorder = EventRecorder(store, fence)
        # The ledger service reads the command topics of `topic_prefix`: each message is then trusted only as
        # far as its topic's component may vouch for it (steward.bus.identity, ADR 0036), and every message
        # refused (dead-lettered) is recorded in the chain (steward.ledger.deciding.refusals). Without one (embedded
        # and test ledgers fed in-process) every sender is trusted and dead letters are only returned.
        self.topic_prefix = topic_prefix
        self.refusals = RefusalLog(topic_prefix) if topic_prefix is not None else None
        self._refusals_before: list[dict[str, Window]] = []  # the refusal windows before each open batch
        # PostgreSQL: `record` hands each batch to a writer process (ADR 0025) instead of running it here
        self.writer = writer if store.dialect == "postgresql" else None
        # PostgreSQL: one connection kept for `prepare`'s reads and one for `record`'s transactions (the
        # ledger service: each is used by one thread), instead of a pool checkout per batch, which pings
        # the server first: a round trip more per batch, on the deciding thread for the reads. Close with
        # `close()`.
        self._keep = keep_connections and store.dialect == "postgresql"
        self._kept: dict[str, Connection] = {}
        self.consumer_name = consumer_name
        self.clock = clock
        self.rules = rules  # the rules version it decides under: today's (an older one only to record an old log)
        self.max_message_bytes = max_message_bytes
        self.proj = load_projector(store)
        self._versions: dict[str, int] = {}  # stream -> last version, as decided (cleared on abort)
        self._in_flight: list[set[str]] = []  # message ids of prepared, not yet committed batches
        # whether the writer may skip the DELETE of job rows new in a batch (ADR 0022): not after a batch
        # failed, until one commits (a row written outside the ledger fails one batch, then is replaced)
        self._skip_new_job_deletes = True
        self._redelivering = False  # the last answer named committed messages: await the next one first

    @property
    def state(self) -> LedgerState:
        return self.proj.state()

    @property
    def head(self) -> int:
        return self.proj.position

    def process(
        self,
        messages: Sequence[tuple[str, bytes | None]],
        offsets: dict[tuple[str, int], int],
        before_commit: Callable[[list[DeadLetter]], None] | None = None,
    ) -> tuple[list[RecordedEvent], list[DeadLetter]]:
        """Decide and record `messages` (source, raw bytes) in order, and store `offsets`, in one
        transaction. Messages of one aggregate come from one partition, in order, so deciding the batch
        in sequence keeps every aggregate's order. `before_commit` gets the dead letters first (to publish
        them before the offsets that skip them are stored). When another writer moved the log, the state
        is re-read and the batch decided again, once."""
        for attempt in (1, 2):
            prepared = self.prepare(messages, offsets)
            try:
                self.record(prepared, before_commit)
            except LogMoved:
                self.abort(reload=True)
                if attempt == 2:
                    raise
                continue
            except BaseException:
                self.abort()
                raise
            self.committed(prepared)
            return prepared.records, prepared.dead
        raise AssertionError("unreachable")

    def prepare(self, messages: Sequence[tuple[str, bytes | None]],
                offsets: dict[tuple[str, int], int]) -> Prepared:
        """Decide `messages` after every batch prepared so far, in memory (undone by `abort`).

        The store's answer on which messages it holds committed (and the versions of the streams the
        messages name) is read while the batch is decided (ADR 0023): the batch is decided on "not
        committed" and, in the rare case the answer names a message decided anyway, undone and decided
        again without it (after such a batch, the next one waits for its answer first). Messages held
        by batches still being recorded are skipped from memory."""
        proj = self.proj
        # recorded times never go back along the log (ADR 0075): a batch is stamped no earlier than the event it
        # follows, whatever this host's clock says (stepped back, or a standby's behind the writer it replaced:
        # `proj` is at the log's head, which the head check makes the batch follow)
        now = max(self.clock(), proj.recorded_at)
        opened = open_envelopes(messages, self.max_message_bytes)
        start_position, start_hash = proj.position, proj.head_hash
        versions = self._versions
        ids, keys = ids_and_new_keys(opened, versions)
        skipped = in_flight_duplicates(ids, self._in_flight)
        epochs = self._lease_epochs(opened)  # of the roles whose commands here carry an epoch (ADR 0065)
        answer = self._read_seen(ids, keys) if ids else None  # read from here on, beside the decision
        begun = False
        refusals_before = self.refusals.save() if self.refusals is not None else {}
        try:
            decoded, decode_dead = decode_commands(opened)
            # while redelivered messages keep coming (a rewind replayed), the answer is awaited first: one
            # decision per batch instead of two
            known = answer() if answer is not None and self._redelivering else None
            proj.begin()
            begun = True
            seen = set(skipped) if known is None else skipped | known[0]
            batch, changed, position, dead = self._decide(decoded, decode_dead, opened, seen, now, start_position,
                                                          epochs)
            rows = projections.capture(proj, changed)
            if answer is not None:
                committed, found = answer() if known is None else known
                if known is None and decided_a_duplicate(committed, batch):  # decide again without them
                    proj.rollback_newest()
                    proj.begin()
                    if self.refusals is not None:
                        self.refusals.restore(refusals_before)
                    batch, changed, position, dead = self._decide(decoded, decode_dead, opened, skipped | committed,
                                                                  now, start_position, epochs)
                    rows = projections.capture(proj, changed)
                self._redelivering = bool(committed)
                merge_versions(versions, found)
            missing = unknown_streams(batch, versions)
            if missing:
                with self._connection("read") as conn:
                    merge_versions(versions, self.store.stream_versions_now(missing, conn))
            numbered = batch_versions(batch, versions)
            records, texts = encode_events(batch, start_position, start_hash, numbered, float(now))
            if records:
                if records[-1].position != position:
                    raise RuntimeError(f"positions out of step: {records[-1].position}, expected {position}")
                proj.head_hash = records[-1].hash
            processed, batch_ids = processed_messages(batch, start_position)
        except BaseException:
            if begun:
                proj.rollback_newest()  # this batch only: the one before may still commit
                if self.refusals is not None:
                    self.refusals.restore(refusals_before)
            if answer is not None and self._keep:
                with suppress(Exception):
                    answer()  # the statement sent ends before its connection is used again
            raise
        versions.update(numbered)
        self._in_flight.append(batch_ids)
        self._refusals_before.append(refusals_before)
        return Prepared(start_position, start_hash, records, texts, processed, rows, dict(offsets), dead, batch_ids)

    def _decide(self, decoded: list[Decoded], dead: list[DeadLetter], opened: list[Opened], seen: set[str],
                now: float, position: int, epochs: dict[str, int | None] | None = None,
                ) -> tuple[list[PendingAppend], list[Key], int, list[DeadLetter]]:
        """`decide_messages`, then (ledger service) the refused commands join the dead letters, whose
        `CommandRefused` events (and the summaries due) follow the batch's decisions in the chain."""
        proj = self.proj
        if self.refusals is None:
            return (*decide_messages(proj, decoded, seen, now, position, rules=self.rules), dead)
        refused: list[DeadLetter] = []
        batch, changed, position = decide_messages(proj, decoded, seen, now, position, self.topic_prefix, refused,
                                                   epochs, self.rules)
        if refused:
            raws = {source: raw for source, raw, _, _ in opened}
            dead = dead + [DeadLetter(raws.get(d.source), d.error, d.source) for d in refused]
        for pending in self.refusals.record(dead, float(now)):
            batch.append(pending)
            for ev in pending.events:
                position += 1
                changed += proj.apply(ev, now, position)
        return batch, changed, position, dead

    def _lease_epochs(self, opened: list[Opened]) -> dict[str, int | None] | None:
        """The lease epochs of the roles (`COMMAND_ROLES`) whose commands in `opened` carry an epoch, read from
        the store now (None: no such command, nothing read). Only the ledger service (a `topic_prefix`) checks
        them: a command of an epoch older than its role's lease is refused (ADR 0065)."""
        prefix = self.topic_prefix
        if prefix is None:
            return None
        roles: set[str] = set()
        for source, _, env, _ in opened:
            if env is not None and env.meta.get("epoch") is not None:
                sender = sender_of_topic(prefix, source.rpartition("/")[0])
                if sender is not None and sender.component in COMMAND_ROLES:
                    roles.add(sender.component)
        if not roles:
            return None
        with self._connection("read") as conn:
            return lease_epochs(conn, roles)

    def refusals_due(self) -> bool:
        """Whether a refusal summary is due (the service then records an empty batch to write it)."""
        return self.refusals is not None and not self._in_flight and self.refusals.pending(self.clock())

    def _read_seen(self, ids: set[str], keys: set[str]) -> Callable[[], tuple[set[str], dict[str, int]]]:
        """The store's committed ids among `ids` and the versions of `keys`' streams, as a call that gives
        them (the same answer if called again). With kept connections (PostgreSQL) the statement is sent
        now and the call waits for its answer; otherwise the call reads."""
        if not self._keep:
            def read() -> tuple[set[str], dict[str, int]]:
                with self._connection("read") as conn:
                    return self.store.seen_messages_now(ids, keys, conn)

            return read
        conn = self._take("read")
        try:
            answer = self.store.seen_messages_sent(ids, keys, conn)
        except BaseException:
            _discard(conn)
            raise
        got: list[tuple[set[str], dict[str, int]]] = []

        def received() -> tuple[set[str], dict[str, int]]:
            if not got:
                try:
                    got.append(answer())
                except BaseException:
                    _discard(conn)  # a statement may still be under way on it
                    raise
                self._kept["read"] = conn
            return got[0]

        return received

    def record(self, prepared: Prepared, before_commit: Callable[[list[DeadLetter]], None] | None = None) -> None:
        """Write one prepared batch in one transaction (safe to run in another thread: it reads only
        `prepared` and the store): the store's sequence (`record_batch`), in the writer process (ADR 0025) or
        on this ledger's write connection. Raises `LogMoved` when the log does not end where the batch
        follows. `before_commit` gets the batch's dead letters last, inside the transaction."""
        batch: RecordBatch = prepared
        if not self._skip_new_job_deletes:  # every job row is replaced (ADR 0022)
            batch = replace(prepared, rows=replace(prepared.rows, new_jobs=frozenset()))
        publish = None if before_commit is None else _publishing(before_commit, prepared.dead)
        if self.writer is not None:
            record_batch(self.writer.transaction(), batch, self.consumer_name, publish)
            return
        with self._connection("write") as conn:
            record_batch(self.recorder.transaction(conn), batch, self.consumer_name, publish)

    def committed(self, prepared: Prepared) -> None:
        """`prepared` (the oldest open batch) is durable."""
        self.proj.commit()
        self._skip_new_job_deletes = True
        if self._in_flight:
            self._in_flight.pop(0)
        if self._refusals_before:
            self._refusals_before.pop(0)
        if not self._in_flight and len(self._versions) > VERSION_CACHE_LIMIT:
            self._versions.clear()  # re-read from the store as streams come back

    def abort(self, reload: bool = False) -> None:
        """Undo every open batch in memory (their transactions did not commit); `reload` re-reads the
        state from the store (after another writer moved the log)."""
        self.proj.rollback()
        self._skip_new_job_deletes = False
        self._in_flight.clear()
        if self.refusals is not None and self._refusals_before:
            self.refusals.restore(self._refusals_before[0])  # as before the oldest open batch
        self._refusals_before.clear()
        self._versions.clear()
        if reload:
            self.proj = load_projector(self.store)


    @contextmanager
    def _connection(self, role: str) -> Iterator[Connection]:
        """The connection kept for `role` ("read" or "write"; a new one after any error, which returns the
        old one to the pool), or one from the pool for this use alone."""
        if not self._keep:
            with self.store.engine.connect() as fresh:
                yield fresh
            return
        conn = self._take(role)
        try:
            yield conn
        except BaseException:
            conn.close()
            raise
        self._kept[role] = conn

    def _take(self, role: str) -> Connection:
        """The connection kept for `role`, taken out until it is handed back (a new one if none is kept)."""
        conn = self._kept.pop(role, None)
        if conn is None or conn.closed or conn.invalidated:
            conn = self.store.engine.connect()
        return conn

    def close(self) -> None:
        """Return the kept connections to the pool."""
        while self._kept:
            self._kept.popitem()[1].close()


def _publishing(before_commit: Callable[[list[DeadLetter]], None], dead: list[DeadLetter]) -> Callable[[], None]:
    """`before_commit` of the batch's dead letters, as the recorder's hook."""
    return lambda: before_commit(dead)


def _discard(conn: Connection) -> None:
    """Drop a connection that may be mid-statement: closed by the pool, never handed out again."""
    conn.invalidate()
    conn.close()


VERSION_CACHE_LIMIT = 1_000_000  # streams whose last version the ledger remembers between batches
