"""Publishing a command and waiting (bounded) for its outcome event in the store."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from steward.bus.envelope import command_envelope
from steward.bus.kafka import CommandPublisher
from steward.domain.commands import Command
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


class CommandGateway:
    def __init__(self, publisher: CommandPublisher, store: EventStore, timeout_s: float) -> None:
        self.publisher = publisher
        self.store = store
        self.timeout_s = timeout_s

    async def execute(self, command: Command, *, actor: str, role: str) -> Outcome:
        env = command_envelope(command, actor=actor, role=role)
        await asyncio.to_thread(self.publisher.publish, env)
        deadline = time.monotonic() + self.timeout_s
        delay = 0.01
        while time.monotonic() < deadline:
            events = await asyncio.to_thread(self.store.by_message, env.id)
            if events:
                return Outcome(env.id, events)
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 0.2)
        raise OutcomeTimeout(
            f"command {env.id} was published but no outcome was recorded within {self.timeout_s:.0f} s; "
            "is the ledger running? (steward doctor)"
        )
