"""Access denials as audit events (issue 7 "Identity and roles": "denials are recorded as audit
events"). The API decides who may do what; the ledger records each refusal it reports in the hash
chain, like any other fact, as `AccessDenied` in the denied subject's `access-<subject>` stream."""

from __future__ import annotations

from dataclasses import asdict

from steward.domain.commands import RecordAccessDenial
from steward.domain.errors import InvalidCommand
from steward.domain.events import Event
from steward.domain.state import LedgerState

MAX_TEXT = 300


def require_denial_is_described(cmd: RecordAccessDenial) -> None:
    """An audit record says who was refused what and why: subject, role, operation and reason are
    named, each at most `MAX_TEXT` characters (the API truncates what callers send)."""
    for name in ("subject", "role", "operation", "target", "reason", "token_id", "client"):
        value: str = getattr(cmd, name)
        if len(value) > MAX_TEXT:
            raise InvalidCommand(f"'{name}' of an access denial has at most {MAX_TEXT} characters")
    for name in ("subject", "role", "operation", "reason"):
        if not getattr(cmd, name).strip():
            raise InvalidCommand(f"an access denial names its '{name}'")


def require_denial_count(cmd: RecordAccessDenial) -> None:
    """A record stands for `count` >= 1 denials over [first_at, last_at]; a summary's per-operation
    counts add up to its count."""
    if cmd.count < 1:
        raise InvalidCommand(f"an access denial record stands for at least 1 denial, got {cmd.count}")
    if cmd.last_at < cmd.first_at:
        raise InvalidCommand("an access denial's last_at is before its first_at")
    if cmd.operations and (any(n < 1 for n in cmd.operations.values()) or sum(cmd.operations.values()) != cmd.count):
        raise InvalidCommand("an access denial summary's per-operation counts must be >= 1 and add up to its count")


def decide_access_denial(state: LedgerState, cmd: RecordAccessDenial, now: float) -> list[Event]:
    require_denial_is_described(cmd)
    require_denial_count(cmd)
    return [Event(cmd.aggregate, "AccessDenied", asdict(cmd))]
