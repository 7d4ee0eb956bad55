"""Interactive sessions (DESIGN.md "Interactive sessions"): a job with `class=interactive`,
protected for its cap (8 h by default), warned before the cap, then checkpointed and stopped (or
made preemptible, per policy); a restore re-opens it on its previous node when that has room,
otherwise on the node with the most free capacity.
"""

from __future__ import annotations

from steward.domain import protection as times
from steward.domain.policy_settings import PolicySettings
from steward.policy.model import PendingJob, RunningJob, Stop
from steward.policy.placement import CapacityIndex


def is_session(job: PendingJob | RunningJob) -> bool:
    return job.klass == "interactive"


def _cap_s(job: RunningJob, settings: PolicySettings) -> float:
    """The session's cap: `steward.domain.protection.session_cap_s` (the one the ledger records with the
    placement and the Session workflow keeps)."""
    return times.session_cap_s(job.min_runtime_s, settings.session_cap_s, settings.max_min_runtime_s)


def session_cap_at(job: RunningJob, settings: PolicySettings) -> float:
    """DESIGN.md: "protected for its cap" — the cap runs from the session's (re)start."""
    return job.started_at + _cap_s(job, settings)


def session_warning_times(job: RunningJob, settings: PolicySettings) -> tuple[float, ...]:
    """DESIGN.md "warned before the cap": absolute times of the warnings, earliest first (a warning
    that would fall before the start is dropped)."""
    return times.warning_times(job.started_at, session_cap_at(job, settings), settings.session_warnings_s)


def session_cap_stop(job: RunningJob, now: float, settings: PolicySettings) -> Stop | None:
    """DESIGN.md "then checkpointed and stopped (or made preemptible, per policy)": at the cap a
    session is checkpointed and stopped (not requeued: the researcher restores it). With
    `session_at_cap="preemptible"` it keeps running, preemptible like any job past protection."""
    if not is_session(job) or settings.session_at_cap != "stop" or job.preemption_requested_at is not None:
        return None
    cap = session_cap_at(job, settings)
    if now < cap:
        return None
    return Stop(
        job_id=job.id,
        reason="session_cap",
        checkpoint=True,
        requeue=False,
        evidence={"started_at": job.started_at, "cap_at": cap, "session_cap_s": _cap_s(job, settings)},
    )


def restore_node(job: PendingJob, index: CapacityIndex) -> tuple[int, str]:
    """DESIGN.md "Restoring re-opens it ... on its previous node when that has room, otherwise on the
    node with the most free capacity". Returns (node index or -1, which rule chose it)."""
    if job.previous_node is not None:
        i = index.pos.get(job.previous_node, -1)
        if i >= 0 and index.ok[i] and index.free[i] >= job.gpus:
            return i, "previous_node"
    return index.most_free(job.gpus), "most_free"
