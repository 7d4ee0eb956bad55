"""Routing (DESIGN.md "Clusters and GPU models"; ADR 0057): which nodes a job may use when the snapshot
holds several clusters or the job accepts only some GPU models or clusters, and the evidence of the
choice between the clusters where it could run.

A job is *routed* when it names the models or clusters it accepts, or when the nodes form more than one
cluster (gangs never span clusters). The cycle then looks for a fit cluster by cluster, each time with
every other node hidden from the capacity index (`hidden_except`), so every search of the index (best
fit, gang-aware packing, a session's restore, the victim search) sees only the nodes the job may use in
that one cluster. With one cluster and no job naming models or clusters, nothing here runs and the cycle
is the one it was before clusters (`Routes.active` is False).

A job of an allocation pinned to a cluster (ADR 0067) accepts that cluster only (`PendingJob.clusters` is the
pin, `domain.clusters.pinned_clusters`): it is the one exception to "never a cluster where it would start
later when another would take it now": it waits for room on its pin's cluster, and the evidence says so.

The choice: among the clusters where the job fits now (it would wait 0 s on each), the tightest fit
(fewest free GPUs left on the nodes it takes: best fit across clusters, keeping room whole for gangs),
then the cluster's name. The allocation's rank is one across the tree, so it does not tell clusters apart here
(strict improvement reads the standing per cluster when making room, ADR 0076; the choice of cluster does not).
For the clusters where it does not fit now, the evidence gives an
estimate of its wait there: the soonest time enough of its admissible GPUs there could be free as the
protections of the jobs on them end, or their grace for a job being preempted (a lower bound: a job may
run past its protection).

A waiting job is not pinned to a cluster: every cycle routes it afresh among the clusters where it fits then.
The one commitment a waiting job has is a room being made for it (ADR 0028: victims in their grace, for it,
on one cluster). ADR 0068's rule `stays_in_room`: it takes that room when it fits there now (never leaving the
room made for it for an equal wait), and moves to another cluster only when it fits there now and not in its
room yet (strictly better: now, against the end of its victims' grace); the placement's evidence then says
"moved from X to Y". A placement is final, so a job moves at most once and cannot flap.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from steward.domain.clusters import admits, catalogue, largest_in
from steward.domain.policy_settings import PolicySettings
from steward.policy.contract import grace_ends_at
from steward.policy.model import Node, PendingJob, RunningJob
from steward.policy.placement import CapacityIndex, Fit


class Routes:
    """The clusters of one cycle's nodes (by index position) and what each job may use."""

    __slots__ = ("active", "by_cluster", "clusters", "models", "multi")

    def __init__(self, index: CapacityIndex, pending: Sequence[PendingJob]) -> None:
        nodes: list[Node] = index.nodes
        self.clusters: list[str] = [n.cluster for n in nodes]
        self.models: list[str] = [n.model for n in nodes]
        self.by_cluster: dict[str, list[int]] = {}
        for i, c in enumerate(self.clusters):
            self.by_cluster.setdefault(c, []).append(i)
        self.multi = len(self.by_cluster) > 1
        self.active = self.multi or any(j.gpu_models or j.clusters for j in pending)

    def routed(self, job: PendingJob) -> bool:
        return self.active and (self.multi or bool(job.gpu_models or job.clusters))

    def candidates(self, job: PendingJob) -> list[tuple[str, list[int]]]:
        """(cluster, the node positions it may use there) for every cluster with at least one, by name."""
        out = []
        for cluster in sorted(self.by_cluster):
            mine = [i for i in self.by_cluster[cluster]
                    if admits(job.gpu_models, job.clusters, self.models[i], cluster)]
            if mine:
                out.append((cluster, mine))
        return out

    def accepted_clusters(self, gpu_models: Sequence[str], clusters: Sequence[str]) -> tuple[str, ...]:
        """The clusters, by name, with at least one node admitting a request of these models and clusters."""
        return tuple(c for c in sorted(self.by_cluster)
                     if any(admits(gpu_models, clusters, self.models[i], c) for i in self.by_cluster[c]))

    def admissible(self, job: PendingJob, node_index: int) -> bool:
        return admits(job.gpu_models, job.clusters, self.models[node_index], self.clusters[node_index])


@contextmanager
def hidden_except(index: CapacityIndex, keep: Sequence[int]) -> Iterator[None]:
    """Hide every visible node of `index` but `keep` for the duration, then show exactly those again (a node
    hidden for another reason, reserved or claimed, stays hidden)."""
    keep_set = set(keep)
    ok = index.ok
    hidden = [i for i in range(len(ok)) if ok[i] and i not in keep_set]
    for i in hidden:
        index.mask(i)
    try:
        yield
    finally:
        for i in hidden:
            index.unmask(i)


def clusters_of(jobs: Sequence[PendingJob], nodes: Sequence[Node]) -> dict[str, frozenset[str]]:
    """The clusters each of `jobs` may run on: those with a node of a model it accepts, in a cluster it accepts
    (`admits`; a pinned job's `clusters` is its pin already). Computed once per distinct request."""
    sets: dict[tuple[tuple[str, ...], tuple[str, ...]], frozenset[str]] = {}
    out: dict[str, frozenset[str]] = {}
    for job in jobs:
        key = (job.gpu_models, job.clusters)
        mine = sets.get(key)
        if mine is None:
            mine = sets[key] = frozenset(n.cluster for n in nodes
                                         if admits(job.gpu_models, job.clusters, n.model, n.cluster))
        out[job.id] = mine
    return out


def largest_waiting_by_cluster(jobs: Sequence[PendingJob], nodes: Sequence[Node],
                               accepted: dict[str, frozenset[str]] | None = None) -> dict[str, int]:
    """The GPUs of the largest waiting gang that may run on each cluster of `nodes` (0: none), the gang its
    fragmentation is measured against (ADR 0091: gangs never span clusters, so a lab-wide figure measured one
    cluster's free GPUs against a gang that can never run there). A job may run on a cluster it accepts
    (`clusters_of`: its models, its clusters, its allocation's pin) whose nodes it admits hold its GPUs together
    (`domain.clusters.largest_in`, as a submission is checked: whatever their state now)."""
    cat = catalogue((n.gpus, n.model, n.cluster) for n in nodes)
    sets = accepted if accepted is not None else clusters_of(jobs, nodes)
    out = dict.fromkeys(cat.clusters, 0)
    room: dict[tuple[tuple[str, ...], str], int] = {}
    for job in jobs:
        for cluster in sets.get(job.id, frozenset()):
            if job.gpus <= out.get(cluster, 0):
                continue
            key = (job.gpu_models, cluster)
            cap = room.get(key)
            if cap is None:
                cap = room[key] = largest_in(cat, job.gpu_models, (cluster,))[0]
            if job.gpus <= cap:
                out[cluster] = job.gpus
    return out


def positions_in_clusters(jobs: Sequence[PendingJob], nodes: Sequence[Node],
                          accepted: dict[str, frozenset[str]] | None = None) -> dict[str, int]:
    """ADR 0073: each job's 1-based position among `jobs` (waiting, in the order) that accept a cluster it
    accepts: its place in the queue of the clusters it may run on, which is what a user asks when a job on one
    cluster waits behind work that can only run on another. With one cluster (or none), its position overall.
    One pass over the order, counting the jobs ahead per distinct set of accepted clusters (`accepted`: the
    jobs' `clusters_of`, computed here when not given)."""
    names = {n.cluster for n in nodes}
    if len(names) <= 1:
        return {job.id: k for k, job in enumerate(jobs, 1)}
    sets = accepted if accepted is not None else clusters_of(jobs, nodes)
    seen: dict[frozenset[str], int] = {}
    out: dict[str, int] = {}
    for job in jobs:
        mine = sets[job.id]
        out[job.id] = 1 + sum(k for theirs, k in seen.items() if theirs & mine)
        seen[mine] = seen.get(mine, 0) + 1
    return out


def left_free(index: CapacityIndex, fit: Fit) -> int:
    """Free GPUs the fit leaves on the nodes it takes (the tie-break between clusters: tightest first)."""
    return sum(index.free[i] - g for i, g in fit.nodes)


def releases_on(running: Sequence[RunningJob], pos: dict[str, int], now: float,
                settings: PolicySettings) -> dict[int, list[tuple[float, int]]]:
    """Per node position, (soonest time its GPUs could be free, GPUs) of every running job on it, soonest
    first: the end of its grace when it is being preempted, else the end of its protection."""
    out: dict[int, list[tuple[float, int]]] = {}
    for r in running:
        t = max(grace_ends_at(r, settings) if r.preemption_requested_at is not None else r.protected_until, now)
        for nid, g in r.placement:
            i = pos.get(nid)
            if i is not None:
                out.setdefault(i, []).append((t, g))
    for lst in out.values():
        lst.sort()
    return out


def estimated_wait_s(index: CapacityIndex, nodes: Sequence[int], gpus: int,
                     releases: dict[int, list[tuple[float, int]]], now: float) -> float | None:
    """The soonest time (s from now) `gpus` GPUs of `nodes` could be free as protections end there (a lower
    bound; None when not even every GPU there would hold it)."""
    ready = [i for i in nodes if index.layout_ready[i]]
    free = sum(index.free[i] for i in ready)
    if free >= gpus:
        return 0.0
    if sum(index.cap[i] for i in ready) < gpus:
        return None
    ends = sorted(x for i in ready for x in releases.get(i, ()))
    for t, g in ends:
        free += g
        if free >= gpus:
            return max(0.0, t - now)
    return None


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def room_cluster(victims: Sequence[RunningJob], pos: dict[str, int], clusters: Sequence[str]) -> str | None:
    """The cluster a waiting job's room is being made on (its victims' nodes: one cluster, since the victim
    search of a routed job sees one cluster at a time); None when its victims are gone or span clusters."""
    found = {clusters[pos[nid]] for v in victims for nid, _ in v.placement if nid in pos}
    return next(iter(found)) if len(found) == 1 else None


def stays_in_room(room: str | None, fits_now: Sequence[str], chosen: str) -> str:
    """ADR 0068, where a job whose room is being made on cluster `room` goes among the clusters `fits_now`
    where it fits now (`chosen`: the usual choice among them): its room's cluster when it fits there now
    (the hysteresis: it never leaves the room made for it for an equal wait), else `chosen`, which is
    strictly better than its room (0 s there, against the end of its victims' grace)."""
    return room if room is not None and room in fits_now else chosen


def soonest_reservation(options: Sequence[tuple[float, int, str]]) -> str:
    """ADR 0071, the cluster a routed large gang's reservation is made on, among `options` = (due time, GPUs the
    reserved nodes hold beyond the gang, cluster) of each cluster where one could be assembled: the soonest due,
    then the tightest (fewest spare GPUs: ADR 0057's tightest-fit rule), then the name."""
    return min(options)[2]


def reservation_evidence(chosen: str, ready_at: float, considered: Sequence[dict[str, Any]],
                         now: float) -> dict[str, Any]:
    """A routed reservation's `routing` evidence (ADR 0071): the cluster chosen, when it is due on every cluster
    considered (None: nothing there would ever free enough), and why, in words."""
    parts = []
    for c in considered:
        if c["cluster"] == chosen:
            continue
        due = c["ready_at"]
        parts.append(f"never on {c['cluster']} (nothing there frees enough)" if due is None
                     else f"{_duration(max(0.0, due - now))} on {c['cluster']}")
    reason = f"reserved on {chosen}: due in {_duration(max(0.0, ready_at - now))} there"
    reason += " against " + "; ".join(parts) if parts else "; the only cluster it may use"
    return {"cluster": chosen, "candidates": list(considered), "reason": reason}


def routing_evidence(job: PendingJob, chosen: str, fit: Fit, index: CapacityIndex,
                     candidates: list[dict[str, Any]], moved_from: str | None = None) -> dict[str, Any]:
    """The placement's `routing` evidence: the clusters (and models) it could use, which it fits now, the
    estimated wait elsewhere, the one chosen and why, in words; `moved_from`: the cluster whose room being
    made for it the job leaves (ADR 0068)."""
    models = sorted({index.nodes[i].model for i, _ in fit.nodes})
    others = [c for c in candidates if c["cluster"] != chosen]
    parts = []
    for c in others:
        wait = c.get("estimated_wait_s")
        if c["fits_now"]:
            parts.append(f"it would also start now on {c['cluster']} (a looser fit)")
        elif wait is None:
            parts.append(f"no estimate of its wait on {c['cluster']}")
        else:
            parts.append(f"an estimated {_duration(wait)} on {c['cluster']}")
    verb = f"moved from {moved_from} to" if moved_from is not None else "placed on"
    reason = f"{verb} {chosen} ({', '.join(models)}): would wait 0 s there"
    if job.pin:  # ADR 0067: the only cluster tried; other clusters' room is not the pinned allocation's
        reason += f"; its allocation is pinned to {job.pin}"
    elif parts:
        reason += " against " + "; ".join(parts)
    elif not others:
        reason += "; the only cluster it may use" + (" with room" if len(candidates) > 1 else "")
    evidence: dict[str, Any] = {
        "cluster": chosen,
        "models": models,
        "accepts": {"gpu_models": list(job.gpu_models), "clusters": list(job.clusters)},
        "candidates": candidates,
        "reason": reason,
    }
    if job.pin:
        evidence["pinned_to"] = job.pin
    if moved_from is not None:
        evidence["moved_from"] = moved_from
    return evidence
