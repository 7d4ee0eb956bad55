"""Events: immutable facts the ledger records. `stream` is the aggregate they belong to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1

# The event types the domain emits, with the schema version each is written at.
EVENT_TYPES: dict[str, int] = {
    "AllocationsSet": 1,
    "NodeRegistered": 1,
    "JobSubmitted": 1,
    "JobPlaced": 1,
    "JobStarted": 1,
    "JobCompleted": 1,
    "JobFailed": 1,
    "JobCancelled": 1,
    "CommandRejected": 1,
}


@dataclass(frozen=True, slots=True)
class Event:
    stream: str
    type: str
    payload: dict[str, Any] = field(default_factory=dict)

    @property
    def schema_version(self) -> int:
        return EVENT_TYPES.get(self.type, SCHEMA_VERSION)
