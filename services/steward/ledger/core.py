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
from steward.domain.state import LedgerState, evolve
from steward.ledger.batch import DeadLetter as DeadLetter  # re-exported: the service publishes them
from steward.ledger.batch import (
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
from steward.ledger.writer import Message, WriterStage, batch_messages
from steward.store import copytext, projections
from steward.store.eventstore import (
    EventStore,
    RecordedEvent,
    dedup_rows,
    encode_events,
    events_pieces,
    explicit_begin,
    processed_pieces,
)
from steward.store.projections import Projector

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


class LogMoved(RuntimeError):
    """The log's head is not where this ledger left it: another writer appended (a second ledger started
    by mistake, or another `Ledger` on the same store). The batch is rolled back and the state re-read."""


@dataclass(slots=True)
class Prepared:
    """A decided batch, ready to record: everything its transaction writes, computed from the state the
    batches before it left (positions, hashes, canonical texts, projection rows as of its end)."""

    start_position: int
    start_hash: str
    records: list[RecordedEvent]
    texts: list[tuple[str, str]]
    processed: list[tuple[str, int | None]]
    rows: projections.ChangedRows
    offsets: dict[tuple[str, int], int]
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
                 keep_connections: bool = False, writer: WriterStage | None = None) -> None:
        self.store = store
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
        now = self.clock()
        opened = open_envelopes(messages, self.max_message_bytes)
        proj = self.proj
        start_position, start_hash = proj.position, proj.head_hash
        versions = self._versions
        ids, keys = ids_and_new_keys(opened, versions)
        skipped = in_flight_duplicates(ids, self._in_flight)
        answer = self._read_seen(ids, keys) if ids else None  # read from here on, beside the decision
        begun = False
        try:
            decoded, dead = decode_commands(opened)
            # while redelivered messages keep coming (a rewind replayed), the answer is awaited first: one
            # decision per batch instead of two
            known = answer() if answer is not None and self._redelivering else None
            proj.begin()
            begun = True
            seen = set(skipped) if known is None else skipped | known[0]
            batch, changed, position = decide_messages(proj, decoded, seen, now, start_position)
            rows = projections.capture(proj, changed)
            if answer is not None:
                committed, found = answer() if known is None else known
                if known is None and decided_a_duplicate(committed, batch):  # decide again without them
                    proj.rollback_newest()
                    proj.begin()
                    batch, changed, position = decide_messages(proj, decoded, skipped | committed, now,
                                                               start_position)
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
            if answer is not None and self._keep:
                with suppress(Exception):
                    answer()  # the statement sent ends before its connection is used again
            raise
        versions.update(numbered)
        self._in_flight.append(batch_ids)
        return Prepared(start_position, start_hash, records, texts, processed, rows, dict(offsets), dead, batch_ids)

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
        `prepared` and the store). Raises `LogMoved` when the log does not end where the batch follows."""
        if self.store.dialect != "postgresql":
            with self._connection("write") as conn, conn.begin():
                self._check_head(self.store.lock_head(conn), prepared)
                self.store.insert_recorded(conn, prepared.records, prepared.texts)
                self.store.mark_processed(conn, prepared.processed)
                projections.write_rows(conn, prepared.rows)
                self.store.save_offsets(conn, self.consumer_name, prepared.offsets)
                if before_commit is not None:
                    before_commit(prepared.dead)
            return
        # PostgreSQL: BEGIN, the head lock, the replaced job rows' DELETE and the offsets in one round trip
        # (none of those can fail on a conflict, and all roll back with the batch when the head moved), then
        # one COPY per table (ADR 0022)
        rows = prepared.rows if self._skip_new_job_deletes else replace(prepared.rows, new_jobs=frozenset())
        if self.writer is not None:  # the same transaction, in the writer process (ADR 0025)
            dead = prepared.dead
            self.writer.write(
                batch_messages(prepared.start_position, prepared.start_hash, self.consumer_name, prepared.offsets,
                               projections.held_jobs(rows), _table_messages(prepared, rows)),
                None if before_commit is None else lambda: before_commit(dead))
            return
        with self._connection("write") as conn, explicit_begin(conn), conn.begin():
            first = [projections.jobs_delete_sql(conn, rows)]
            if prepared.offsets:
                first.append(self.store.offsets_sql(conn, self.consumer_name, prepared.offsets))
            self._check_head(self.store.lock_head(conn, [s for s in first if s], begin=True), prepared)
            self.store.insert_recorded(conn, prepared.records, prepared.texts)
            self.store.mark_processed(conn, prepared.processed)
            projections.write_rows(conn, rows, jobs_deleted=True)
            if before_commit is not None:
                before_commit(prepared.dead)

    @staticmethod
    def _check_head(head: tuple[int, str], prepared: Prepared) -> None:
        """The log ends where `prepared` was decided to follow (held to commit: our positions are next)."""
        if head != (prepared.start_position, prepared.start_hash):
            raise LogMoved(f"the log moved under the ledger: head {head[0]}, expected "
                           f"{prepared.start_position} (is a second ledger running?)")

    def committed(self, prepared: Prepared) -> None:
        """`prepared` (the oldest open batch) is durable."""
        self.proj.commit()
        self._skip_new_job_deletes = True
        if self._in_flight:
            self._in_flight.pop(0)
        if not self._in_flight and len(self._versions) > VERSION_CACHE_LIMIT:
            self._versions.clear()  # re-read from the store as streams come back

    def abort(self, reload: bool = False) -> None:
        """Undo every open batch in memory (their transactions did not commit); `reload` re-reads the
        state from the store (after another writer moved the log)."""
        self.proj.rollback()
        self._skip_new_job_deletes = False
        self._in_flight.clear()
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


def _table_messages(prepared: Prepared, rows: projections.ChangedRows) -> Iterator[Message]:
    """The writer process's `copy` and `upsert` messages of a batch, in the order the in-process writer
    writes them; each piece of COPY text is built as it is sent (compiled, ADR 0022)."""
    for piece in events_pieces(prepared.records, prepared.texts):
        yield ("copy", "events", copytext.EVENT_COLUMNS, piece)
    recorded, dedup = dedup_rows(prepared.processed)  # as `mark_processed` writes them (ADR 0026)
    if recorded:
        yield ("check", recorded)
    for piece in processed_pieces(dedup):
        yield ("copy", "processed_messages", copytext.PROCESSED_COLUMNS, piece)
    for table, key, keys, new in projections.keyed_rows(rows):
        if keys:
            yield ("upsert", table, key, keys, new)
    for piece in projections.jobs_pieces(rows):
        yield ("copy", "proj_jobs", copytext.JOB_COLUMNS, piece)


def _discard(conn: Connection) -> None:
    """Drop a connection that may be mid-statement: closed by the pool, never handed out again."""
    conn.invalidate()
    conn.close()


VERSION_CACHE_LIMIT = 1_000_000  # streams whose last version the ledger remembers between batches
