"""The debug lane (DESIGN.md "Interactive sessions": "Target: p95 time to first GPU for a session
or debug job under 2 minutes while the cluster is full"; ADR 0007).

A *lane job* is small and short: a session, or a debug job that asks for protection (`min_runtime`)
of at most `lane_max_runtime_s`, asking for at most `lane_max_gpus` GPUs. Each cycle places lane
jobs before the fair-share walk. A lane job that does not fit and would be funded is searched
victims for before other blocked work: first *unfunded* work only (it runs "only on idle capacity
... and is preemptible at once", with a short grace), then funded work under the normal rules
(out of protection, strict improvement). An allocation holds
at most `lane_project_gpus` GPUs through the lane at once (running lane jobs plus this cycle's lane
placements and preemptions), so the lane cannot be used to jump the fair-share order with real work.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from steward.policy.model import JobClass, PendingJob, RunningJob
from steward.policy.settings import PolicySettings


def is_lane_job(klass: JobClass, min_runtime_s: float, gpus: int, settings: PolicySettings) -> bool:
    """ADR 0007: a session or a short debug job (protection asked, at most `lane_max_runtime_s`), small
    (at most `lane_max_gpus`), when the policy has a lane."""
    if not settings.lane or gpus > settings.lane_max_gpus:
        return False
    if klass == "interactive":
        return True
    return klass == "debug" and 0 < min_runtime_s <= settings.lane_max_runtime_s


def lane_pending(job: PendingJob, settings: PolicySettings) -> bool:
    return is_lane_job(job.klass, job.min_runtime_s, job.gpus, settings)


def lane_in_use(running: Iterable[RunningJob], leaving: Mapping[str, object] | set[str],
                settings: PolicySettings) -> dict[str, int]:
    """GPUs each allocation holds through the lane: its running lane jobs that are not leaving."""
    used: dict[str, int] = {}
    if not settings.lane:
        return used
    for job in running:
        if job.preemption_requested_at is not None or job.id in leaving:
            continue
        if is_lane_job(job.klass, job.min_runtime_s, job.gpus, settings):
            used[job.project] = used.get(job.project, 0) + job.gpus
    return used


def lane_admits(project: str, gpus: int, in_use: Mapping[str, int], settings: PolicySettings) -> bool:
    """ADR 0007: the per-allocation cap of the lane."""
    return in_use.get(project, 0) + gpus <= settings.lane_project_gpus


def holds_room(job: PendingJob, now: float, settings: PolicySettings) -> bool:
    """ADR 0021: the GPUs a preemption freed for a lane job are that job's for `lane_hold_s` after
    its victims stop (`PendingJob.room_freed_at`): it is placed before anything else, whoever comes
    first in the order. Without the hold they went to the next cycle's first taker, and the job
    searched (and preempted) again."""
    t = job.room_freed_at
    hold = settings.lane_hold_s
    return t is not None and hold is not None and now - t <= hold and lane_pending(job, settings)
