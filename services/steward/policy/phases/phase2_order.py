"""Phase 2, order and fund: the fair-share standing of every allocation, the global order of waiting
jobs, the funding state (DESIGN.md "Ordering", "Funded occupancy"), and the qualification of waiting
debug work against its allocation's debug quota (DESIGN.md "Debug quota and the time-to-first-GPU
SLO", ADR 0029).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress

from steward.policy.churn import claimed_rooms
from steward.policy.cluster_share import ClusterOrder, cluster_standings, demand_clusters
from steward.policy.contract import funding_capacity
from steward.policy.debug_quota import (
    Qualification,
    cluster_quotas,
    debug_quota_gpus,
    qualify_all,
    qualify_all_clusters,
)
from steward.policy.model import (
    PendingJob,
    RunningJob,
)
from steward.policy.ordering import Order, demand_of, order_pending, standing, tree_layout
from steward.policy.packing import FirmLoad
from steward.policy.placement import CapacityIndex
from steward.policy.plan import CyclePlan
from steward.policy.preemption import branches_of
from steward.policy.routing import Routes


def sizes_and_suffix_min(
    jobs: Sequence[PendingJob], holders: list[int] | None = None, rooms: Mapping[str, object] | None = None,
) -> tuple[list[int], list[int]]:
    """The GPUs of each job in the order, and suffix_min[k]: the smallest job at or after position k
    (a sentinel 1 << 62 past the end). One compiled loop: `list(map(...))` and `accumulate(..., min)`
    called back into the interpreter per job (≈ 10 % of a compiled simulation, round 5).

    With `holders`, the same walk appends to it, in ascending order, the positions of the jobs that
    may hold a room (ADR 0028, phase 3): a room freed for it (`room_freed_at`), or victims in their
    grace for it (a key of `rooms`). Phase 3 then visits those alone, not the whole order."""
    n = len(jobs)
    gpus = [0] * n
    suffix = [1 << 62] * (n + 1)
    if holders is None:
        for k in range(n - 1, -1, -1):
            g = jobs[k].gpus
            gpus[k] = g
            suffix[k] = g if k == n - 1 or g < suffix[k + 1] else suffix[k + 1]
        return gpus, suffix
    start = len(holders)
    for k in range(n - 1, -1, -1):
        job = jobs[k]
        g = job.gpus
        gpus[k] = g
        suffix[k] = g if k == n - 1 or g < suffix[k + 1] else suffix[k + 1]
        if job.room_freed_at is not None or (rooms and job.id in rooms):
            holders.append(k)
    holders[start:] = holders[start:][::-1]
    return gpus, suffix


def order_and_fund(cycle: CyclePlan) -> None:
    snap, s = cycle.snap, cycle.s
    funded_by_project = cycle.funded_by_project  # tallied in phase 1
    cycle.index = CapacityIndex(snap.nodes, cycle.used, s.placement)
    cycle.routes = Routes(cycle.index, snap.pending)
    if s.gang_packing and s.placement == "best_fit":
        cycle.load = FirmLoad(cycle.index, snap.running, cycle.leaving)
    cycle.capacity = sum(compress(cycle.index.cap, cycle.index.layout_ready))
    cycle.stand = standing(snap.tree, snap.usage, cycle.capacity, s, demand_of(snap))
    cycle.order = order_pending(snap.pending, cycle.stand, snap.usage, s)
    tree = snap.tree
    entitlement = tree_layout(tree).entitlement
    # ADR 0090: the quota is a share of the weighted capacity, and each running funded job is charged its GPUs ×
    # its nodes' weights (phase 1's tally), so the funding rule reads the books' units
    index = cycle.index
    capacity_w = funding_capacity(((index.cap[i], index.nodes[i].model) for i in range(len(index.cap))
                                   if index.layout_ready[i]), s)
    cycle.quota = {a: e * capacity_w for a, e in entitlement.items()}
    cycle.funded_in_use = {}
    cycle.funded_weighted = {}
    # phase 1 tallied the weighted charge only when a weight is set; else `charge` asks the charge's home of the
    # project's GPUs (`CyclePlan.weighted`, every weight 1)
    weighted = cycle.funded_weighted_by_project
    for project in sorted(funded_by_project):
        cycle.charge(cycle.path(project), funded_by_project[project],
                     weighted=weighted.get(project, 0.0) if cycle.weights_set else None)
    cycle.branches = branches_of(cycle.stand, cycle.funded_in_use)
    if cycle.routes.multi and s.cluster_fair_share and snap.cluster_usage is not None:
        standings_per_cluster(cycle)
    if s.claim_hold_s is None:
        cycle.gpus, cycle.suffix_min = sizes_and_suffix_min(cycle.order.jobs)
    else:  # ADR 0028: who may hold a room, found on the same walk
        cycle.rooms = claimed_rooms(cycle.going)
        cycle.gpus, cycle.suffix_min = sizes_and_suffix_min(cycle.order.jobs, cycle.holders, cycle.rooms)
    if s.lane:
        cycle.qual = qualifications(cycle)


def capacity_by_cluster(cycle: CyclePlan) -> dict[str, float]:
    """GPUs per cluster of the nodes that count in the cycle's capacity (ready layout), every cluster named."""
    index, clusters = cycle.index, cycle.routes.clusters
    out: dict[str, float] = dict.fromkeys(cycle.routes.by_cluster, 0.0)
    for i, c in enumerate(clusters):
        if index.layout_ready[i]:
            out[c] += index.cap[i]
    return out


def standings_per_cluster(cycle: CyclePlan) -> None:
    """ADR 0076, several clusters: every allocation's standing on each cluster (`cluster_share.cluster_standings`,
    its entitlement shared out over the clusters its waiting and running jobs accept) and its funded GPUs running
    there (the jobs that keep running, as `funded_in_use` counts them); what strict
    improvement reads on a cluster is then `cycle.branches_for(cluster)`. ADR 0080, with `cluster_order`: the order
    of waiting jobs per cluster (`cluster_share.ClusterOrder`), each job at its allocation's standing on the
    cluster it accepts where that allocation ranks best."""
    snap = cycle.snap
    assert snap.cluster_usage is not None
    capacity = capacity_by_cluster(cycle)
    routes = cycle.routes
    memo: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[str, ...]] = {}

    def accepts(job: PendingJob | RunningJob) -> tuple[str, ...]:
        key = (job.gpu_models, job.clusters)
        got = memo.get(key)
        if got is None:
            got = memo[key] = routes.accepted_clusters(job.gpu_models, job.clusters)
        return got

    accepted = demand_clusters((*snap.pending, *snap.running), accepts)
    cycle.cluster_stand = cluster_standings(snap.tree, snap.cluster_usage, capacity, accepted, cycle.s)
    if cycle.s.cluster_order and cycle.s.ordering == "fair_share":
        cycle.cluster_order = ClusterOrder(snap.tree, cycle.stand.ratio, cycle.cluster_stand, accepts)
        cycle.order = Order(cycle.cluster_order.reorder(cycle.order.jobs), cycle.order.by_project)
    leaving = cycle.leaving
    per: dict[str, dict[str, int]] = {}
    for job in snap.running:
        if not job.funded or job.preemption_requested_at is not None or job.id in leaving:
            continue
        c = cycle.cluster_of_job(job)
        if c is not None:
            mine = per.setdefault(c, {})
            mine[job.project] = mine.get(job.project, 0) + job.gpus
    for c in capacity:
        on: dict[str, float] = {}
        for project, gpus in sorted(per.get(c, {}).items()):
            for a in cycle.path(project):
                on[a] = on.get(a, 0.0) + gpus
        cycle.cluster_running[c] = on


def qualifications(cycle: CyclePlan) -> dict[str, Qualification]:
    """ADR 0029: the qualification of every waiting piece of debug work of an allocation, at the
    start of the lane (jobs stopping this cycle no longer count). Placing a qualified job moves
    its GPUs from "ahead" to "in use" of the jobs behind it, and a preemption made for it frees
    GPUs (victims leave): neither adds to what counts, so the qualifications hold all cycle."""
    snap, s = cycle.snap, cycle.s
    tree = snap.tree
    quotas: dict[str, int] = {}
    capacity = cycle.capacity
    for job in snap.pending:
        if job.klass != "batch" and job.project not in quotas and cycle.path(job.project):
            quotas[job.project] = debug_quota_gpus(tree, job.project, capacity, s)
    if not quotas:
        return {}
    leaving = cycle.leaving
    running = [r for r in snap.running if r.id not in leaving] if leaving else snap.running
    if cycle.routes.multi:
        return qualifications_per_cluster(cycle, quotas, running)
    return qualify_all(quotas, running, snap.pending, s)


def qualifications_per_cluster(cycle: CyclePlan, quotas: Mapping[str, int],
                               running: Sequence[RunningJob]) -> dict[str, Qualification]:
    """ADR 0073, several clusters: each allocation's quota shared out over the clusters it may use in proportion
    to their GPUs (`debug_quota.cluster_quotas`), and each piece of waiting debug work qualified on the clusters
    it accepts where it fits in its allocation's part (`debug_quota.qualify_all_clusters`)."""
    index, routes, snap = cycle.index, cycle.routes, cycle.snap
    capacity: dict[str, float] = {}
    for i, c in enumerate(routes.clusters):
        if index.layout_ready[i]:
            capacity[c] = capacity.get(c, 0.0) + index.cap[i]
    pins = {j.project: j.pin for j in snap.pending if j.pin}
    parts = {p: cluster_quotas(q, capacity, cycle.s, pins.get(p, "")) for p, q in quotas.items()}
    pos, clusters = index.pos, routes.clusters

    def cluster_of(r: RunningJob) -> str | None:
        for nid, _ in r.placement:
            i = pos.get(nid)
            if i is not None:
                return clusters[i]
        return None

    def accepts_of(w: PendingJob) -> list[str]:
        return [c for c, _ in routes.candidates(w)]

    return qualify_all_clusters(parts, running, snap.pending, cycle.s, cluster_of, accepts_of)
