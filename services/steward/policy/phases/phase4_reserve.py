"""Phase 4, reservations: the blocked head large gang of each of the `reservation_allocations` most
under-served allocations (earliest in the order) holds nodes assembled from protection expiries; work
behind it in the order (lane jobs included) may use them only if its protection ends before the
reservation is due (DESIGN.md "Placement"; ADR 0007 "Reservations before the lane").

With several clusters the count is per cluster (ADR 0073): each cluster's queue is the order restricted to the
jobs that accept it, and the `reservation_allocations` most under-served allocations of that queue may each hold
a reservation there for their head gang, so a gang heading its cluster's queue is not left without one because
allocations on other clusters rank higher. A gang accepting several clusters is its allocation's head gang on
each of them and counts on the one its reservation is made on (ADR 0071). With one cluster the per-cluster
count is the count over the tree, and the phase runs exactly as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from steward.policy.contract import (
    UNFUNDED_BY_REQUEST,
    protection_s,
)
from steward.policy.explain import Special
from steward.policy.model import (
    PendingJob,
    Reservation,
)
from steward.policy.placement import CapacityIndex, level_name
from steward.policy.plan import CyclePlan
from steward.policy.preemption import Branches, strictly_improves
from steward.policy.reasons import RESERVED
from steward.policy.reservation import (
    GangReleases,
    ReservationPlan,
    plan_reservation,
    wants_reservation,
)
from steward.policy.routing import hidden_except, reservation_evidence, soonest_reservation


class _GangMayPreempt:
    """May a reserving gang preempt a project's work once its protection ends (strict improvement; memoised
    per (project, cluster) by `GangReleases.allowed`)? An object rather than closures in `make_reservation`: a
    closure over the cycle made every such cycle reference-cyclic garbage for the collector. With `cycle` (ADR
    0076, the standing per cluster): judged on the cluster the work runs on."""

    def __init__(self, path: tuple[str, ...], gpus: int, horizon: float, branches: Branches,
                 path_of: Callable[[str], tuple[str, ...]], cycle: CyclePlan | None = None) -> None:
        self.path = path
        self.gpus = gpus
        self.horizon = horizon
        self.branches = branches
        self.path_of = path_of
        self.cycle = cycle

    def project(self, project: str) -> bool:
        ok, _ = strictly_improves(self.path, self.gpus, self.path_of(project), 0.0, self.horizon, self.branches)
        return ok

    def project_on(self, project: str, cluster: str | None) -> bool:
        if self.cycle is None:
            return self.project(project)
        ok, _ = strictly_improves(self.path, self.gpus, self.path_of(project), 0.0, self.horizon,
                                  self.cycle.branches_for(cluster))
        return ok


def may_reserve(cycle: CyclePlan, job: PendingJob) -> bool:
    """Issue 3, ADR 0007: a large gang gets a reservation when it is its allocation's head gang
    (the first the walk meets) and fewer than `reservation_allocations` are held; a routed gang too, on one
    cluster (ADR 0071, `plan_routed`). With several clusters, per cluster (ADR 0073, `open_clusters`)."""
    if not wants_reservation(job, cycle.s):
        return False
    if cycle.routes.multi:
        return bool(open_clusters(cycle, job))
    return job.project not in cycle.res_projects and len(cycle.res_plans) < cycle.s.reservation_allocations


def open_clusters(cycle: CyclePlan, job: PendingJob, among: Sequence[str] | None = None) -> list[str]:
    """ADR 0073, several clusters: the clusters `job` accepts (of `among`, when given) where its allocation's head
    gang has not been reserved or tried yet and fewer than `reservation_allocations` reservations are held."""
    cap = cycle.s.reservation_allocations
    held, tried, project = cycle.res_on, cycle.res_tried_on, job.project
    return [c for c, _ in cycle.routes.candidates(job)
            if (among is None or c in among) and (project, c) not in tried and held.get(c, 0) < cap]


def all_clusters_full(cycle: CyclePlan) -> bool:
    """ADR 0073: every cluster holds `reservation_allocations` reservations (the phase's walk can stop)."""
    cap = cycle.s.reservation_allocations
    return all(cycle.res_on.get(c, 0) >= cap for c in cycle.routes.by_cluster)


def reserve(cycle: CyclePlan) -> None:
    """ADR 0007 "Reservations before the lane": before anything is placed, the head large gang of
    each allocation, in the order (most under-served first), that does not fit now gets a
    reservation, up to `reservation_allocations`; so lane jobs and work behind it in the order
    cannot take the nodes it is waiting for unless they leave before it is due."""
    s = cycle.s
    if not s.reservations:
        return
    if cycle.routes.multi:
        reserve_per_cluster(cycle)
        return
    seen: set[str] = set()
    jobs = cycle.order.jobs
    least = s.reservation_min_gpus  # `wants_reservation` asks for at least this many GPUs
    for k in (k for k, g in enumerate(cycle.gpus) if g >= least):
        if len(cycle.res_plans) >= s.reservation_allocations:
            break
        job = jobs[k]
        if job.project in seen or not wants_reservation(job, s):
            continue
        path = cycle.path(job.project)
        gap = cycle.funding_gap(job, path)
        if gap == UNFUNDED_BY_REQUEST:
            continue  # ADR 0013: not the allocation's head gang; a funded one behind it may be
        seen.add(job.project)
        if gap is not None:
            continue
        fit, _ = cycle.try_place(job, k, None)
        if fit is None and may_reserve(cycle, job):
            make_reservation(cycle, job, path, k)


def reserve_per_cluster(cycle: CyclePlan) -> None:
    """ADR 0073: `reserve` with several clusters. The same walk of the order, but an allocation's head gang is
    the first the walk meets *on each cluster* (among the gangs accepting it), and the cap of
    `reservation_allocations` holds per cluster: a gang is reserved on a cluster where it heads its allocation's
    work and fewer than the cap are held (ADR 0071's soonest-due choice among those)."""
    s = cycle.s
    seen: set[tuple[str, str]] = set()
    jobs = cycle.order.jobs
    least = s.reservation_min_gpus
    for k in (k for k, g in enumerate(cycle.gpus) if g >= least):
        if all_clusters_full(cycle):
            break
        job = jobs[k]
        if not wants_reservation(job, s):
            continue
        heads = [c for c, _ in cycle.routes.candidates(job) if (job.project, c) not in seen]
        if not heads:
            continue
        path = cycle.path(job.project)
        gap = cycle.funding_gap(job, path)
        if gap == UNFUNDED_BY_REQUEST:
            continue  # ADR 0013: not the allocation's head gang; a funded one behind it may be
        seen.update((job.project, c) for c in heads)
        if gap is not None:
            continue
        fit, _ = cycle.try_place(job, k, None)
        if fit is None:
            among = open_clusters(cycle, job, heads)
            if among:
                make_reservation(cycle, job, path, k, among)


def make_reservation(cycle: CyclePlan, job: PendingJob, path: tuple[str, ...], order_pos: int,
                     among: Sequence[str] | None = None) -> None:
    """Issue 3: a reservation for a blocked large gang, assembled from protection expiries. `among`: with
    several clusters, the clusters it may be reserved on (ADR 0073: where it heads its allocation's work and the
    cap is not reached; `open_clusters` by default)."""
    index, s, now = cycle.index, cycle.s, cycle.now
    gang_may_preempt = _GangMayPreempt(path, job.gpus, protection_s(job.klass, job.min_runtime_s, s),
                                       cycle.branches, cycle.path,
                                       cycle if cycle.cluster_stand is not None else None)
    releases = GangReleases(cycle.node_releases(), gang_may_preempt.project_on,
                            cycle.routes.clusters if cycle.cluster_stand is not None else None)
    preemptible = s.fairness_preemption and s.preemptible_after_protection
    pos = index.pos
    for p in cycle.placements:  # this cycle's placements hold their nodes too
        if not p.funded:
            t = now
        elif preemptible and releases.allowed(p.project, pos.get(p.assignments[0][0]) if p.assignments else None):
            t = p.protected_until
        else:
            t = math.inf
        for nid, g in p.assignments:
            releases.add(pos[nid], t, g)
    routing: dict[str, Any] | None = None
    cluster: str | None = None
    if cycle.routes.multi:
        if among is None:
            among = open_clusters(cycle, job)
        plan, cluster, routing = plan_routed(cycle, job, releases, among)
        cycle.res_tried_on.update((job.project, c) for c, _ in cycle.routes.candidates(job))
    elif cycle.routes.active and cycle.routes.routed(job):
        plan, cluster, routing = plan_routed(cycle, job, releases)
    else:
        plan = plan_reservation(job, index, releases)
    cycle.res_projects.add(job.project)
    if plan is None:
        return
    if cluster is not None:
        cycle.res_on[cluster] = cycle.res_on.get(cluster, 0) + 1
    for i in plan.nodes:
        index.mask(i)
        cycle.reserved.add(i)
    cycle.reserved_room = cycle.reserved_shape = None
    cycle.fail_reserved.clear()  # the masks now name a different set of reservations
    nodes = tuple(index.ids[i] for i in plan.nodes)
    evidence = {
        "domain": list(plan.domain),
        "level": level_name(cycle.snap.topology_levels, plan.domain_depth),
        "nodes": list(nodes),
        "ready_at": plan.ready_at,
        "gpus": job.gpus,
        "rank": cycle.rank_of(job),
    }
    if routing is not None:
        evidence["routing"] = routing
    reservation = Reservation(job.id, plan.domain, nodes, plan.ready_at, evidence, cluster)
    if cycle.reservation is None:
        cycle.reservation = reservation
    cycle.res_by_job[job.id] = len(cycle.res_plans)
    cycle.reservations.append(reservation)
    cycle.res_plans.append(plan)
    cycle.res_pos.append(order_pos)
    cycle.res_nodes.append(plan.nodes)
    cycle.specials[job.id] = Special(RESERVED, job.gpus, "/".join(plan.domain), plan.ready_at, evidence)


def plan_routed(cycle: CyclePlan, job: PendingJob, releases: GangReleases,
                among: Sequence[str] | None = None,
                ) -> tuple[ReservationPlan | None, str | None, dict[str, Any] | None]:
    """ADR 0071: a routed gang's reservation, on one cluster (gangs never span clusters): planned cluster by
    cluster with every node it may not use hidden (`hidden_except`, as for its placement, ADR 0057), then the
    cluster where it is due soonest (`routing.soonest_reservation`). Returns the plan, its cluster and the
    `routing` evidence (the due time on every cluster considered), or (None, None, None). `among`: only those
    clusters (ADR 0073: where the per-cluster cap leaves room)."""
    index = cycle.index
    options: list[tuple[float, int, str]] = []
    plans: dict[str, ReservationPlan] = {}
    considered: list[dict[str, Any]] = []
    for cluster, nodes in cycle.routes.candidates(job):
        if among is not None and cluster not in among:
            continue
        plan = _plan_on(index, job, nodes, releases)
        considered.append({"cluster": cluster, "ready_at": None if plan is None else plan.ready_at})
        if plan is not None:
            plans[cluster] = plan
            options.append((plan.ready_at, sum(index.cap[i] for i in plan.nodes) - job.gpus, cluster))
    if not options:
        return None, None, None
    chosen = soonest_reservation(options)
    plan = plans[chosen]
    return plan, chosen, reservation_evidence(chosen, plan.ready_at, considered, cycle.now)


def _plan_on(index: CapacityIndex, job: PendingJob, nodes: list[int],
             releases: GangReleases) -> ReservationPlan | None:
    maxcap = max((index.cap[i] for i in nodes if index.layout_ready[i]), default=0)
    with hidden_except(index, nodes):
        return plan_reservation(job, index, releases, maxcap)
