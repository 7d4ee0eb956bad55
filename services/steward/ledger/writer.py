"""The ledger's PostgreSQL writer, in a process of its own (ADR 0025).

The pipelined ledger (ADR 0015) decides batch N+1 in its main thread while a writer thread records batch N.
Both ran under one GIL: the writer's ~10 round trips each needed the GIL back, and psycopg's Python half ran
on it. Here the writer thread of the ledger only builds each batch's COPY text (compiled,
`steward.store.copytext`, a piece of 256 rows at a time) and hands the pieces to this process as they are
built, over a socket pair (`steward.ledger.wire`: marshal'd tuples of plain values); the process runs the
batch's one transaction with its own connection and answers how it ended. Waiting for that answer holds no
GIL, so the deciding thread has the parent's GIL to itself except while the pieces are built.

A batch on the wire, in order (the process starts on the transaction as soon as the first message arrives,
while the parent builds the rest):

- `("begin", start_position, start_hash, consumer, offsets, held_jobs)`: `BEGIN`, the head lock, the head,
  the `DELETE` of the job rows the batch replaces and the offsets upsert in one round trip (ADR 0022, 3);
  the head is checked against the one the batch was decided on;
- `("copy", table, columns, piece)` per piece of COPY text, consecutive pieces of a table in one COPY;
- `("check", message ids)`: the messages the batch records events for have no dedup row
  (`EventStore.check_unprocessed`, ADR 0026);
- `("upsert", table, key, keys, rows)` for the few allocation and node rows a batch replaces;
- `("commit",)` once the parent published the batch's dead letters (before the offsets that skip them can
  commit), or `("rollback",)` when it could not.

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
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from steward.ledger.wire import Wire, die_with_parent, start_child, stop_child

log = logging.getLogger("steward.ledger.writer")

Offsets = dict[tuple[str, int], int]
# what a batch hands over: the messages above, up to (not including) `commit`
Message = tuple[Any, ...]


class WriterFailed(RuntimeError):
    """The writer process did not commit the batch (its error, e.g. the store is away); nothing of it was
    committed."""


class WriterDied(RuntimeError):
    """The writer process exited: whether the batch it was writing committed is known only to the store."""


class WriterStage:
    """The ledger's side: starts the writer process, hands it batches, and returns how each ended."""

    def __init__(self, store_url: str) -> None:
        self._conn, self._proc = start_child("steward.ledger.writer")  # as the fetch process (ADR 0019, 4)
        self._conn.send((store_url,))
        self.cpu_s = 0.0  # the process's CPU, known once it stopped
        self.pid = self._proc.pid

    def write(self, messages: Iterator[Message], before_commit: Callable[[], None] | None = None) -> None:
        """Send one batch (`messages`, built while they are sent), run `before_commit` once all are sent, and
        wait for the batch's end. Raises `LogMoved`, `WriterFailed`, `WriterDied` or what `before_commit`
        raised (the batch is then rolled back)."""
        from steward.ledger.core import LogMoved
        from steward.store.eventstore import MessageRecordedTwice

        try:
            for message in messages:
                self._conn.send(message)
        except OSError:
            raise self._died() from None
        except BaseException:  # building a piece failed (CopyTextError): the batch is rolled back
            self._end(("rollback",))
            raise
        if before_commit is not None:
            try:
                before_commit()
            except BaseException:
                self._end(("rollback",))
                raise
        kind, *args = self._end(("commit",))
        if kind == "committed":
            return
        if kind == "moved":
            raise LogMoved(f"the log moved under the ledger: head {args[0]}, expected {args[2]} "
                           "(is a second ledger running?)")
        if args[0] == MessageRecordedTwice.__name__:  # the same refusal as the in-process writer's
            raise MessageRecordedTwice(args[1])
        raise WriterFailed(f"{args[0]}: {args[1]}")

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


def batch_messages(start_position: int, start_hash: str, consumer: str, offsets: Offsets,
                   held_jobs: Sequence[str], tables: Iterator[Message]) -> Iterator[Message]:
    """A batch's messages: its `begin`, then `tables` (its `copy` and `upsert` messages)."""
    yield ("begin", start_position, start_hash, consumer, offsets, list(held_jobs))
    yield from tables


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


class _Moved(Exception):
    def __init__(self, head: tuple[int, str]) -> None:
        super().__init__()
        self.head = head


def writer_main(conn: Wire) -> None:
    """The writer process: run each batch the ledger sends in one transaction, and answer how it ended."""
    from sqlalchemy import Connection

    from steward.store import projections
    from steward.store.eventstore import EventStore, copy_data, explicit_begin

    try:
        (store_url,) = conn.recv()
    except (EOFError, OSError):
        return
    store = EventStore.from_url(store_url)
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
                db = kept
                with explicit_begin(db), db.begin() as tx:
                    statements = [projections.jobs_delete_sql_for(db, held)] if held else []
                    if offsets:
                        statements.append(store.offsets_sql(db, consumer, offsets))
                    head = store.lock_head(db, statements, begin=True)
                    if head != (position, head_hash):
                        raise _Moved(head)
                    while (message := reader.peek())[0] in ("copy", "check", "upsert"):
                        if message[0] == "copy":
                            copy_data(db, message[1], message[2], reader.pieces(message[1]))
                        elif message[0] == "check":
                            reader.take()
                            store.check_unprocessed(db, message[1])
                        else:
                            reader.take()
                            projections.upsert_rows(db, *message[1:])
                    ended = True
                    if reader.take()[0] != "commit":
                        tx.rollback()
                        answer = ("failed", "RolledBack", "the ledger rolled the batch back")
            except _Moved as moved:
                answer = ("moved", moved.head[0], moved.head[1], position)
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


def _first_line(err: BaseException) -> str:
    text = str(err)
    return text.splitlines()[0] if text else ""


if __name__ == "__main__":  # python -m steward.ledger.writer FD PARENT_PID (started by WriterStage)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C stops the ledger, which stops this process
    die_with_parent(int(sys.argv[2]))
    writer_main(Wire.from_fd(int(sys.argv[1])))
