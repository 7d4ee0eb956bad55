"""Dead letters in the hash chain (issue 21 "Every refusal recorded"; ADR 0036).

Every message the ledger refuses (not an envelope, oversized, not a valid command, or a command its
sender may not issue) becomes a `CommandRefused` event in the stream `refused-<principal>` of the
component whose topic it came from: why, where it was on the bus (topic, partition, offset), the SHA-256
of its bytes, the principal, and what it claimed (command type, message id, actor). Like access denials
(ADR 0011), refusals are the cheapest thing to provoke, so they are rate-summarised: per principal and
window (`STEWARD_REFUSAL_WINDOW_S`, 60 s of ledger time) the first `STEWARD_REFUSAL_BURST` (20) are
recorded one by one and the rest become one summary event (`count`, first/last time, per-reason counts,
the last one's coordinates) once the window has closed. Every refusal is counted.

Pure: the ledger passes its clock's `now`; the state is a few small immutable records per principal,
saved before a batch is decided and restored when the batch is undone, so a redelivered refusal is
counted once.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from steward.bus.envelope import Envelope
from steward.bus.identity import sender_of_topic
from steward.domain.events import Event
from steward.ledger.deciding.steps import DeadLetter
from steward.store.encoding import PendingAppend

WINDOW_S = float(os.environ.get("STEWARD_REFUSAL_WINDOW_S", "60"))
BURST = int(os.environ.get("STEWARD_REFUSAL_BURST", "20"))
MAX_TEXT = 300  # each text field of the event (the schema's maxLength)
MAX_REASONS = 20  # distinct reasons a summary counts one by one; the rest under "(other reasons)"
EVENT_TYPE = "CommandRefused"


@dataclass(frozen=True, slots=True)
class Refused:
    """One refused message, as the chain records it."""

    principal: str
    topic: str
    partition: int
    offset: int
    reason: str
    digest: str
    size: int
    command: str
    message_id: str
    actor: str

    def payload(self, at: float) -> dict[str, Any]:
        return {
            "principal": self.principal, "topic": self.topic, "partition": self.partition, "offset": self.offset,
            "reason": self.reason, "digest": self.digest, "size": self.size, "command": self.command,
            "message_id": self.message_id, "actor": self.actor, "count": 1, "first_at": at, "last_at": at,
            "reasons": {},
        }


@dataclass(frozen=True, slots=True)
class Window:
    """A principal's current window: when it started, how many refusals were recorded one by one in it,
    and those past the burst, waiting for the summary."""

    start: float
    recorded: int = 0
    over: int = 0
    first_at: float = 0.0
    last_at: float = 0.0
    last: Refused | None = None
    reasons: tuple[tuple[str, int], ...] = ()


def source_coordinates(source: str) -> tuple[str, int, int]:
    """("topic", partition, offset) of a message's `source` ("topic/partition@offset")."""
    topic, _, rest = source.rpartition("/")
    partition, _, offset = rest.partition("@")
    try:
        return topic, int(partition), int(offset)
    except ValueError:
        return source, -1, -1


def describe(dead: DeadLetter, prefix: str) -> Refused:
    """What the chain records of a dead letter: its coordinates, digest and claims (read again from its
    bytes when they are an envelope at all)."""
    topic, partition, offset = source_coordinates(dead.source)
    sender = sender_of_topic(prefix, topic)
    principal = sender.principal if sender is not None else f"(not a command topic: {topic})"
    raw = dead.raw or b""
    command = message_id = actor = ""
    try:
        env = Envelope.decode(dead.raw)
        command, message_id, actor = env.type, env.id, str(env.meta.get("actor", ""))
    except Exception:  # not an envelope: nothing claimed
        pass
    return Refused(principal[:MAX_TEXT], topic[:MAX_TEXT], partition, offset, (dead.error or "refused")[:MAX_TEXT],
                   hashlib.sha256(raw).hexdigest(), len(raw), command[:MAX_TEXT], message_id[:MAX_TEXT],
                   actor[:MAX_TEXT])


class RefusalLog:
    """The per-principal windows; `record` turns a batch's dead letters into events."""

    def __init__(self, prefix: str, window_s: float = WINDOW_S, burst: int = BURST) -> None:
        if window_s <= 0 or burst < 0:
            raise ValueError(f"a refusal window is > 0 s and its burst >= 0, not {window_s} s and {burst}")
        self.prefix = prefix
        self.window_s = window_s
        self.burst = burst
        self.windows: dict[str, Window] = {}

    def save(self) -> dict[str, Window]:
        return dict(self.windows)

    def restore(self, saved: dict[str, Window]) -> None:
        self.windows = dict(saved)

    def record(self, dead: Sequence[DeadLetter], now: float) -> list[PendingAppend]:
        """The events of `dead` (in order) and of every summary that is due, as of `now`."""
        out = self.due(now)
        for d in dead:
            refused = describe(d, self.prefix)
            key = refused.principal
            window = self.windows.get(key)
            if window is not None and now >= window.start + self.window_s:
                out += self._summary(key, window)
                window = None
            if window is None:
                window = Window(now)
            if window.recorded < self.burst:
                self.windows[key] = replace(window, recorded=window.recorded + 1)
                out.append(_pending(key, refused.payload(now), refused, d.source))
                continue
            reasons = dict(window.reasons)
            reason = refused.reason if refused.reason in reasons or len(reasons) < MAX_REASONS else "(other reasons)"
            reasons[reason] = reasons.get(reason, 0) + 1
            self.windows[key] = replace(window, over=window.over + 1, first_at=window.first_at if window.over else now,
                                        last_at=now, last=refused, reasons=tuple(sorted(reasons.items())))
        return out

    def due(self, now: float) -> list[PendingAppend]:
        """The summaries of the windows that closed before `now` (each once); closed windows are dropped."""
        out: list[PendingAppend] = []
        for key in sorted(self.windows):
            window = self.windows[key]
            if now >= window.start + self.window_s:
                out += self._summary(key, window)  # (which drops the window)
        return out

    def pending(self, now: float) -> bool:
        """Whether a summary is due at `now` (the ledger records it even when no message comes)."""
        return any(w.over and now >= w.start + self.window_s for w in self.windows.values())

    def _summary(self, key: str, window: Window) -> list[PendingAppend]:
        self.windows.pop(key, None)
        last = window.last
        if not window.over or last is None:
            return []
        payload = {**last.payload(window.last_at), "count": window.over, "first_at": window.first_at,
                   "last_at": window.last_at, "reasons": dict(window.reasons),
                   "reason": f"{window.over} refusals past the first {self.burst} in {self.window_s:g} s"[:MAX_TEXT]}
        return [_pending(key, payload, last, f"{last.topic}/{last.partition}@{last.offset}")]


def _pending(principal: str, payload: dict[str, Any], refused: Refused, source: str) -> PendingAppend:
    """A refusal as events to append: the ledger's own record (no message id: nothing to deduplicate, the
    offsets stored with it skip the message), with the principal as the actor."""
    meta = {"actor": principal, "role": "component", "command": refused.command or "(none)", "source": source,
            "correlation_id": refused.message_id or None, "causation_id": None}
    return PendingAppend([Event(f"refused-{principal}", EVENT_TYPE, payload)], meta, None)
