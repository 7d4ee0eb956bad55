"""The ledger's PostgreSQL writer, in a process of its own (ADR 0025).

The pipelined ledger (ADR 0015) decides batch N+1 in its main thread while a writer thread records batch N.
Both ran under one GIL: the writer's ~10 round trips each needed the GIL back, and psycopg's Python half ran
on it. Here the writer thread of the ledger only builds each batch's COPY text (compiled,
`steward.store.copytext`, a piece of 256 rows at a time) and hands the pieces to this process as they are
built, over a socket pair (`steward.ledger.processes`: marshal'd tuples of plain values); the process runs the
batch's one transaction with its own connection and answers how it ended. Waiting for that answer holds no
GIL, so the deciding thread has the parent's GIL to itself except while the pieces are built.

A batch on the wire, in order (the process starts on the transaction as soon as the first message arrives,
while the parent builds the rest):

- `("begin", start_position, start_hash, consumer, offsets, held_jobs)`: `BEGIN`, the head lock, the head,
  the `DELETE` of the job rows the batch replaces and the offsets upsert in one round trip (ADR 0022, 3);
  the head is checked against the one the batch was decided on;
- `("check", message ids)`: the messages the batch records events for have no dedup row
  (`EventRecorder.check_unprocessed`, ADR 0026);
- `("copy", table, columns, piece)` per piece of COPY text, consecutive pieces of a table in one COPY;
- `("upsert", table, key, keys, rows)` for the few allocation and node rows a batch replaces;
- `("commit",)` once the parent published the batch's dead letters (before the offsets that skip them can
  commit), or `("rollback",)` when it could not.

Those are the steps of the store's one batch sequence (`steward.store.recorder.record_batch`): the ledger runs
it with a `WriterTransaction`, whose steps send these messages, and the process runs each message with the
store's `PostgresTransaction`, the adapter the ledger's writer thread uses without a writer process.

The answer is `("committed",)`, `("moved", position, hash)` (the log does not end where the batch follows:
`LogMoved`, nothing committed) or `("failed", error type, message)` (nothing committed). The process keeps
no state between batches but its connection (a new one after any error). It dies with the ledger
(`PR_SET_PDEATHSIG`, and a closed socket); when it dies the ledger fails (`WriterDied`): a batch whose
commit it may or may not have reached is known only to the store, which a restarted ledger reads.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from steward.ledger.processes import Wire, die_with_parent, start_child, stop_child
from steward.store import copytext, projections
from steward.store.encoding import RecordedEvent
from steward.store.eventstore import MessageRecordedTwice, events_pieces, processed_pieces
from steward.store.leases import Fence, Fenced
from steward.store.projector import ChangedRows
from steward.store.recorder import EventRecorder, LogMoved, PostgresTransaction, RecordBatch

log = logging.getLogger("steward.ledger.writer")

Offsets = dict[tuple[str, int], int]
Message = tuple[Any, ...]  # one of the messages above


class WriterFailed(RuntimeError):
    """The writer process did not commit the batch (its error, e.g. the store is away); nothing of it was
    committed."""


class WriterDied(RuntimeError):
    """The writer process exited: whether the batch it was writing committed is known only to the store."""


class WriterStage:
    """The ledger's side: starts the writer process, hands it batches, and returns how each ended."""

    def __init__(self, store_url: str, fence: Fence | None = None, defer: bool = False) -> None:
        """`defer`: the process starts now (a standby's warm-up) and is told the store and fence by `open`."""
        self._conn, self._proc = start_child("steward.ledger.recording.writer")  # as the fetch process (ADR 0019, 4)
        self._store_url = store_url
        if not defer:
            self.open(fence)
        self.cpu_s = 0.0  # the process's CPU, known once it stopped
        self.pid = self._proc.pid

    def open(self, fence: Fence | None) -> None:
        """Tell the process the store and the fence (the lease epoch every head lock checks, ADR 0060)."""
        self.send((self._store_url, fence))

    def transaction(self) -> WriterTransaction:
        """A batch's `BatchTransaction` whose statements run in the process."""
        return WriterTransaction(self)

    def send(self, message: Message) -> None:
        try:
            self._conn.send(message)
        except OSError:
            raise self._died() from None

    def _end(self, message: Message) -> Any:
        """Send `message` (commit or rollback) and return the process's answer for the batch."""
        try:
            self._conn.send(message)
            return self._conn.recv()
        except (EOFError, OSError):
            raise self._died() from None

    def _died(self) -> WriterDied:
        try:
            code = self._proc.wait(1.0)
        except subprocess.TimeoutExpired:
            code = None
        return WriterDied(f"the writer process exited (exit code {code}); the ledger stops, and a restart "
                          "reads what the store committed")

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the process (it reports its CPU time on the way out)."""
        cpu = stop_child(self._conn, self._proc, timeout_s)
        if cpu is not None:
            self.cpu_s = cpu


class WriterTransaction:
    """`BatchTransaction` in the writer process: each step sends its messages (COPY text built a piece at a
    time, compiled, ADR 0022) and the process runs them as they come; the commit waits for its answer. The
    head is checked in the process: a moved log is raised at the commit (`LogMoved`), nothing committed."""

    def __init__(self, stage: WriterStage) -> None:
        self._stage = stage

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Raises `LogMoved`, `MessageRecordedTwice`, `WriterFailed`, `WriterDied`, or what the block raised
        (the batch is then rolled back)."""
        try:
            yield
        except WriterDied:
            raise
        except BaseException:  # building a piece failed (CopyTextError), or `before_commit` did
            self._stage._end(("rollback",))
            raise
        kind, *args = self._stage._end(("commit",))
        if kind == "committed":
            return
        if kind == "moved":
            raise LogMoved((args[0], args[1]), args[2])
        if args[0] == MessageRecordedTwice.__name__:  # the same refusal as the in-process adapter's
            raise MessageRecordedTwice(args[1])
        if args[0] == Fenced.__name__:  # a standby took over (ADR 0060): the ledger steps down
            role, epoch, lease_epoch = args[2]
            raise Fenced(role, epoch, lease_epoch)
        raise WriterFailed(f"{args[0]}: {args[1]}")

    def lock_head(self, batch: RecordBatch, consumer: str) -> None:
        self._stage.send(("begin", batch.start_position, batch.start_hash, consumer, batch.offsets,
                          projections.held_jobs(batch.rows)))

    def check_dedup(self, recorded: Sequence[str]) -> None:
        if recorded:
            self._stage.send(("check", list(recorded)))

    def append(self, records: Sequence[RecordedEvent], texts: Sequence[tuple[str, str]],
               dedup: Sequence[tuple[str, int | None]]) -> None:
        send = self._stage.send
        for piece in events_pieces(records, texts):
            send(("copy", "events", copytext.EVENT_COLUMNS, piece))
        for piece in processed_pieces(dedup):
            send(("copy", "processed_messages", copytext.PROCESSED_COLUMNS, piece))

    def write_projections(self, rows: ChangedRows) -> None:
        send = self._stage.send
        for table, key, keys, new in projections.keyed_rows(rows):
            if keys:
                send(("upsert", table, key, keys, new))
        for piece in projections.jobs_pieces(rows):
            send(("copy", "proj_jobs", copytext.JOB_COLUMNS, piece))

    def save_offsets(self, consumer: str, offsets: Offsets) -> None:
        """Sent with the head lock already (`lock_head`)."""


# ----------------------------------------------------------------------------------- the child process


class _Reader:
    """The parent's messages, with one read ahead (to tell where a table's pieces end)."""

    def __init__(self, conn: Wire) -> None:
        self._conn = conn
        self._ahead: Message | None = None

    def peek(self) -> Message:
        if self._ahead is None:
            self._ahead = tuple(self._conn.recv())
        return self._ahead

    def take(self) -> Message:
        message = self.peek()
        self._ahead = None
        return message

    def pieces(self, table: str) -> Iterator[bytes]:
        """The pieces of consecutive `copy` messages of `table`."""
        while (message := self.peek())[0] == "copy" and message[1] == table:
            self.take()
            yield message[3]


def writer_main(conn: Wire) -> None:
    """The writer process: run each batch the ledger sends in one transaction, and answer how it ended."""
    # lazy: only the writer child process opens the store; the ledger imports this module for WriterStage
    from sqlalchemy import Connection

    from steward.store.eventstore import EventStore

    try:
        first = conn.recv()
    except (EOFError, OSError):
        return
    if first[0] == "stop":  # stopped before it was opened (a standby that never took over)
        conn.send(("stopped", 0.0))
        return
    store_url, fence = first
    store = EventStore.from_url(store_url)
    recorder = EventRecorder(store, (str(fence[0]), int(fence[1])) if fence is not None else None)
    reader = _Reader(conn)
    kept: Connection | None = None
    cpu_started = time.process_time()
    try:
        while True:
            first = reader.take()
            if first[0] == "stop":
                conn.send(("stopped", time.process_time() - cpu_started))
                return
            _, position, head_hash, consumer, offsets, held = first
            answer: Message = ("committed",)
            ended = False
            try:
                if kept is None or kept.closed or kept.invalidated:
                    kept = store.engine.connect()
                tx = PostgresTransaction(recorder, kept)
                with tx.transaction():
                    tx.lock(position, head_hash, consumer, offsets, held)
                    while (message := reader.peek())[0] in ("copy", "check", "upsert"):
                        if message[0] == "copy":
                            tx.copy(message[1], message[2], reader.pieces(message[1]))
                        elif message[0] == "check":
                            reader.take()
                            tx.check_dedup(message[1])
                        else:
                            reader.take()
                            tx.upsert(*message[1:])
                    ended = True
                    if reader.take()[0] != "commit":
                        raise _RolledBack
            except _RolledBack:
                answer = ("failed", "RolledBack", "the ledger rolled the batch back")
            except LogMoved as moved:
                answer = ("moved", moved.head[0], moved.head[1], position)
            except Fenced as refused:
                answer = ("failed", Fenced.__name__, _first_line(refused),
                          (refused.role, refused.epoch, refused.lease_epoch))
            except (EOFError, OSError):
                raise  # the wire to the ledger (psycopg's errors are not OSErrors)
            except Exception as err:
                answer = ("failed", type(err).__name__, _first_line(err))
            if answer[0] != "committed" and kept is not None:
                kept.invalidate()  # a new connection for the next batch: this one may be mid-statement
                kept.close()
                kept = None
            if not ended:  # the rest of the batch is still on its way
                while reader.take()[0] not in ("commit", "rollback"):
                    pass
            conn.send(answer)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the ledger is gone: the open transaction (if any) is rolled back with the connection
    finally:
        store.engine.dispose()


class _RolledBack(Exception):
    """The ledger rolled the batch back (its `before_commit` failed)."""


def _first_line(err: BaseException) -> str:
    text = str(err)
    return text.splitlines()[0] if text else ""


if __name__ == "__main__":  # python -m steward.ledger.recording.writer FD PARENT_PID (started by WriterStage)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C stops the ledger, which stops this process
    die_with_parent(int(sys.argv[2]))
    writer_main(Wire.from_fd(int(sys.argv[1])))
