"""Events: immutable facts the ledger records. `stream` is the aggregate they belong to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1

# The event types the domain emits, with the schema version each is written at.
EVENT_TYPES: dict[str, int] = {
    "AllocationsSet": 2,  # v2: optional `debug_quotas` (per child: GPUs, or null for the default)
    "NodeRegistered": 1,
    "JobSubmitted": 1,
    "JobPlaced": 1,
    "JobStarted": 1,
    "JobCompleted": 1,
    "JobFailed": 1,
    "JobCancelled": 1,
    "CommandRejected": 1,
    "JobDeferred": 1,
    "PolicySet": 1,
    # the time-slicing contract
    "JobPreemptionRequested": 1,
    "JobPreempted": 1,
    "JobRequeued": 1,
    "JobLost": 1,
    "CheckpointSaved": 1,
    "ExecutorHeartbeat": 1,
    # interactive sessions
    "SessionOpened": 1,
    "SessionWarned": 1,
    "SessionCapReached": 1,
    "SessionIdle": 1,
    "SessionActive": 1,
    "ProtectionRevoked": 1,
    "SessionRestored": 1,
    # nodes
    "NodeDrainRequested": 1,
    "NodeDrained": 1,
    "NodeResumed": 1,
    # budget periods
    "PeriodClosed": 1,
    # identity: a request the API refused (steward.domain.denials)
    "AccessDenied": 1,
}


@dataclass(frozen=True, slots=True, init=False)
class Event:
    stream: str
    type: str
    payload: dict[str, Any] = field(default_factory=dict)

    def __init__(self, stream: str, type: str, payload: dict[str, Any] | None = None) -> None:
        """The frozen dataclass's `__init__` written out: compiled (ADR 0020), each `object.__setattr__` is a
        native slot write instead of the generated `__init__` run as Python code."""
        object.__setattr__(self, "stream", stream)
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "payload", {} if payload is None else payload)

    @property
    def schema_version(self) -> int:
        return EVENT_TYPES.get(self.type, SCHEMA_VERSION)
