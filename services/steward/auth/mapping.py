"""The group mapping in force: the last `GroupMappingSet` of the `identity-groups` stream (recorded by
the ledger from an admin's `setGroupMapping`), read again at most every `cache_s` seconds, so a change
takes effect in every API process within that time (and at once in the one that made it: `forget`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from steward.domain.identity import GROUPS_STREAM, GroupRule, rules_of
from steward.store.eventstore import EventStore


@dataclass(frozen=True, slots=True)
class MappingInForce:
    rules: tuple[GroupRule, ...]
    position: int  # of the event that set it (0: none set yet)
    recorded_at: float | None
    actor: str
    actor_name: str
    reason: str


NONE_SET = MappingInForce((), 0, None, "", "", "")


class GroupMappings:
    def __init__(self, store: EventStore, cache_s: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.cache_s = cache_s
        self.clock = clock
        self._read_at: float | None = None
        self._current = NONE_SET
        self._lock = threading.Lock()

    def current(self) -> MappingInForce:
        with self._lock:
            if self._read_at is not None and self.clock() - self._read_at < self.cache_s:
                return self._current
        events = self.store.stream(GROUPS_STREAM)
        found = NONE_SET
        if events:
            last = events[-1]
            found = MappingInForce(rules_of(last.payload["rules"]), last.position, last.recorded_at,
                                   str(last.metadata.get("actor") or ""), str(last.metadata.get("actor_name") or ""),
                                   str(last.payload.get("reason") or ""))
        with self._lock:
            self._current, self._read_at = found, self.clock()
        return found

    def rules(self) -> tuple[GroupRule, ...]:
        return self.current().rules

    def forget(self) -> None:
        with self._lock:
            self._read_at = None
