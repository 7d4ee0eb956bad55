"""The ledger's work on each message of a batch, without IO: decode (or dead-letter) every message, then
decide each command on the state the ones before it left and fold its events into the projector. The
ledger (`steward.ledger.core.Ledger.prepare`) runs these for every message, between its store reads and
the encoding of the events, so the module is compiled with mypyc (ADR 0020)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from steward.bus.envelope import Envelope
from steward.domain.commands import Command, command_from_dict
from steward.domain.decide import decide_or_reject
from steward.domain.errors import DomainError
from steward.store.encoding import PendingAppend
from steward.store.projector import Key, Projector


@dataclass(frozen=True, slots=True)
class DeadLetter:
    raw: bytes | None
    error: str
    source: str


Decoded = tuple[str, Envelope, Command]  # (source, envelope, command)


def decode_messages(messages: Sequence[tuple[str, bytes | None]],
                    max_message_bytes: int) -> tuple[list[Decoded], list[DeadLetter]]:
    """Each message (source, raw bytes) as its envelope and command, or a dead letter naming the problem:
    oversized (cut to its first 4 KiB), not an envelope, or not a valid command."""
    decoded: list[Decoded] = []
    dead: list[DeadLetter] = []
    for source, raw in messages:
        if raw is not None and len(raw) > max_message_bytes:
            dead.append(DeadLetter(raw[:4096], f"oversized: {len(raw)} bytes, the limit is {max_message_bytes}",
                                   source))
            continue
        try:
            env = Envelope.decode(raw)
            command = command_from_dict(env.type, env.payload)
        except (ValueError, DomainError) as err:
            dead.append(DeadLetter(raw, str(err), source))
            continue
        decoded.append((source, env, command))
    return decoded, dead


def decide_messages(proj: Projector, decoded: list[Decoded], seen: set[str], now: float,
                    position: int) -> tuple[list[PendingAppend], list[Key], int]:
    """Decide each command not `seen` yet (redelivered messages are skipped; `seen` gains the rest) on the
    projector's state, in order, folding its events into `proj` as positions after `position`. Returns the
    events per message with the message's metadata, the projection rows changed, and the last position."""
    batch: list[PendingAppend] = []
    changed: list[Key] = []
    view = proj.view()
    for source, env, command in decoded:
        mid = env.id
        if mid in seen:
            continue  # a redelivered message: recorded already
        seen.add(mid)
        if (view.used is not proj.used or view.allocations is not proj.allocations
                or view.nodes is not proj.nodes or view.policy is not proj.policy
                or view.jobs is not proj.jobs):
            view = proj.view()  # a new view only when the projector holds another object
        events = decide_or_reject(view, command, now)
        for ev in events:
            position += 1
            changed += proj.apply(ev, now, position)
        meta: dict[str, Any] = {**env.meta, "causation_id": mid, "command": env.type, "source": source}
        if events and events[0].type == "CommandRejected":
            meta["input"] = env.payload  # a rejection's event cannot carry the command itself
        batch.append(PendingAppend(events, meta, mid))
    return batch, changed, position
