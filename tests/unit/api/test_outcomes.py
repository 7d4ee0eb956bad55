"""The shared outcome tail: one reader of the log per process wakes every mutation waiting for its outcome
(steward.api.outcomes), on a real migrated SQLite store written by the real ledger."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from steward.api.outcomes import OutcomeTail
from steward.bus.envelope import command_envelope
from steward.domain.commands import Command, SetAllocations
from steward.ledger.ledger import Ledger
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade


def _store(tmp_path: Path) -> EventStore:
    url = f"sqlite:///{tmp_path / 'steward.db'}"
    upgrade(url)
    return EventStore.from_url(url)


def _decide(ledger: Ledger, lock: threading.Lock, command: Command) -> str:
    env = command_envelope(command, actor="test", role="admin")
    with lock:
        ledger.process([("t", env.encode())], {})
    return env.id


def test_waiters_wake_on_their_own_outcome_only_and_share_reads(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ledger, lock = Ledger(store, consumer_name="t"), threading.Lock()
    _decide(ledger, lock, SetAllocations("cluster", {"a": 0.5}, "before the tail"))  # an older outcome
    tail = OutcomeTail(store, poll_s=0.01)

    async def main() -> tuple[list[int], bool, int]:
        cmds = [SetAllocations("cluster", {"a": 0.5, "b": 0.1 * i}, f"change {i}") for i in range(1, 6)]
        envs = [command_envelope(c, actor="test", role="admin") for c in cmds]
        waits = [tail.expect(e.id) for e in envs]
        never = tail.expect("not-a-message")
        await tail.ready()
        for e in envs:  # recorded after the tail started, in one batch of the ledger
            with lock:
                await asyncio.to_thread(ledger.process, [("t", e.encode())], {})
        positions = await asyncio.wait_for(asyncio.gather(*waits), 5)
        pending = not never.done()
        tail.forget("not-a-message")
        await asyncio.sleep(0.05)
        return list(positions), pending, tail.reads

    positions, pending, reads = asyncio.run(main())
    assert reads >= 1
    assert positions == sorted(positions) and len(set(positions)) == 5
    for pos, recorded in zip(positions, [store.read(after=p - 1, limit=1)[0] for p in positions], strict=True):
        assert recorded.position == pos and recorded.message_id is not None
    assert pending  # an id nobody recorded stays waiting
    assert tail._task is None  # no waiter left: the tail stopped reading


def test_a_tail_started_late_still_sees_an_outcome_recorded_after_ready(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ledger, lock = Ledger(store, consumer_name="t"), threading.Lock()
    tail = OutcomeTail(store, poll_s=0.01)

    async def once(i: int) -> int:
        env = command_envelope(SetAllocations("cluster", {"a": 0.1 * i}, f"run {i}"), actor="test", role="admin")
        fut = tail.expect(env.id)
        await tail.ready()
        with lock:
            await asyncio.to_thread(ledger.process, [("t", env.encode())], {})
        return await asyncio.wait_for(fut, 5)

    # one asyncio.run per command (as a CLI call makes): each run starts the tail afresh on its own loop
    first = asyncio.run(once(1))
    second = asyncio.run(once(2))
    assert second > first > 0
