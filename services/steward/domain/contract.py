"""The time-slicing contract in the ledger (DESIGN.md "The time-slicing contract"): preemption requests,
the stop they end in, requeue with the original submit time (auto-resume when resumable), lost attempts,
checkpoints and executor heartbeats. Pure: `now` comes in as an argument."""

from __future__ import annotations

from typing import Any

from steward.domain.commands import (
    PREEMPTION_REASONS,
    ReportCheckpointSaved,
    ReportHeartbeat,
    ReportJobLost,
    ReportJobPreempted,
    RequestPreemption,
)
from steward.domain.errors import InvalidCommand, InvalidTransition
from steward.domain.events import Event
from steward.domain.guards import (
    require_active,
    require_current_attempt,
    require_job,
    require_no_pending_preemption,
    require_non_negative,
    require_not_protected,
    require_one_of,
    require_running,
)
from steward.domain.state import TERMINAL_STATES, Job, LedgerState

SESSION_CAP_REASON = "session_cap"


def require_stop_was_asked(job: Job, reason: str) -> None:
    """DESIGN.md: a running job is stopped only after a recorded preemption request, or, for a session,
    after it reached its cap ("then checkpointed and stopped")."""
    if reason == SESSION_CAP_REASON:
        if job.cap_reached_at is None:
            raise InvalidTransition(f"session '{job.job_id}' has not reached its cap")
        return
    if job.preemption_requested_at is None:
        raise InvalidTransition(f"job '{job.job_id}' has no recorded preemption request")


def resume_checkpoint(job: Job, reported_path: str = "") -> str | None:
    """DESIGN.md "requeue ... (and auto-resume when `resumable`)": the next attempt gets the last
    checkpoint when the job can resume from one."""
    if not job.resumable:
        return None
    return reported_path or job.checkpoint_path


def requeued(job: Job, reason: str, now: float, checkpoint_path: str = "") -> Event:
    """DESIGN.md "requeue with its original submit time"."""
    resume_from = resume_checkpoint(job, checkpoint_path)
    return Event(f"job-{job.job_id}", "JobRequeued", {
        "job_id": job.job_id, "attempt": job.attempt, "reason": reason, "submitted_at": job.submitted_at,
        "resume": resume_from is not None, "resume_from": resume_from, "requeued_at": now,
    })


def decide_request_preemption(state: LedgerState, cmd: RequestPreemption, now: float) -> list[Event]:
    job = require_job(state, cmd.job_id)
    attempt = cmd.attempt or job.attempt
    require_current_attempt(job, attempt)
    require_one_of("reason", cmd.reason, PREEMPTION_REASONS)
    require_non_negative("grace_s", cmd.grace_s)
    require_running(job)
    require_no_pending_preemption(job)
    require_not_protected(job, now)
    payload: dict[str, Any] = {
        "job_id": job.job_id, "attempt": attempt, "reason": cmd.reason, "grace_s": cmd.grace_s,
        "requeue": cmd.requeue, "for_job_id": cmd.for_job_id, "requested_at": now,
        "evidence": dict(cmd.evidence) | {
            "protected_until": job.protected_until, "funded": job.funded, "started_at": job.started_at,
            "last_checkpoint_at": job.last_checkpoint_at, "protection_revoked": job.protection_revoked,
        },
    }
    return [Event(cmd.aggregate, "JobPreemptionRequested", payload)]


def decide_report_preempted(state: LedgerState, cmd: ReportJobPreempted, now: float) -> list[Event]:
    job = require_job(state, cmd.job_id)
    require_current_attempt(job, cmd.attempt)
    require_running(job)
    require_stop_was_asked(job, cmd.reason)
    requested = job.preemption_requested_at is not None
    requeue = job.preemption_requeue if requested else False
    reason = job.preemption_reason or cmd.reason
    checkpoint_path = cmd.checkpoint_path or job.checkpoint_path or ""
    evidence = dict(cmd.evidence) | {
        "started_at": job.started_at, "protected_until": job.protected_until, "funded": job.funded,
        "stopped_at": now,
    }
    if requested:
        evidence |= {"requested_at": job.preemption_requested_at, "grace_s": job.preemption_grace_s,
                     "for_job_id": job.preemption_for}
    payload: dict[str, Any] = {
        "job_id": job.job_id, "attempt": job.attempt, "reason": reason, "exit_code": cmd.exit_code,
        "grace_expired": cmd.grace_expired, "requeue": requeue,
        "checkpoint_path": checkpoint_path or None,
        "checkpoint_at": cmd.checkpoint_at if cmd.checkpoint_at is not None else job.last_checkpoint_at,
        "evidence": evidence,
    }
    events = [Event(cmd.aggregate, "JobPreempted", payload)]
    if requeue:
        events.append(requeued(job, "preempted", now, cmd.checkpoint_path))
    return events


def decide_report_lost(state: LedgerState, cmd: ReportJobLost, now: float) -> list[Event]:
    """DESIGN.md "The time-slicing contract" (requeue): a lost attempt is requeued. An executor that went
    silent is suspected, its nodes unhealthy until it reports again; one that answered (`executor_answered`:
    it could not start or keep the attempt and said why) is alive, and its nodes stay as they are (ADR 0087:
    for a Kubernetes executor, one refused pod marked the whole cluster unhealthy)."""
    job = require_job(state, cmd.job_id)
    require_current_attempt(job, cmd.attempt)
    require_active(job)
    executors = sorted({state.nodes[n].executor for n in job.nodes if n in state.nodes})
    payload: dict[str, Any] = {
        "job_id": job.job_id, "attempt": job.attempt, "reason": cmd.reason, "nodes": list(job.nodes),
        "executors": executors, "was": job.state, "last_checkpoint_at": job.last_checkpoint_at,
        "unhealthy": [] if cmd.executor_answered else nodes_to_mark_unhealthy(state, executors),
    }
    if cmd.executor_answered:  # only then: the losses recorded before keep their form
        payload["executor_answered"] = True
    return [Event(cmd.aggregate, "JobLost", payload), requeued(job, "lost", now)]


def decide_checkpoint_saved(state: LedgerState, cmd: ReportCheckpointSaved, now: float) -> list[Event]:
    job = require_job(state, cmd.job_id)
    require_current_attempt(job, cmd.attempt)
    if job.state in TERMINAL_STATES:
        raise InvalidTransition(f"job '{job.job_id}' is already {job.state}")
    if not cmd.path:
        raise InvalidCommand("a checkpoint needs the path it was saved to")
    require_non_negative("saved_at", cmd.saved_at)
    return [Event(cmd.aggregate, "CheckpointSaved", {
        "job_id": job.job_id, "attempt": job.attempt, "path": cmd.path, "saved_at": cmd.saved_at,
        "details": dict(cmd.details), "reported_at": now,
    })]


def decide_heartbeat(state: LedgerState, cmd: ReportHeartbeat, now: float) -> list[Event]:
    """An executor's heartbeat: what it runs, as it says. Executors send one when that changes and at a
    low rate otherwise (liveness timing is Temporal's activity heartbeats), so the log is not flooded.
    Attempts it no longer runs though the ledger thinks so are named, as evidence for "why lost"."""
    if not cmd.executor_id:
        raise InvalidCommand("a heartbeat needs the executor's id")
    expected = sorted(
        j.job_id for j in state.jobs.values()
        if j.state == "RUNNING" and any(state.nodes[n].executor == cmd.executor_id
                                        for n in j.nodes if n in state.nodes)
        and cmd.jobs.get(j.job_id) != j.attempt
    )
    down = sorted(set(cmd.down))
    foreign = [n for n in down if n not in state.nodes or state.nodes[n].executor != cmd.executor_id]
    if foreign:
        raise InvalidCommand(f"executor {cmd.executor_id} reports node(s) {', '.join(foreign)} down, which are "
                             "not its own")
    recovered = sorted(n.node_id for n in state.nodes.values()
                       if n.executor == cmd.executor_id and n.state == "unhealthy" and n.node_id not in down)
    foreign_load = foreign_gpus(state, cmd)
    payload: dict[str, object] = {
        "executor_id": cmd.executor_id, "jobs": dict(cmd.jobs), "nodes": list(cmd.nodes), "at": now,
        "missing": expected, "recovered": recovered,
    }
    if down:  # only then: the heartbeats recorded before issue 23 keep their form
        payload["down"] = down
    if foreign_load:  # likewise
        payload["foreign"] = foreign_load
    return [Event(cmd.aggregate, "ExecutorHeartbeat", payload)]


def foreign_gpus(state: LedgerState, cmd: ReportHeartbeat) -> dict[str, int]:
    """The foreign load a heartbeat reports (nodes with none left out), on the executor's own nodes only and
    never more GPUs than the node has."""
    load: dict[str, int] = {}
    # read as untyped: a command from the bus may carry any JSON value here, and the compiled build checks
    # a typed tuple's items on unpacking (a float then raised TypeError instead of the refusal below)
    reported: dict[str, Any] = cmd.foreign
    for node_id in sorted(reported):
        gpus: Any = reported[node_id]
        node = state.nodes.get(node_id)
        if node is None or node.executor != cmd.executor_id:
            raise InvalidCommand(f"executor {cmd.executor_id} reports foreign load on node {node_id}, which is "
                                 "not its own")
        if isinstance(gpus, bool) or not isinstance(gpus, int) or not 0 <= gpus <= node.gpus:
            raise InvalidCommand(f"executor {cmd.executor_id} reports {gpus!r} foreign GPUs on node {node_id}, "
                                 f"which has {node.gpus}")
        if gpus:
            load[node_id] = gpus
    return load


def nodes_to_mark_unhealthy(state: LedgerState, executors: list[str]) -> list[str]:
    """Issue 3 "Draining" (a node marked unhealthy takes no new work): an executor that lost an attempt
    is not trusted with new work until it speaks again (its next heartbeat marks its nodes ready), so a
    requeued job is not placed straight back on a dead agent."""
    return sorted(n.node_id for n in state.nodes.values() if n.executor in executors and n.state == "ready")
