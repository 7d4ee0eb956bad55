"""One poller of the store's head per API process, shared by every subscription: subscribers wait for
the head to move past what they have seen, then read what is new themselves."""

from __future__ import annotations

import asyncio
import contextlib

from steward.store.eventstore import EventStore


class HeadWatch:
    def __init__(self, store: EventStore, poll_s: float = 0.25) -> None:
        self.store = store
        self.poll_s = poll_s
        self.head = -1
        self._changed: asyncio.Condition | None = None
        self._task: asyncio.Task[None] | None = None
        self._waiters = 0

    def _cond(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def _poll(self) -> None:
        cond = self._cond()
        idle = 0
        while idle < 40:
            with contextlib.suppress(Exception):  # a store hiccup: try again at the next tick
                head = await asyncio.to_thread(self.store.head)
                if head != self.head:
                    self.head = head
                    async with cond:
                        cond.notify_all()
            idle = idle + 1 if self._waiters == 0 else 0
            await asyncio.sleep(self.poll_s)
        self._task = None

    async def wait_beyond(self, position: int, timeout: float | None = None) -> int:
        """Wait until the head is past `position` (or `timeout` passes); returns the head."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._poll())
        if self.head > position:
            return self.head
        cond = self._cond()
        self._waiters += 1
        try:
            async with cond:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(cond.wait_for(lambda: self.head > position), timeout)
        finally:
            self._waiters -= 1
        return self.head

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
