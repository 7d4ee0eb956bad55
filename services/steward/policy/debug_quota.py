"""The debug quota and qualification (DESIGN.md "Debug quota and the time-to-first-GPU SLO";
ADR 0029).

Each allocation has a debug quota: GPUs that may run debug jobs and sessions ahead of the
fair-share order. A manager sets it (tree.py `AllocationTree.debug_quota`); otherwise it follows the
share, with a floor (`default_debug_quota_gpus`).

*Debug work* is a session, or a debug job that asks for protection of at most `lane_max_runtime_s`
and at most `lane_max_gpus` GPUs (`is_debug_work`). A waiting piece of debug work is *qualified*
when its allocation's debug work submitted before it (running and not leaving, or waiting), plus
itself, fits in the quota (`qualify`). Order is submit time, then id: the qualified jobs of an
allocation are a prefix of its debug work in that order, so a job qualified at submit stays
qualified while nothing is submitted ahead of it. "At submit" is the same rule with the job last.

Qualified work goes ahead of the fair-share order (the lane, phases/phase5_lane.py); debug work beyond
the quota queues as ordinary funded work. This module only decides; it never reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from steward.domain.policy_settings import PolicySettings
from steward.policy.model import PendingJob, RunningJob
from steward.policy.tree import AllocationTree

QualificationReason = Literal["within_quota", "over_quota", "not_debug", "no_allocation", "unfunded_by_request"]


@dataclass(frozen=True, slots=True)
class Qualification:
    """Whether one job is qualified for the lane, and the figures that decided it."""

    qualified: bool
    reason: str
    """"within_quota" | "over_quota" | "not_debug" | "no_allocation" | "unfunded_by_request"."""
    quota_gpus: int
    in_use_gpus: int
    """GPUs of the allocation's running debug work (not leaving) that count before this job."""
    ahead_gpus: int
    """GPUs of the allocation's waiting debug work ahead of this job (submitted before it)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "qualified": self.qualified,
            "reason": self.reason,
            "quota_gpus": self.quota_gpus,
            "in_use_gpus": self.in_use_gpus,
            "ahead_gpus": self.ahead_gpus,
        }


# --- the rules -------------------------------------------------------------------------------------


def is_debug_work(klass: str, min_runtime_s: float, gpus: int, settings: PolicySettings) -> bool:
    """DESIGN.md "Debug quota": debug jobs and sessions. A session always; a debug job when it asks
    for protection (min_runtime > 0: one asking none is unfunded by its own choice), of at most
    `lane_max_runtime_s`, on at most `lane_max_gpus` GPUs (ADR 0007's small and short)."""
    if gpus > settings.lane_max_gpus:
        return False
    if klass == "interactive":
        return True
    return klass == "debug" and 0 < min_runtime_s <= settings.lane_max_runtime_s


def default_debug_quota_gpus(entitlement: float, capacity_gpus: float, settings: PolicySettings) -> int:
    """DESIGN.md "Debug quota": "the default follows the share, with a floor":
    max(`debug_quota_floor_gpus`, round(`debug_quota_share` x entitlement x capacity))."""
    by_share = round(settings.debug_quota_share * max(entitlement, 0.0) * max(capacity_gpus, 0.0))
    return max(settings.debug_quota_floor_gpus, int(by_share))


def debug_quota_gpus(tree: AllocationTree, project: str, capacity_gpus: float, settings: PolicySettings) -> int:
    """DESIGN.md "Debug quota": the quota its manager set (on the allocation or, nearest first, an
    ancestor), else the default from its entitlement. A project with no allocation (not a leaf of
    the tree: jobs belong to leaves) has none (0)."""
    if not tree.is_leaf(project):
        return 0
    q = tree.debug_quota(project)
    if q is not None:
        return q
    return default_debug_quota_gpus(tree.entitlement(project), capacity_gpus, settings)


def within_quota(in_use_gpus: int, ahead_gpus: int, gpus: int, quota_gpus: int) -> bool:
    """DESIGN.md "Debug quota": a job is inside its allocation's quota when the debug GPUs counted
    before it and its own fit."""
    return in_use_gpus + ahead_gpus + gpus <= quota_gpus


def ineligible_reason(job: PendingJob, settings: PolicySettings, allocated: bool) -> str | None:
    """Why `job` cannot be qualified whatever the quota (None: it is debug work of an allocation)."""
    if job.klass == "debug" and job.min_runtime_s <= 0:
        return "unfunded_by_request"
    if not is_debug_work(job.klass, job.min_runtime_s, job.gpus, settings):
        return "not_debug"
    if not allocated:
        return "no_allocation"
    return None


def counts_as_debug_use(job: RunningJob, settings: PolicySettings) -> bool:
    """A running job uses its allocation's debug quota while it is debug work and not leaving (no
    preemption requested)."""
    return job.preemption_requested_at is None and is_debug_work(job.klass, job.min_runtime_s, job.gpus, settings)


def before(a_submitted: float, a_id: str, b_submitted: float, b_id: str) -> bool:
    """The quota's order: submit time, then id."""
    return (a_submitted, a_id) < (b_submitted, b_id)


def qualify(
    job: PendingJob,
    quota_gpus: int,
    running: Iterable[RunningJob],
    waiting: Iterable[PendingJob],
    settings: PolicySettings,
    *,
    allocated: bool = True,
) -> Qualification:
    """DESIGN.md "Debug quota": is `job` qualified? `running` and `waiting` may hold any jobs; only
    debug work of `job`'s allocation submitted before it counts (a running job counts while it is
    not leaving). `allocated`: whether `job`'s tenant has an allocation in the tree. For the figure
    at submit, pass the allocation's waiting work without `job` and `job` with the latest submit."""
    reason = ineligible_reason(job, settings, allocated)
    project, t, jid = job.project, job.submitted_at, job.id
    in_use = 0
    for r in running:
        if r.project == project and counts_as_debug_use(r, settings) and before(r.submitted_at, r.id, t, jid):
            in_use += r.gpus
    ahead = 0
    for w in waiting:
        if (w.project == project and w.id != jid and before(w.submitted_at, w.id, t, jid)
                and is_debug_work(w.klass, w.min_runtime_s, w.gpus, settings)):
            ahead += w.gpus
    if reason is not None:
        return Qualification(False, reason, quota_gpus, in_use, ahead)
    ok = within_quota(in_use, ahead, job.gpus, quota_gpus)
    return Qualification(ok, "within_quota" if ok else "over_quota", quota_gpus, in_use, ahead)


def qualify_in(
    job: PendingJob,
    tree: AllocationTree,
    capacity_gpus: float,
    running: Iterable[RunningJob],
    waiting: Iterable[PendingJob],
    settings: PolicySettings,
) -> Qualification:
    """`qualify` with the quota and the allocation read from `tree` (the submit preview, "why
    pending")."""
    quota = debug_quota_gpus(tree, job.project, capacity_gpus, settings)
    return qualify(job, quota, running, waiting, settings, allocated=tree.is_leaf(job.project))


# --- a whole queue at once (the cycle) -------------------------------------------------------------


@dataclass(slots=True)
class _Work:
    submitted_at: float
    id: str
    gpus: int
    waiting: bool


def qualify_all(
    quotas: Mapping[str, int],
    running: Iterable[RunningJob],
    waiting: Iterable[PendingJob],
    settings: PolicySettings,
) -> dict[str, Qualification]:
    """`qualify` for every waiting piece of debug work of an allocation in `quotas`, in one pass per
    allocation (sort by the quota's order, then prefix sums). Equal to calling `qualify` on each
    with the same `running` and `waiting` (a property test checks it)."""
    by_project: dict[str, list[_Work]] = {}
    for r in running:
        if r.project in quotas and counts_as_debug_use(r, settings):
            by_project.setdefault(r.project, []).append(_Work(r.submitted_at, r.id, r.gpus, False))
    for w in waiting:
        if w.project in quotas and is_debug_work(w.klass, w.min_runtime_s, w.gpus, settings):
            by_project.setdefault(w.project, []).append(_Work(w.submitted_at, w.id, w.gpus, True))
    out: dict[str, Qualification] = {}
    for project, items in by_project.items():
        items.sort(key=lambda x: (x.submitted_at, x.id))
        quota = quotas[project]
        in_use = 0
        ahead = 0
        for it in items:
            if not it.waiting:
                in_use += it.gpus
                continue
            ok = within_quota(in_use, ahead, it.gpus, quota)  # debug work of an allocation: eligible
            out[it.id] = Qualification(ok, "within_quota" if ok else "over_quota", quota, in_use, ahead)
            ahead += it.gpus
    return out

