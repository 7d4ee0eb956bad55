"""Interactive sessions in the ledger (DESIGN.md "Interactive sessions"): a session is a job with
`class=interactive`, protected for its cap, warned before it, checkpointed and stopped (or made
preemptible) at the cap, restorable from its last checkpoint; an idle session loses its protection."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from steward.domain.commands import (
    SESSION_AT_CAP,
    SESSION_WARNING_KINDS,
    OpenSession,
    ReachSessionCap,
    ReportUtilisation,
    RestoreSession,
    RevokeProtection,
    SubmitJob,
    WarnSession,
    submitted_fields,
)
from steward.domain.errors import InvalidCommand, InvalidTransition, UnknownProject
from steward.domain.events import Event
from steward.domain.guards import (
    require_current_attempt,
    require_job,
    require_non_negative,
    require_one_of,
    require_running,
    require_session,
)
from steward.domain.state import Job, LedgerState

RESTORABLE_STATES = ("SUSPENDED", "CANCELLED", "FAILED", "COMPLETED")


def _running_session(state: LedgerState, job_id: str, attempt: int) -> Job:
    job = require_job(state, job_id)
    require_session(job)
    require_current_attempt(job, attempt)
    require_running(job)
    return job


def require_not_opened(job: Job) -> None:
    """A session attempt is opened once (its cap and warnings are fixed at its start)."""
    if job.session_cap_at is not None:
        raise InvalidTransition(f"session '{job.job_id}' attempt {job.attempt} is already open")


def require_cap_not_reached(job: Job) -> None:
    """DESIGN.md "then checkpointed and stopped (or made preemptible)": once per attempt."""
    if job.cap_reached_at is not None:
        raise InvalidTransition(f"session '{job.job_id}' already reached its cap")


def require_protected_still(job: Job) -> None:
    """Issue 6 "Idle sessions": an idle session loses its protection once."""
    if job.protection_revoked:
        raise InvalidTransition(f"session '{job.job_id}' has already lost its protection")


def require_restorable(job: Job) -> None:
    """DESIGN.md "Restoring re-opens it from its last checkpoint": a session that stopped (at its cap, or
    ended otherwise) and was not restored before; a running or waiting session needs no restore."""
    if job.restored_to is not None:
        raise InvalidTransition(f"session '{job.job_id}' was already restored as '{job.restored_to}'")
    if job.state not in RESTORABLE_STATES:
        raise InvalidTransition(f"session '{job.job_id}' is {job.state}; only a stopped session is restored")


def decide_open(state: LedgerState, cmd: OpenSession, now: float) -> list[Event]:
    job = _running_session(state, cmd.job_id, cmd.attempt)
    require_not_opened(job)
    require_one_of("at_cap", cmd.at_cap, SESSION_AT_CAP)
    require_non_negative("idle_limit_s", cmd.idle_limit_s)
    if not math.isfinite(cmd.cap_at) or (job.started_at is not None and cmd.cap_at < job.started_at):
        raise InvalidCommand(f"cap_at {cmd.cap_at} is before the session's start")
    payload = asdict(cmd) | {"started_at": job.started_at, "restored_from": job.restored_from, "opened_at": now}
    return [Event(cmd.aggregate, "SessionOpened", payload)]


def decide_warn(state: LedgerState, cmd: WarnSession, now: float) -> list[Event]:
    job = _running_session(state, cmd.job_id, cmd.attempt)
    require_one_of("kind", cmd.kind, SESSION_WARNING_KINDS)
    require_non_negative("seconds_left", cmd.seconds_left)
    payload = asdict(cmd) | {"cap_at": job.session_cap_at, "idle_since": job.idle_since, "warned_at": now}
    return [Event(cmd.aggregate, "SessionWarned", payload)]


def decide_reach_cap(state: LedgerState, cmd: ReachSessionCap, now: float) -> list[Event]:
    job = _running_session(state, cmd.job_id, cmd.attempt)
    require_one_of("action", cmd.action, SESSION_AT_CAP)
    require_cap_not_reached(job)
    payload = asdict(cmd) | {"cap_at": job.session_cap_at, "started_at": job.started_at, "reached_at": now}
    return [Event(cmd.aggregate, "SessionCapReached", payload)]


def decide_utilisation(state: LedgerState, cmd: ReportUtilisation, now: float) -> list[Event]:
    """Recorded when the session turns idle or busy again (a repeat of the known state is no news)."""
    job = _running_session(state, cmd.job_id, cmd.attempt)
    if cmd.idle == (job.idle_since is not None):
        return []
    payload = asdict(cmd) | {"reported_at": now}
    return [Event(cmd.aggregate, "SessionIdle" if cmd.idle else "SessionActive", payload)]


def decide_revoke(state: LedgerState, cmd: RevokeProtection, now: float) -> list[Event]:
    job = _running_session(state, cmd.job_id, cmd.attempt)
    require_protected_still(job)
    if not cmd.reason.strip():
        raise InvalidCommand("revoking a protection needs a reason")
    payload = asdict(cmd) | {"protected_until_was": job.protected_until, "idle_since": job.idle_since,
                             "revoked_at": now}
    return [Event(cmd.aggregate, "ProtectionRevoked", payload)]


def previous_node(job: Job) -> str | None:
    """DESIGN.md "on its previous node when that has room": the first node it ran on."""
    return job.assignments[0][0] if job.assignments else None


def decide_restore(state: LedgerState, cmd: RestoreSession, now: float) -> list[Event]:
    old = require_job(state, cmd.job_id)
    require_session(old)
    require_restorable(old)
    if not cmd.new_job_id:
        raise InvalidCommand("new_job_id must not be empty")
    if cmd.new_job_id in state.jobs:
        raise InvalidCommand(f"job '{cmd.new_job_id}' already exists")
    if not state.is_project(old.project):
        raise UnknownProject(f"project '{old.project}' of session '{old.job_id}' no longer exists")
    node = previous_node(old)
    submit = SubmitJob(
        job_id=cmd.new_job_id, project=old.project, gpus=old.gpus, min_runtime_s=old.min_runtime_s,
        command=list(old.command), resumable=old.resumable, job_class=old.job_class, priority=old.priority,
    )
    link: dict[str, Any] = {"restored_from": old.job_id, "resume_from": old.checkpoint_path,
                            "preferred_node": node}
    return [
        Event(cmd.aggregate, "SessionRestored", {
            "job_id": old.job_id, "new_job_id": cmd.new_job_id, "checkpoint_path": old.checkpoint_path,
            "last_checkpoint_at": old.last_checkpoint_at, "preferred_node": node, "restored_at": now,
        }),
        Event(submit.aggregate, "JobSubmitted", submitted_fields(submit) | {"submitted_at": now} | link),
    ]
