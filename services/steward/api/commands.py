"""Publishing a command and waiting (bounded) for its outcome event in the store."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from steward.api.outcomes import OutcomeTail
from steward.bus.envelope import command_envelope
from steward.bus.kafka import CommandPublisher
from steward.domain.commands import Command
from steward.ledger.ledger import Ledger
from steward.logs import current
from steward.store.eventstore import EventStore, RecordedEvent


class OutcomeTimeout(Exception):
    """The command was published but no outcome was recorded in time (the ledger may be down)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    message_id: str
    events: list[RecordedEvent]

    @property
    def rejected(self) -> RecordedEvent | None:
        return next((e for e in self.events if e.type == "CommandRejected"), None)

    @property
    def position(self) -> int:
        return self.events[-1].position if self.events else 0


class Gateway(Protocol):
    async def execute(self, command: Command, *, actor: str, role: str, actor_name: str = "") -> Outcome: ...

    async def publish(self, command: Command, *, actor: str, role: str) -> None:
        """Hand `command` to the ledger without waiting for its outcome (audit records the caller must
        not wait on): once this returns, the command is durably in the ingress log."""

    def intake(self) -> dict[str, Any]:
        """The state of the path commands take, as `/healthz` reports it (issue 22): for Kafka, the producer's
        `status()`; `state` is `connected` when mutations can be sent now."""
        ...

    def close(self) -> None: ...


class CommandGateway:
    """The production path: Kafka `commands` topic -> ledger -> store; the outcome is found by message id,
    by one shared reader of the log per process (steward.api.outcomes), not a poll per waiting mutation."""

    def __init__(self, publisher: CommandPublisher, store: EventStore, timeout_s: float,
                 tail: OutcomeTail | None = None) -> None:
        self.publisher = publisher
        self.store = store
        self.timeout_s = timeout_s
        self.tail = tail or OutcomeTail(store)

    async def execute(self, command: Command, *, actor: str, role: str, actor_name: str = "") -> Outcome:
        env = command_envelope(command, actor=actor, role=role, correlation_id=current(), actor_name=actor_name)
        seen = self.tail.expect(env.id)
        try:
            await self.tail.ready()
            await asyncio.to_thread(self.publisher.publish, env)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(seen), self.timeout_s)
        finally:
            self.tail.forget(env.id)
        # one read of the outcome's events (also the last chance when the tail missed it)
        events = await asyncio.to_thread(self.store.by_message, env.id)
        if events:
            return Outcome(env.id, events)
        raise OutcomeTimeout(
            f"command {env.id} was published but no outcome was recorded within {self.timeout_s:.0f} s; "
            "is the ledger running? (steward doctor)"
        )

    async def publish(self, command: Command, *, actor: str, role: str) -> None:
        await asyncio.to_thread(self.publisher.publish, command_envelope(command, actor=actor, role=role))

    def intake(self) -> dict[str, Any]:
        return {"via": "kafka", **self.publisher.status()}

    def close(self) -> None:
        self.publisher.close()


class LocalGateway:
    """The ledger in this process (no Kafka): for tests, benchmarks and a single-process embedding.
    Decides and records through the same `Ledger` unit of work the ledger service runs."""

    def __init__(self, store: EventStore) -> None:
        self.ledger = Ledger(store, consumer_name="local")
        self._lock = threading.Lock()

    def _process(self, raw: bytes) -> None:
        with self._lock:
            self.ledger.process([("local", raw)], {})

    async def execute(self, command: Command, *, actor: str, role: str, actor_name: str = "") -> Outcome:
        env = command_envelope(command, actor=actor, role=role, correlation_id=current(), actor_name=actor_name)
        await asyncio.to_thread(self._process, env.encode())
        events = await asyncio.to_thread(self.ledger.store.by_message, env.id)
        return Outcome(env.id, events)

    async def publish(self, command: Command, *, actor: str, role: str) -> None:
        await self.execute(command, actor=actor, role=role)

    def intake(self) -> dict[str, Any]:
        return {"via": "in-process ledger", "state": "connected"}

    def close(self) -> None:
        pass
