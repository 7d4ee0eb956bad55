"""The read model's feeder, one per API process: it catches the read model up with the log (`ReadModel.refresh`)
every `poll_s`, and wakes the subscriptions waiting for the log to move; they then read what is new from
the same read model (or, for the audit's event stream, the log itself)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from steward.api.readmodel import ReadModel

log = logging.getLogger("steward.api")


class HeadWatch:
    def __init__(self, read: ReadModel, poll_s: float = 0.1) -> None:
        self.read = read
        self.poll_s = poll_s
        self.head = -1
        self._changed: asyncio.Condition | None = None
        self._task: asyncio.Task[None] | None = None

    def _cond(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def start(self) -> None:
        """Start feeding (on the running loop); `wait_beyond` starts it too."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._feed())

    async def _feed(self) -> None:
        cond = self._cond()
        failing = False
        while True:
            try:
                await asyncio.to_thread(self.read.refresh, True)
                failing = False
            except Exception as err:  # a store hiccup: try again at the next tick
                if not failing:
                    log.warning("the read model could not catch up with the log: %s", err)
                failing = True
            head = self.read.live.position
            if head != self.head:
                self.head = head
                async with cond:
                    cond.notify_all()
            await asyncio.sleep(self.poll_s)

    async def wait_beyond(self, position: int, timeout: float | None = None) -> int:
        """Wait until the read model is past `position` (or `timeout` passes); returns its position."""
        self.start()
        if self.head > position:
            return self.head
        cond = self._cond()
        async with cond:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(cond.wait_for(lambda: self.head > position), timeout)
        return self.head

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
