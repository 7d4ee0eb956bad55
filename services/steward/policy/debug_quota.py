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

Several clusters (ADR 0073): the quota holds per cluster, as Slurm's association limits (per cluster) and
Kueue's nominal quotas (per flavor) do. The allocation's quota (set or default, over the whole capacity) is
shared out over the clusters it may use (its pin's, else all) in proportion to their GPUs, each part at least
the floor (`min(quota, debug_quota_floor_gpus)`): `cluster_quotas`. A waiting piece of debug work is qualified
on a cluster it accepts when its allocation's debug work running there (not leaving) and its waiting debug work
accepting that cluster, submitted before it, plus itself, fit in that cluster's part (`qualify_clusters`: work
not yet placed counts on every cluster it accepts, since where it will run is not known yet); it is qualified
when that holds on at least one cluster, and the lane places it only there. With one cluster the part is the
quota and the rule is the one above.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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
    clusters: tuple[str, ...] = ()
    """Several clusters (ADR 0073): the clusters it accepts where it is within its allocation's quota there, by
    name (the lane places it only there); the figures above are those of the first (or, when it is qualified
    nowhere, of the cluster where it is nearest to fitting). Empty with one cluster."""
    by_cluster: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)
    """Several clusters: cluster -> (quota, in use, ahead) on every cluster it accepts."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "qualified": self.qualified,
            "reason": self.reason,
            "quota_gpus": self.quota_gpus,
            "in_use_gpus": self.in_use_gpus,
            "ahead_gpus": self.ahead_gpus,
        }
        if self.by_cluster:
            out["clusters"] = list(self.clusters)
            out["by_cluster"] = {c: {"quota_gpus": q, "in_use_gpus": u, "ahead_gpus": a}
                                 for c, (q, u, a) in sorted(self.by_cluster.items())}
        return out


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



# --- several clusters (ADR 0073) ----------------------------------------------------------------------


def cluster_quotas(quota_gpus: int, capacity_by_cluster: Mapping[str, float], settings: PolicySettings,
                   pin: str = "") -> dict[str, int]:
    """ADR 0073: an allocation's debug quota on each cluster it may use (its `pin`'s alone when pinned, else every
    cluster of `capacity_by_cluster`, GPUs per cluster): the quota in proportion to the cluster's GPUs among
    those, rounded, and at least `min(quota, debug_quota_floor_gpus)` (the floor's promise holds on every
    cluster; a quota of 0 stays 0). Clusters it may not use get none."""
    usable = {c: max(g, 0.0) for c, g in capacity_by_cluster.items() if not pin or c == pin}
    total = sum(usable.values())
    least = min(quota_gpus, settings.debug_quota_floor_gpus)
    out: dict[str, int] = {}
    for c, g in sorted(usable.items()):
        share = round(quota_gpus * g / total) if total > 0 else 0
        out[c] = max(least, int(share))
    return out


def qualify_clusters(
    job: PendingJob,
    quotas: Mapping[str, int],
    accepts: Sequence[str],
    running: Iterable[RunningJob],
    waiting: Iterable[PendingJob],
    settings: PolicySettings,
    cluster_of: Callable[[RunningJob], str | None],
    accepts_of: Callable[[PendingJob], Sequence[str]],
    *,
    allocated: bool = True,
) -> Qualification:
    """ADR 0073, `qualify` with several clusters: `quotas` are the allocation's parts per cluster
    (`cluster_quotas`), `accepts` the clusters `job` may run on; `cluster_of(r)` the cluster a running job is
    on, `accepts_of(w)` the clusters a waiting job may run on. On each accepted cluster, the allocation's debug
    work submitted before `job` counts there when it runs there (not leaving) or waits accepting it; `job` is
    qualified on the clusters where that and itself fit in the part."""
    reason = ineligible_reason(job, settings, allocated)
    project, t, jid = job.project, job.submitted_at, job.id
    mine = [c for c in accepts if c in quotas]
    in_use = dict.fromkeys(mine, 0)
    ahead = dict.fromkeys(mine, 0)
    for r in running:
        if r.project == project and counts_as_debug_use(r, settings) and before(r.submitted_at, r.id, t, jid):
            c = cluster_of(r)
            if c in in_use:
                in_use[c] += r.gpus
    for w in waiting:
        if (w.project == project and w.id != jid and before(w.submitted_at, w.id, t, jid)
                and is_debug_work(w.klass, w.min_runtime_s, w.gpus, settings)):
            for c in accepts_of(w):
                if c in ahead:
                    ahead[c] += w.gpus
    by_cluster = {c: (quotas[c], in_use[c], ahead[c]) for c in mine}
    fits = tuple(c for c in mine if within_quota(in_use[c], ahead[c], job.gpus, quotas[c]))
    # the figures shown: the first cluster where it fits, else where it is nearest to fitting
    shown = fits[0] if fits else min(mine, key=lambda c: (in_use[c] + ahead[c] + job.gpus - quotas[c], c),
                                      default=None)
    q, u, a = by_cluster[shown] if shown is not None else (0, 0, 0)
    if reason is not None:
        return Qualification(False, reason, q, u, a, (), by_cluster)
    ok = bool(fits)
    return Qualification(ok, "within_quota" if ok else "over_quota", q, u, a, fits, by_cluster)


def qualify_all_clusters(
    quotas: Mapping[str, Mapping[str, int]],
    running: Sequence[RunningJob],
    waiting: Sequence[PendingJob],
    settings: PolicySettings,
    cluster_of: Callable[[RunningJob], str | None],
    accepts_of: Callable[[PendingJob], Sequence[str]],
) -> dict[str, Qualification]:
    """ADR 0073, `qualify_all` with several clusters: `qualify_clusters` for every waiting piece of debug work
    of an allocation in `quotas` (allocation -> its parts per cluster). Only the allocation's own debug work is
    read for each job (gathered once per allocation)."""
    run_by: dict[str, list[RunningJob]] = {}
    wait_by: dict[str, list[PendingJob]] = {}
    for r in running:
        if r.project in quotas and counts_as_debug_use(r, settings):
            run_by.setdefault(r.project, []).append(r)
    for w in waiting:
        if w.project in quotas and is_debug_work(w.klass, w.min_runtime_s, w.gpus, settings):
            wait_by.setdefault(w.project, []).append(w)
    out: dict[str, Qualification] = {}
    for project, jobs in wait_by.items():
        mine_running = run_by.get(project, [])
        for w in jobs:
            out[w.id] = qualify_clusters(w, quotas[project], accepts_of(w), mine_running, jobs, settings,
                                         cluster_of, accepts_of)
    return out
