"""Interactive sessions in the ledger (DESIGN.md "Interactive sessions"): a session is a job with
`class=interactive`, protected for its cap, warned before it, checkpointed and stopped (or made
preemptible) at the cap, restorable from its last checkpoint; an idle session loses its protection."""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import asdict, replace
from typing import Any, Final
from urllib.parse import urlsplit

from steward.domain.commands import (
    SESSION_AT_CAP,
    SESSION_WARNING_KINDS,
    OpenSession,
    ReachSessionCap,
    ReportSessionAddress,
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
from steward.domain.requests import require_admissible_request
from steward.domain.rules_version import CURRENT, patched
from steward.domain.state import Job, LedgerState

RESTORABLE_STATES = ("SUSPENDED", "CANCELLED", "FAILED", "COMPLETED")

# How a session says where it can be reached (ADR 0055): a URL of one of these schemes, or host:port.
SESSION_ADDRESS_SCHEMES: Final = ("http", "https", "ws", "wss", "ssh", "vnc", "rdp")
SESSION_ADDRESS_MAX_LENGTH: Final = 300
_HOST_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_HOST_PORT = re.compile(r"(?P<host>\[[^\]/]+\]|[^:/\[\]]+):(?P<port>[0-9]{1,5})")


def _host_problem(host: str) -> str | None:
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return f"'{host}' is no IPv6 address"
        return None
    if len(host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in host.split(".")):
        return f"'{host[:80]}' is no host name or IP address"
    return None


def _port_problem(port: int | None) -> str | None:
    return None if port is not None and 1 <= port <= 65535 else "needs a port from 1 to 65535"


def session_address_problem(address: str) -> str | None:
    """Why `address` cannot be published as how to reach a session (None: it can). It is a URL (http, https,
    ws, wss, ssh, vnc or rdp: a link the UI may show) or host:port, in printable ASCII, at most 300
    characters. It is kept in the log and read by everyone who may read the job, so it carries no
    credentials: no user or password, no query or fragment (a notebook's token goes to its user another way)."""
    if not isinstance(address, str) or not address:
        return "is empty"
    if len(address) > SESSION_ADDRESS_MAX_LENGTH:
        return f"is {len(address)} characters long, the limit is {SESSION_ADDRESS_MAX_LENGTH}"
    if not all("!" <= ch <= "~" for ch in address):
        return "must be printable ASCII without spaces (one URL or host:port)"
    if "://" not in address:
        match = _HOST_PORT.fullmatch(address)
        if match is None:
            return f"must be a URL ({', '.join(SESSION_ADDRESS_SCHEMES)}) or host:port"
        return _host_problem(match["host"]) or _port_problem(int(match["port"]))
    try:
        url = urlsplit(address)
        port = url.port
    except ValueError as err:
        return f"is no URL ({err})"
    if url.scheme.lower() not in SESSION_ADDRESS_SCHEMES:
        return f"has the scheme '{url.scheme[:20]}'; a session's URL is one of {', '.join(SESSION_ADDRESS_SCHEMES)}"
    if url.username is not None or url.password is not None:
        return "must not carry a user or password: everyone who may read the job reads it"
    if url.query or url.fragment or "?" in address or "#" in address:  # an empty one too: `http://h:1/#`
        return "must not carry a query or fragment (tokens): everyone who may read the job reads it"
    if not url.hostname:
        return "names no host"
    host = url.netloc.rsplit(":", 1)[0] if port is not None else url.netloc
    return _host_problem(host) or (_port_problem(port) if port is not None else None)


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


def decide_address(state: LedgerState, cmd: ReportSessionAddress, now: float) -> list[Event]:
    """A running session's current attempt published how to reach it (ADR 0055). Reports of an earlier
    attempt are refused (stale), a malformed address is refused naming the problem, and the address the
    attempt already has is no news."""
    job = _running_session(state, cmd.job_id, cmd.attempt)
    problem = session_address_problem(cmd.address)
    if problem is not None:
        raise InvalidCommand(f"the session address {cmd.address[:80]!r} {problem}")
    require_non_negative("published_at", cmd.published_at)
    if cmd.address == job.session_address:
        return []
    payload = asdict(cmd) | {"published_at": cmd.published_at or now, "reported_at": now}
    return [Event(cmd.aggregate, "SessionAddressPublished", payload)]


def previous_node(job: Job) -> str | None:
    """DESIGN.md "on its previous node when that has room": the first node it ran on."""
    return job.assignments[0][0] if job.assignments else None


def decide_restore(state: LedgerState, cmd: RestoreSession, now: float, rules: int = CURRENT) -> list[Event]:
    """The restored session is a new interactive job with the old one's request: its GPUs, command, cap and
    (rules version 4 on, ADR 0086) the GPU models and clusters it accepted. Rules version 5 on (ADR 0091), that
    request is checked as a submission's is, against today's nodes and pins (`requests.require_admissible_request`):
    a model or cluster no node has any more, a cluster outside a pin set since, or more GPUs than the nodes it
    admits hold, is refused with the reason (the restore would otherwise wait for good); under rules 4 the request
    stood as it was accepted."""
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
    if patched("restore_keeps_request", rules):  # recorded as `submitted_fields` always was: both lists
        submit = replace(submit, gpu_models=list(old.gpu_models), clusters=list(old.clusters))
    if patched("restore_checks_request", rules):
        try:
            require_admissible_request(state, submit, rules)
        except InvalidCommand as err:
            raise InvalidCommand(f"session '{old.job_id}' cannot be restored with what it asked for: {err.message}. "
                                 f"Open a new session asking for what the nodes offer now") from None
    link: dict[str, Any] = {"restored_from": old.job_id, "resume_from": old.checkpoint_path,
                            "preferred_node": node}
    return [
        Event(cmd.aggregate, "SessionRestored", {
            "job_id": old.job_id, "new_job_id": cmd.new_job_id, "checkpoint_path": old.checkpoint_path,
            "last_checkpoint_at": old.last_checkpoint_at, "preferred_node": node, "restored_at": now,
        }),
        Event(submit.aggregate, "JobSubmitted", submitted_fields(submit) | {"submitted_at": now} | link),
    ]
