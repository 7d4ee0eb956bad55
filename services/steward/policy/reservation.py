"""Reservations (DESIGN.md "Placement": "plan protection expiries so that large gangs and host
drains get whole domains"; issue 3: "a reservation for the head large gang so that protection
expiries assemble a whole domain for it (backfill only work whose protection ends before the
reservation)").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from operator import itemgetter

from steward.domain.policy_settings import PolicySettings
from steward.policy.contract import grace_ends_at, in_grace, is_protected
from steward.policy.model import PendingJob, RunningJob
from steward.policy.placement import CapacityIndex


def wants_reservation(job: PendingJob, settings: PolicySettings) -> bool:
    """Issue 3: only the head *large* gang (at least `reservation_min_gpus`) gets a reservation, and
    only when the policy makes reservations (the `ai2` and older baselines do not)."""
    return settings.reservations and job.gpus >= settings.reservation_min_gpus


def base_release(job: RunningJob, now: float, settings: PolicySettings, leaving: bool) -> tuple[float, bool]:
    """When a running job's GPUs can be had by a reserving gang, and whether that time holds only if the gang
    may preempt the job: a job already leaving at the end of its grace (now when stopped this cycle);
    unfunded work at once; funded work when its protection ends, if the gang may preempt it then (strict
    improvement holds now; the second value is True); otherwise never — its own end is unknown to the
    policy. The first part of the rule needs no gang, so it is taken once a cycle (`NodeReleases`); the gang's
    consent is asked per project by its walk (`GangReleases`)."""
    if leaving:
        return now, False
    if in_grace(job):
        return max(now, grace_ends_at(job, settings)), False
    if not job.funded:
        return (now if settings.funding else math.inf), False
    if not (settings.fairness_preemption and settings.preemptible_after_protection):
        return math.inf, False
    return (job.protected_until if is_protected(job, now) else now), True


def may_backfill(protection_s: float, now: float, ready_at: float) -> bool:
    """Issue 3: on reserved nodes, backfill only work whose protection ends before the reservation
    is due (so it is preemptible by then); unfunded work has no protection and always may."""
    return now + protection_s <= ready_at


@dataclass(frozen=True, slots=True)
class ReservationPlan:
    nodes: tuple[int, ...]
    domain_depth: int
    domain: tuple[str, ...]
    ready_at: float


class NodeReleases:
    """Per node of the index, the running jobs on it as (release time, GPUs, project), soonest first, where the
    project is the one whose consent the time needs (`base_release`: funded work a gang may preempt at its
    protection end) or None. None of it depends on the gang, so it is built once a cycle, when the first
    reservation is planned (the running jobs, and the jobs leaving, are fixed by then: phase 1), and every
    reserving gang walks it (`GangReleases`) instead of materialising its own per-node lists. No time is before
    now (`base_release`)."""

    def __init__(
        self,
        pos: dict[str, int],
        n: int,
        running: Iterable[RunningJob],
        now: float,
        settings: PolicySettings,
        leaving: AbstractSet[str],
    ) -> None:
        jobs: list[list[tuple[float, int, str | None]]] = [[] for _ in range(n)]
        for r in running:
            t, ask = base_release(r, now, settings, r.id in leaving)
            who = r.project if ask else None
            for nid, g in r.placement:
                i = pos.get(nid)
                if i is not None:
                    jobs[i].append((t, g, who))
        for lst in jobs:
            if len(lst) > 1:
                lst.sort(key=_RELEASE)
        self.now = now
        self.jobs = jobs


_RELEASE = itemgetter(0)


class GangReleases:
    """One reserving gang's view of the cycle's `NodeReleases`: a time that needs the gang's consent holds when
    `may_preempt(project, cluster)` (memoised here), and is never otherwise; this cycle's placements, which hold
    their nodes too, are added per node (`add`) with the gang's release time for each. `cluster_of`: each node's
    cluster, when consent depends on where the work runs (ADR 0076, the standing per cluster); None: asked once
    per project (cluster None)."""

    def __init__(self, base: NodeReleases, may_preempt: Callable[[str, str | None], bool],
                 cluster_of: Sequence[str] | None = None) -> None:
        self.base = base
        self.now = base.now
        self.may_preempt = may_preempt
        self.cluster_of = cluster_of
        self.memo: dict[tuple[str, str | None], bool] = {}
        self.extra: dict[int, list[tuple[float, int]]] = {}
        self.soonest = base.now  # no node is ready for the gang before this (`add` may lower it)

    def allowed(self, project: str, i: int | None) -> bool:
        """May the gang preempt `project`'s work on node i (None: no node) once its protection ends?"""
        cluster = self.cluster_of[i] if self.cluster_of is not None and i is not None else None
        key = (project, cluster)
        ok = self.memo.get(key)
        if ok is None:
            ok = self.may_preempt(project, cluster)
            self.memo[key] = ok
        return ok

    def add(self, i: int, t: float, gpus: int) -> None:
        """A placement of this cycle holds `gpus` on node i until `t` for this gang."""
        if t < self.soonest:
            self.soonest = t
        extra = self.extra.get(i)
        if extra is None:
            self.extra[i] = [(t, gpus)]
        else:
            extra.append((t, gpus))

    def ready_one(self, i: int, need: int, have: int, bound: float) -> float:
        """When node i has `need` GPUs, `have` free now: now if it has them, else the release time of the job
        whose GPUs make them up, its jobs taken soonest first, skipping those the gang may not preempt;
        math.inf when that never happens, or not before `bound` (the soonest node so far: a node visited after
        it that is ready no sooner is not chosen, so its walk stops there)."""
        if have >= need:
            return self.now
        extra = self.extra.get(i)
        if extra is not None:
            return self._ready_with(extra, i, need, have)
        acc = have
        for t, g, who in self.base.jobs[i]:
            if t >= bound:
                return math.inf
            if who is not None and not self.allowed(who, i):
                continue  # never released to this gang: it would come last, at math.inf
            acc += g
            if acc >= need:
                return t
        return math.inf

    def _ready_with(self, extra: list[tuple[float, int]], i: int, need: int, have: int) -> float:
        """`ready_one` on a node that also holds this cycle's placements: its jobs and placements merged."""
        rel = [(t if who is None or self.allowed(who, i) else math.inf, g) for t, g, who in self.base.jobs[i]]
        rel.extend(extra)
        rel.sort()
        acc = have
        t = self.now
        for rt, g in rel:
            if acc >= need:
                break
            acc += g
            t = rt
        return t if acc >= need else math.inf

    def clear_at(self, i: int) -> float:
        """When every job on node i has released it (now at the earliest); math.inf when one never does."""
        now = self.now
        t = now
        for rt, _, who in self.base.jobs[i]:
            if who is not None and not self.allowed(who, i):
                return math.inf
            if rt > t:
                t = rt
        extra = self.extra.get(i)
        if extra is not None:
            for rt, _ in extra:
                if rt > t:
                    t = rt
        return t


def plan_reservation(
    job: PendingJob,
    index: CapacityIndex,
    releases: GangReleases,
    maxcap: int | None = None,
) -> ReservationPlan | None:
    """The nodes that assemble room for `job` soonest, given when the jobs on each node release their GPUs to
    it (`releases`). A one-node job: the node where enough GPUs free up first (the first in topology order
    among equals). A multi-node gang: a node is whole when its last job releases; in each domain (deepest level
    first) the time its fastest nodes add up to the gang; the soonest domain wins, then the smallest, then
    topology order. None when nothing ever frees enough. `maxcap`: the largest node the job may use (a routed
    job sees one cluster's admissible nodes, ADR 0071), the index's by default."""
    g = job.gpus
    now_free = index.free
    ok, cap = index.ok, index.cap
    if g <= (index.maxcap if maxcap is None else maxcap):
        best_t = math.inf
        best_i = -1
        for i in range(len(index.ids)):
            if not ok[i] or cap[i] < g:
                continue
            t = releases.ready_one(i, g, now_free[i], best_t)
            if t < best_t:
                best_t = t
                best_i = i
                if t <= releases.soonest:
                    break  # no node after it can be ready sooner
        if best_i < 0:
            return None
        return ReservationPlan(
            (best_i,), len(index.nodes[best_i].path) + 1, (*index.nodes[best_i].path, index.ids[best_i]), best_t
        )
    clear: list[tuple[float, int]] = []
    for i in range(len(index.ids)):
        if not ok[i] or cap[i] == 0:
            continue
        t = releases.clear_at(i)
        if t != math.inf:
            clear.append((t, i))
    clear.sort()
    return soonest_domain(job, index, clear)


def soonest_domain(job: PendingJob, index: CapacityIndex, clear: list[tuple[float, int]]) -> ReservationPlan | None:
    """`plan_reservation` for a multi-node gang, given `clear`: (the time node i is whole for it, i) of every
    node that ever is, sorted. In each domain (deepest level first) the time its fastest nodes add up to the
    gang; the soonest domain wins, then the smallest, then topology order; None when none ever does."""
    g = job.gpus
    min_depth = min(job.topology_depth or 0, index.depth)
    chosen: tuple[float, int, int] | None = None
    for d in range(index.depth, min_depth - 1, -1):
        gathered: dict[int, int] = {}
        of = index.dom_of[d]
        for t, i in clear:
            dom = of[i]
            if dom < 0:
                continue
            gathered[dom] = gathered.get(dom, 0) + index.cap[i]
            if gathered[dom] >= g:
                key = (t, -d, dom)
                if chosen is None or key < chosen:
                    chosen = key
                break
    if chosen is None:
        return None
    t_ready, neg_d, dom = chosen
    d = -neg_d
    picked: list[int] = []
    total = 0
    for t, i in clear:
        if index.dom_of[d][i] == dom and t <= t_ready:
            picked.append(i)
            total += index.cap[i]
            if total >= g:
                break
    return ReservationPlan(tuple(picked), d, index.dom_key[d][dom], t_ready)
