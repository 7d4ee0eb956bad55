"""Every access denial is recorded as an audit event in the hash chain (issue 7: "denials are recorded as
audit events"): the API sends a `RecordAccessDenial` command through the same path as every other change
(Kafka -> ledger -> `AccessDenied` in the `access-<subject>` stream), with the denied subject as the
command's actor. The caller's answer does not wait for it and does not depend on it.

Abuse: refusals are cheap to provoke, so they must not flood the log. Per key (the API token; else the
JWT subject; else, unauthenticated, the client address) and per window of `window_s` seconds, the first
`burst` denials are recorded one by one; the rest are counted, and one summary event (`count`, first and
last time, how many per operation) is recorded when the window closes (on the key's next denial, on the
periodic `flush`, or at shutdown). So a key adds at most `burst + 1` events per window, however hard it
tries, and no denial goes uncounted. Keys beyond `max_keys` share one overflow key.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from steward.auth.principal import Principal
from steward.domain.commands import RecordAccessDenial

log = logging.getLogger("steward.auth.denials")

MAX_TEXT = 300
OVERFLOW_KEY = "*overflow*"

Publish = Callable[[RecordAccessDenial], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Denial:
    operation: str
    target: str
    reason: str


@dataclass(slots=True)
class _Window:
    start: float
    subject: str
    role: str
    token_id: str
    client: str
    recorded: int = 0
    suppressed: int = 0
    first_at: float = 0.0
    last_at: float = 0.0
    operations: dict[str, int] = field(default_factory=dict)


def denial_key(principal: Principal | None, client: str) -> str:
    if principal is None:
        return f"addr:{client}"
    return principal.rate_key


class DenialAuditor:
    """Turns denials into `RecordAccessDenial` commands, at most `burst + 1` per key and window."""

    def __init__(self, publish: Publish, *, burst: int = 20, window_s: float = 60.0,
                 clock: Callable[[], float] = time.time, max_keys: int = 10_000) -> None:
        if burst < 1 or window_s <= 0:
            raise ValueError("a denial audit needs burst >= 1 and window_s > 0")
        self._publish = publish
        self.burst = burst
        self.window_s = window_s
        self.clock = clock
        self.max_keys = max_keys
        self._windows: dict[str, _Window] = {}
        self.recorded = 0  # commands sent (single denials and summaries)
        self.denied = 0  # denials seen

    async def record(self, principal: Principal | None, denial: Denial, client: str = "") -> None:
        now = self.clock()
        self.denied += 1
        key = denial_key(principal, client)
        if key not in self._windows and len(self._windows) >= self.max_keys:
            key = OVERFLOW_KEY
        w = self._windows.get(key)
        if w is not None and now - w.start >= self.window_s:
            del self._windows[key]
            await self._summary(w)
            w = None
        subject = principal.subject if principal else "anonymous"
        role = principal.role.value if principal else "none"
        token_id = (principal.token_id or "") if principal else ""
        if w is None:
            overflow = key == OVERFLOW_KEY
            w = self._windows[key] = _Window(start=now, subject="*" if overflow else subject,
                                             role="*" if overflow else role, token_id="" if overflow else token_id,
                                             client="*" if overflow else client)
        if w.recorded < self.burst:
            w.recorded += 1
            await self._send(RecordAccessDenial(
                subject=_text(subject), role=role, operation=_text(denial.operation), target=_text(denial.target),
                reason=_text(denial.reason), first_at=now, last_at=now, token_id=_text(token_id),
                client=_text(client)))
            return
        if w.suppressed == 0:
            w.first_at = now
        w.suppressed += 1
        w.last_at = now
        op = _text(denial.operation)
        w.operations[op] = w.operations.get(op, 0) + 1

    async def flush(self, *, everything: bool = False) -> int:
        """Record the summaries of windows that have closed (all windows with `everything`, at shutdown)
        and forget those windows. Returns how many summaries were sent."""
        now = self.clock()
        done = [k for k, w in self._windows.items() if everything or now - w.start >= self.window_s]
        sent = 0
        for k in done:
            w = self._windows.pop(k)
            if w.suppressed:
                await self._summary(w)
                sent += 1
        return sent

    async def _summary(self, w: _Window) -> None:
        if not w.suppressed:
            return
        n, w.suppressed = w.suppressed, 0
        ops, w.operations = w.operations, {}
        await self._send(RecordAccessDenial(
            subject=_text(w.subject), role=_text(w.role), operation="*", target="*",
            reason=f"{n} more denials within {self.window_s:.0f} s past the limit of {self.burst} recorded one by one",
            first_at=w.first_at, last_at=w.last_at, count=n, token_id=_text(w.token_id), client=_text(w.client),
            operations=ops))

    async def _send(self, command: RecordAccessDenial) -> None:
        self.recorded += 1
        try:
            await self._publish(command)
        except Exception:  # the request is refused either way; losing its audit record must be loud
            log.exception("could not record an access denial: %s", command)


def _text(value: str) -> str:
    return value[:MAX_TEXT]
