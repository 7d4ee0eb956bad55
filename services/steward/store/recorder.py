"""The write side of the store, and the one sequence of a batch's transaction.

Any module may read the store (`steward.store.eventstore.EventStore`); only the ledger writes the log, through
this module (and tools that must write: benchmarks seeding a store, tests). An `EventRecorder` is the write
handle: `EventStore` has no method that writes an event, so a reader cannot write by mistake (mypy refuses),
and the import contract in pyproject.toml keeps every other package from importing this module.

A decided batch (`RecordBatch`: its events, their dedup rows, the projection rows it changed, the offsets it
consumed) is recorded by `record_batch`, in one transaction and always in the same steps:

    lock the head (and check the log ends where the batch follows) -> check dedup -> append the events ->
    write the projections -> save the offsets -> (the caller's `before_commit`) -> commit

A crash anywhere neither loses nor duplicates an event (DESIGN: "one transaction"). Each step is a method of
a `BatchTransaction`, the port its adapters implement:

- `SQLiteTransaction`: the embedded store, statement by statement;
- `PostgresTransaction`: PostgreSQL on a connection of this process (the ledger's writer thread, ADR 0015):
  `BEGIN`, the head lock, the head, the offsets and the `DELETE` of the job rows the batch replaces in one
  round trip, then one COPY per table (ADR 0022);
- `steward.ledger.recording.writer.WriterTransaction`: the same statements in the ledger's writer process
  (ADR 0025), where `PostgresTransaction` runs them as the pieces arrive.

The store's contract suite (tests/unit/store/contract.py) runs the sequence through every adapter.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Connection, select, text
from sqlalchemy.dialects import sqlite

from steward.store import copytext, projections, schema
from steward.store.encoding import PendingAppend, RecordedEvent, encode_events
from steward.store.eventstore import (
    _HEAD_SQL,
    ANY_JSON_TEXTS,
    EVENT_COLUMNS,
    POSITION_LOCK_KEY,
    ConcurrencyError,
    EventStore,
    MessageRecordedTwice,
    copy_data,
    dedup_rows,
    events_pieces,
    explicit_begin,
    json_texts,
    processed_pieces,
    sql_literal,
)
from steward.store.hashing import GENESIS, canonical_text
from steward.store.leases import Fence, check_fence, fence_sql
from steward.store.projector import ChangedRows

Offsets = dict[tuple[str, int], int]


class LogMoved(RuntimeError):
    """The log's head is not where the batch was decided to follow: another writer appended (a second ledger
    started by mistake, or another `Ledger` on the same store). Nothing of the batch is committed."""

    def __init__(self, head: tuple[int, str], expected: int) -> None:
        super().__init__(f"the log moved under the ledger: head {head[0]}, expected {expected} "
                         "(is a second ledger running?)")
        self.head = head
        self.expected = expected


@dataclass(slots=True)
class RecordBatch:
    """A decided batch, ready to record: everything its transaction writes, computed from the state the
    batches before it left (positions, hashes, canonical texts, projection rows as of its end)."""

    start_position: int  # the head the batch follows (its first event is the next position)
    start_hash: str
    records: list[RecordedEvent]
    texts: list[tuple[str, str]]  # each record's payload and metadata canonical texts
    processed: list[tuple[str, int | None]]  # each message: its first event's position, or None (no event)
    rows: ChangedRows
    offsets: Offsets


class BatchTransaction(Protocol):
    """The steps of one batch's transaction, as an adapter runs them (`record_batch` calls them in order)."""

    def transaction(self) -> AbstractContextManager[None]:
        """Begin; commit when the block ends, roll back when it raises (the adapter's error then, if any,
        says why the commit did not happen: `LogMoved`, `MessageRecordedTwice`, ...)."""
        ...

    def lock_head(self, batch: RecordBatch, consumer: str) -> None:
        """Take the head lock (positions follow commit order) and check that the log ends at the batch's
        start (`LogMoved`; an adapter that cannot wait for the head may raise it at the commit instead).
        Statements of the batch that cannot fail on a conflict (its offsets, the DELETE of the job rows it
        replaces) may go in the same round trip: `save_offsets` is then done already."""
        ...

    def check_dedup(self, recorded: Sequence[str]) -> None:
        """`MessageRecordedTwice` when a message the batch records events for has a dedup row (ADR 0026)."""
        ...

    def append(self, records: Sequence[RecordedEvent], texts: Sequence[tuple[str, str]],
               dedup: Sequence[tuple[str, int | None]]) -> None:
        """The batch's events, and the dedup rows of its messages that recorded none."""
        ...

    def write_projections(self, rows: ChangedRows) -> None:
        """Replace the projection rows the batch changed by their values at its end."""
        ...

    def save_offsets(self, consumer: str, offsets: Offsets) -> None:
        """The next offset to read of each (topic, partition) the batch consumed."""
        ...


def record_batch(tx: BatchTransaction, batch: RecordBatch, consumer: str,
                 before_commit: Callable[[], None] | None = None) -> None:
    """Record `batch` in one transaction of `tx`: the sequence every adapter runs. `before_commit` runs last
    inside it (the ledger publishes the batch's dead letters there, before the offsets that skip them can
    commit); whatever it raises rolls the batch back."""
    recorded, dedup = dedup_rows(batch.processed)
    with tx.transaction():
        tx.lock_head(batch, consumer)
        tx.check_dedup(recorded)
        tx.append(batch.records, batch.texts, dedup)
        tx.write_projections(batch.rows)
        tx.save_offsets(consumer, batch.offsets)
        if before_commit is not None:
            before_commit()


class EventRecorder:
    """The store's write handle: appends events, dedup rows and offsets inside the caller's transaction, and
    opens a batch's transaction (`transaction`) for `record_batch`."""

    def __init__(self, store: EventStore, fence: Fence | None = None) -> None:
        self.store = store
        self.dialect = store.dialect
        # with a fence (an active of a role with standbys, ADR 0060) every head lock also checks its epoch
        self.fence = fence

    def transaction(self, conn: Connection) -> SQLiteTransaction | PostgresTransaction:
        """The adapter of this store's dialect, on `conn` (a connection outside any transaction)."""
        if self.dialect == "postgresql":
            return PostgresTransaction(self, conn)
        return SQLiteTransaction(self, conn)

    def lock_head(self, conn: Connection, then: Sequence[str] = (), begin: bool = False) -> tuple[int, str]:
        """Serialise appends (commit order = position order) and return the head (position, hash).

        PostgreSQL: one round trip for the lock, the head in a statement of its own, and `then` (literal SQL
        statements of the same transaction, run after the head is read: statements that cannot fail on a
        conflict, since the caller checks the head only after them). `begin`: the transaction starts here
        (the connection is in `explicit_begin`), instead of in a round trip of its own before."""
        if self.dialect == "postgresql":
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            lock = f"SELECT pg_advisory_xact_lock({int(POSITION_LOCK_KEY)})"
            fence = [fence_sql(self.fence)] if self.fence is not None else []
            statements = [lock, _HEAD_SQL, *fence, *then]
            cursor.execute("; ".join(["BEGIN", *statements] if begin else statements))
            if begin:
                cursor.nextset()
            cursor.nextset()  # (its own snapshot, taken once the lock is held: it sees every commit before)
            head = cursor.fetchone()
            if self.fence is not None:  # refused before anything else of the batch is looked at
                cursor.nextset()
                epoch = cursor.fetchone()
                check_fence(self.fence, int(epoch[0]) if epoch else None)
            return (int(head[0]), str(head[1])) if head else (0, GENESIS)
        if self.fence is not None:  # SQLite: BEGIN IMMEDIATE already holds the store's one write lock
            value = conn.execute(text(fence_sql(self.fence))).scalar()
            check_fence(self.fence, None if value is None else int(value))
        row = conn.execute(
            select(schema.events.c.position, schema.events.c.hash)
            .order_by(schema.events.c.position.desc())
            .limit(1)
        ).first()
        return (row.position, row.hash) if row else (0, GENESIS)

    def append(
        self, conn: Connection, batch: Sequence[PendingAppend], now: float | None = None
    ) -> list[RecordedEvent]:
        """Append every event of `batch` inside the caller's transaction; returns what was recorded.

        Positions are taken under the head lock, so they are gap-free and in commit order."""
        recorded_at = float(time.time() if now is None else now)
        position, prev = self.lock_head(conn)
        versions = self.store.stream_versions(conn, (e.stream for p in batch for e in p.events))
        for pending in batch:
            for stream, expected in pending.expected_versions.items():
                if versions.get(stream, 0) != expected:
                    raise ConcurrencyError(
                        f"stream '{stream}' is at version {versions.get(stream, 0)}, expected {expected}"
                    )
        out, texts = encode_events(batch, position, prev, versions, recorded_at)
        self.insert_recorded(conn, out, texts)
        return out

    def insert_recorded(self, conn: Connection, records: Sequence[RecordedEvent],
                        texts: Sequence[tuple[str, str]] | None = None) -> None:
        """Insert already-hashed events (with their payload and metadata canonical texts, when known):
        COPY on PostgreSQL, executemany on SQLite."""
        if not records:
            return
        if texts is None:
            texts = [(canonical_text(r.payload), canonical_text(r.metadata)) for r in records]
        if self.dialect == "postgresql":  # the rows as one text, built in compiled code (ADR 0022)
            copy_data(conn, "events", EVENT_COLUMNS, events_pieces(records, texts))
            return
        conn.execute(text(
            f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) VALUES ({', '.join(':' + c for c in EVENT_COLUMNS)})"),
            [r.to_dict() | {"payload": p, "metadata": m} for r, (p, m) in zip(records, texts, strict=True)])

    def mark_processed(self, conn: Connection, items: Sequence[tuple[str, int | None]]) -> None:
        """The batch's messages as processed, in its transaction, after its events (ADR 0026): `items` is
        each message with the position of its first event, or None when it recorded none.

        A message that recorded events is known by them (`events.message_id`): no row is written for it,
        and it is checked to have none (`check_unprocessed`). A message that recorded no event gets its
        row; the primary key refuses a second one."""
        recorded, rows = dedup_rows(items)
        self.check_unprocessed(conn, recorded)
        self.insert_processed(conn, rows)

    def insert_processed(self, conn: Connection, rows: Sequence[tuple[str, int | None]]) -> None:
        """The dedup rows of messages that recorded no event (the primary key refuses a second one)."""
        if rows and self.dialect == "postgresql":
            copy_data(conn, "processed_messages", copytext.PROCESSED_COLUMNS, processed_pieces(rows))
        elif rows:
            conn.execute(schema.processed_messages.insert(), [{"message_id": m, "position": p} for m, p in rows])

    def check_unprocessed(self, conn: Connection, recorded: Sequence[str]) -> None:
        """Refuse the batch (`MessageRecordedTwice`) when one of `recorded`, the messages it records events
        for, has a dedup row: another writer recorded the message, with no event, while this batch was
        decided. A batch that records no event leaves the head where it was, so the head check cannot
        see it (ADR 0026). Run under the head lock, in the batch's transaction."""
        if recorded and (found := self._processed_among(conn, recorded)):
            raise MessageRecordedTwice(f"message {found!r} was recorded by another writer, with no event, "
                                       "while this batch was decided (is a second ledger running?)")

    def _processed_among(self, conn: Connection, message_ids: Sequence[str]) -> str | None:
        """One of `message_ids` that has a dedup row, if any (one probe of the primary key per id)."""
        if self.dialect == "postgresql":
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            cursor.execute(f"SELECT message_id FROM processed_messages WHERE message_id = {ANY_JSON_TEXTS} LIMIT 1",
                           (json_texts(message_ids),))
            row = cursor.fetchone()
            return None if row is None else str(row[0])
        pm = schema.processed_messages.c.message_id
        found = conn.execute(select(pm).where(pm.in_(sorted(set(message_ids)))).limit(1)).scalar()
        return None if found is None else str(found)

    def offsets_sql(self, conn: Connection, consumer: str, offsets: dict[tuple[str, int], int]) -> str:
        """`save_offsets` on PostgreSQL as one literal statement (for `lock_head`'s round trip)."""
        values = ", ".join(f"({sql_literal(conn, consumer)}, {sql_literal(conn, t)}, {int(p)}, {int(o)})"
                           for (t, p), o in offsets.items())
        return (f"INSERT INTO consumer_offsets (consumer, topic, partition, next_offset) VALUES {values} "
                "ON CONFLICT (consumer, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset")

    def save_offsets(self, conn: Connection, consumer: str, offsets: dict[tuple[str, int], int]) -> None:
        """Store the next offset to read per (topic, partition), in the caller's transaction."""
        if not offsets:
            return
        if self.dialect == "postgresql":
            conn.connection.driver_connection.execute(self.offsets_sql(conn, consumer, offsets))  # type: ignore[union-attr]
            return
        rows = [
            {"consumer": consumer, "topic": t, "partition": p, "next_offset": o}
            for (t, p), o in offsets.items()
        ]
        s = sqlite.insert(schema.consumer_offsets).values(rows)
        conn.execute(s.on_conflict_do_update(
            index_elements=["consumer", "topic", "partition"],
            set_={"next_offset": s.excluded.next_offset},
        ))


class SQLiteTransaction:
    """`BatchTransaction` on the embedded store: each step its statements (`BEGIN IMMEDIATE` takes the lock)."""

    def __init__(self, recorder: EventRecorder, conn: Connection) -> None:
        self.recorder = recorder
        self.conn = conn

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.conn.begin():
            yield

    def lock_head(self, batch: RecordBatch, consumer: str) -> None:
        head = self.recorder.lock_head(self.conn)
        if head != (batch.start_position, batch.start_hash):
            raise LogMoved(head, batch.start_position)

    def check_dedup(self, recorded: Sequence[str]) -> None:
        self.recorder.check_unprocessed(self.conn, recorded)

    def append(self, records: Sequence[RecordedEvent], texts: Sequence[tuple[str, str]],
               dedup: Sequence[tuple[str, int | None]]) -> None:
        self.recorder.insert_recorded(self.conn, records, texts)
        self.recorder.insert_processed(self.conn, dedup)

    def write_projections(self, rows: ChangedRows) -> None:
        projections.write_rows(self.conn, rows)

    def save_offsets(self, consumer: str, offsets: Offsets) -> None:
        self.recorder.save_offsets(self.conn, consumer, offsets)


class PostgresTransaction:
    """`BatchTransaction` on PostgreSQL: `BEGIN`, the head lock, the head, the DELETE of the job rows the batch
    replaces and the offsets in one round trip (none of those can fail on a conflict, and all roll back with
    the batch when the head moved), then one COPY per table (ADR 0022). The writer process (ADR 0025) runs
    the same steps from the pieces it is sent (`lock`, `copy`, `check_dedup`, `upsert`)."""

    def __init__(self, recorder: EventRecorder, conn: Connection) -> None:
        self.recorder = recorder
        self.conn = conn

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with explicit_begin(self.conn), self.conn.begin():
            yield

    def lock_head(self, batch: RecordBatch, consumer: str) -> None:
        self.lock(batch.start_position, batch.start_hash, consumer, batch.offsets, projections.held_jobs(batch.rows))

    def lock(self, position: int, head_hash: str, consumer: str, offsets: Offsets, held_jobs: Sequence[str]) -> None:
        """`lock_head` of a batch that follows (`position`, `head_hash`), saves `offsets` and replaces the rows
        of `held_jobs`."""
        conn = self.conn
        first = [projections.jobs_delete_sql_for(conn, held_jobs)] if held_jobs else []
        if offsets:
            first.append(self.recorder.offsets_sql(conn, consumer, offsets))
        head = self.recorder.lock_head(conn, first, begin=True)
        if head != (position, head_hash):
            raise LogMoved(head, position)

    def check_dedup(self, recorded: Sequence[str]) -> None:
        self.recorder.check_unprocessed(self.conn, recorded)

    def append(self, records: Sequence[RecordedEvent], texts: Sequence[tuple[str, str]],
               dedup: Sequence[tuple[str, int | None]]) -> None:
        self.copy("events", EVENT_COLUMNS, events_pieces(records, texts))
        self.copy("processed_messages", copytext.PROCESSED_COLUMNS, processed_pieces(dedup))

    def write_projections(self, rows: ChangedRows) -> None:
        projections.write_rows(self.conn, rows, jobs_deleted=True)  # (their DELETE went with the lock)

    def save_offsets(self, consumer: str, offsets: Offsets) -> None:
        """Saved with the head lock already (`lock`)."""

    def copy(self, table: str, columns: Sequence[str], pieces: Iterable[bytes]) -> None:
        copy_data(self.conn, table, columns, pieces)

    def upsert(self, table: str, key: str, keys: list[str], rows: list[dict[str, object]]) -> None:
        projections.upsert_rows(self.conn, table, key, keys, rows)
