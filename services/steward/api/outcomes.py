"""One reader of the log per API process for every mutation waiting for its outcome.

A mutation publishes its command and waits for the ledger to record the outcome (events carrying the
command's message id). Polling the store once per waiting mutation costs a query per mutation per tick:
at a few submissions per second under load, that was most of the API's queries and held the thread pool
(bench soak). Instead, one task per process reads the (position, message id) of the events recorded
since it last looked, a small indexed range read, and wakes the mutations whose ids it saw; it runs only
while some mutation waits.

Ordering: appends are serialised and commit in position order (EventRecorder.lock_head), so an event
recorded after a command was published has a position above any head read before it was published. A
waiter therefore registers, then waits until the tail's starting position is set (`ready`), then
publishes: its outcome cannot fall behind the tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from sqlalchemy import select

from steward.store import schema
from steward.store.eventstore import EventStore

log = logging.getLogger("steward.api.outcomes")


class OutcomeTail:
    def __init__(self, store: EventStore, poll_s: float = 0.02, batch: int = 2000) -> None:
        self.store = store
        self.poll_s = poll_s
        self.batch = batch
        self.after = -1  # the last position read; -1: not started
        self.reads = 0  # queries made (for tests and benchmarks)
        self._waiters: dict[str, asyncio.Future[int]] = {}
        self._task: asyncio.Task[None] | None = None
        self._starting: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def expect(self, message_id: str) -> asyncio.Future[int]:
        """Register interest in `message_id`'s outcome; the future's result is the position of its first
        event. Call `ready()` after this and before publishing the command."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (asyncio.run per call): start afresh on it
            self._loop, self._task, self._starting, self.after = loop, None, None, -1
            self._waiters = {}
        fut: asyncio.Future[int] = loop.create_future()
        self._waiters[message_id] = fut
        return fut

    def forget(self, message_id: str) -> None:
        fut = self._waiters.pop(message_id, None)
        if fut is not None and not fut.done():
            fut.cancel()

    async def ready(self) -> None:
        """Return once the tail reads from a position no later than the store's head now."""
        if self._task is not None and not self._task.done():
            return
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        try:
            self.after = await asyncio.to_thread(self.store.head)
            self._task = asyncio.get_running_loop().create_task(self._run())
        finally:
            self._starting = None

    def _read(self, after: int) -> Sequence[tuple[int, str | None]]:
        t = schema.events
        q = select(t.c.position, t.c.message_id).where(t.c.position > after).order_by(t.c.position).limit(self.batch)
        with self.store.engine.connect() as conn:
            rows = conn.execute(q).all()
            conn.rollback()
        return [(int(r[0]), r[1]) for r in rows]

    async def _run(self) -> None:
        while self._waiters:
            rows: Sequence[tuple[int, str | None]] = ()
            try:
                rows = await asyncio.to_thread(self._read, self.after)
                self.reads += 1
            except Exception:  # a store hiccup: try again at the next tick; waiters time out on their own
                log.warning("reading outcomes failed; retrying", exc_info=True)
            for position, message_id in rows:
                if message_id is not None:
                    fut = self._waiters.pop(message_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result(position)
            if rows:
                self.after = rows[-1][0]
            if len(rows) < self.batch:
                await asyncio.sleep(self.poll_s)
        # no await between the loop's test and here: a waiter registered from now on starts a new tail
        self._task = None

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
