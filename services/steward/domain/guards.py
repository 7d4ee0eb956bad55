"""Guards shared by the ledger's command handlers: small named functions, each citing the rule of
DESIGN.md it enforces, each raising a typed `DomainError` (which becomes a `CommandRejected` event)."""

from __future__ import annotations

from steward.domain.errors import InvalidCommand, InvalidTransition, ProtectedJob, UnknownJob, UnknownNode
from steward.domain.state import ACTIVE_STATES, ClusterNode, Job, LedgerState


def require_job(state: LedgerState, job_id: str) -> Job:
    job = state.jobs.get(job_id)
    if job is None:
        raise UnknownJob(f"unknown job '{job_id}'")
    return job


def require_node(state: LedgerState, node_id: str) -> ClusterNode:
    node = state.nodes.get(node_id)
    if node is None:
        raise UnknownNode(f"unknown node '{node_id}'")
    return node


def require_current_attempt(job: Job, attempt: int) -> None:
    """Reports from an executor count only for the job's current attempt (stale reports are refused)."""
    if attempt != job.attempt:
        raise InvalidTransition(f"job '{job.job_id}' is at attempt {job.attempt}, report is for {attempt}")


def require_active(job: Job) -> None:
    """An attempt's outcome (exit, loss) is recorded once, while it holds its GPUs (placed or running)."""
    if job.state not in ACTIVE_STATES:
        raise InvalidTransition(f"job '{job.job_id}' is {job.state}, not placed or running")


def require_running(job: Job) -> None:
    """The contract acts on running jobs: protection runs from each start (DESIGN.md "Funded occupancy")."""
    if job.state != "RUNNING":
        raise InvalidTransition(f"job '{job.job_id}' is {job.state}, not running")


def require_not_protected(job: Job, now: float) -> None:
    """DESIGN.md "Funded occupancy": nothing preempts a job for `min_runtime` from each start; "no job
    is preempted twice inside its protection". Unfunded jobs are never protected."""
    if job.protected_until is not None and now < job.protected_until:
        raise ProtectedJob(
            f"job '{job.job_id}' is protected for {job.protected_until - now:.1f} s more "
            f"(until {job.protected_until:.3f})"
        )


def require_no_pending_preemption(job: Job) -> None:
    """The contract's saga runs once per attempt: checkpoint request, grace, stop, requeue."""
    if job.preemption_requested_at is not None:
        raise InvalidTransition(
            f"job '{job.job_id}' is already being preempted ({job.preemption_reason}, "
            f"requested at {job.preemption_requested_at:.3f})"
        )


def require_one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise InvalidCommand(f"{name} must be one of {', '.join(allowed)}, got '{value}'")


def require_non_negative(name: str, value: float) -> None:
    if not value >= 0:
        raise InvalidCommand(f"{name} must be 0 or more, got {value}")


def require_session(job: Job) -> None:
    """DESIGN.md "Interactive sessions": a session is a job with `class=interactive`."""
    if job.job_class != "interactive":
        raise InvalidTransition(f"job '{job.job_id}' is a {job.job_class} job, not an interactive session")
