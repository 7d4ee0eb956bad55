"""Explanations (issue 3 "Explanations"; DESIGN.md "Every decision has evidence"): for every waiting
job a reason code, the amount blocking it ("needs 4 more GPUs in one block", "allocation ranked 7 of
12 at its level", "waiting for protections that end at T"), its position overall and inside its
project, and the evidence.

A cycle touches only the head of a long queue; the rest of the waiting jobs are explained in bulk
from figures taken once at the end of the cycle (free capacity per level, funding per allocation,
when protections end), so an explanation costs O(1) and is built when it is read. Whoever needs only
whether an explanation changed reads its summary (reason, blocking GPUs, scope), computed once per
class of jobs the bulk rule cannot tell apart (ADR 0031).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from steward.domain.clusters import admits, largest_gang
from steward.domain.nodes import takes_new_work
from steward.domain.policy_settings import PolicySettings
from steward.policy.cluster_share import ClusterOrder
from steward.policy.contract import (
    asks_for_funding,
    funding_path,
    grace_ends_at,
    has_entitlement_left,
    protection_s,
)
from steward.policy.debug_quota import Qualification
from steward.policy.model import Explanation, PendingJob, Placement, RunningJob
from steward.policy.ordering import Standing
from steward.policy.reasons import (  # the reason codes and their words (ADR 0040: below the model)
    BLOCKED_BY_RESERVATION,
    ENTITLEMENT_USED,
    NO_ALLOCATION,
    OUTRANKED,
    TOO_LARGE,
    UNFUNDED_BY_REQUEST,
    WAITING_FOR_PROTECTION,
)
from steward.policy.tree import AllocationTree

if TYPE_CHECKING:
    from steward.policy.placement import CapacityIndex

# what the bulk rule reads of a job (`ExplainContext._class_of`)
_ClassKey = tuple[str, int, int, str, float, int, tuple[tuple[str, ...], tuple[str, ...]] | None]

@dataclass(frozen=True, slots=True)
class Special:
    """An explanation decided during the cycle (for jobs the cycle actually tried)."""

    reason: str
    blocking_gpus: int
    scope: str
    until: float | None
    extra: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReservedRoom:
    """One reservation of the cycle as explanations read it: the gang holding it, when it is due,
    where, and the room still free on its (unclaimed) nodes."""

    job_id: str
    ready_at: float
    domain: tuple[str, ...]
    max_free: int
    """Most free GPUs on one of its nodes (what a one-node job could use)."""
    whole: int
    """GPUs on its wholly free nodes (what a multi-node gang could use)."""
    cluster: str | None = None
    """The cluster it is on (several clusters, ADR 0071); None with one cluster."""

    def would_hold(self, gpus: int, maxcap: int) -> bool:
        """Issue 3: would this reservation's free room hold a job of `gpus` GPUs now?"""
        return gpus <= (self.max_free if gpus <= maxcap else self.whole)


@dataclass(frozen=True, slots=True)
class CapacityFigures:
    """Free capacity after the cycle, taken once (the index itself keeps changing elsewhere)."""

    maxcap: int
    max_free: int
    whole_by_depth: tuple[int, ...]
    depth: int
    levels: tuple[str, ...]
    total_capacity: int
    largest_domain_by_depth: tuple[int, ...]
    reserved_for: str | None = None
    reserved_until: float | None = None
    reserved_domain: tuple[str, ...] = ()
    reserved_max_free: int = 0
    reserved_whole: int = 0
    reserved: tuple[ReservedRoom, ...] = ()
    """Every reservation of the cycle, in the order they were made (the most under-served first)."""


class ExplainContext:
    """What the bulk explanations read. Built by the cycle; read-only afterwards."""

    __slots__ = (
        "_accepts_memo",
        "_admitted_memo",
        "_caps",
        "_earliest",
        "_gang_memo",
        "_gangs",
        "_leaving",
        "_multi",
        "_node_paths",
        "_nodes",
        "_pos",
        "_pos_in_project",
        "_pos_of_node",
        "_releases",
        "_summaries",
        "_waiting",
        "blocked_by_res",
        "by_project",
        "capacity",
        "cluster_order",
        "free_after",
        "funded_in_use",
        "jobs",
        "nodes_ok",
        "now",
        "paths",
        "placements",
        "qualifications",
        "quota",
        "rank_cache",
        "running",
        "settings",
        "specials",
        "standing",
        "tree",
    )

    def __init__(
        self,
        *,
        now: float,
        jobs: Sequence[PendingJob],
        by_project: Mapping[str, Sequence[PendingJob]],
        specials: Mapping[str, Special],
        tree: AllocationTree,
        standing: Standing,
        settings: PolicySettings,
        funded_in_use: Mapping[str, float],
        quota: Mapping[str, float],
        capacity: CapacityFigures,
        running: Sequence[RunningJob],
        index: CapacityIndex,
        leaving: frozenset[str],
        placements: Sequence[Placement] = (),
        blocked_by_reservation: Mapping[str, str] | None = None,
        qualifications: Mapping[str, Qualification] | None = None,
        cluster_order: ClusterOrder | None = None,
    ) -> None:
        self.now = now
        self.jobs = jobs
        """The global order of the cycle's pending jobs: the waiting ones are those not in `placements`."""
        self._waiting: Sequence[PendingJob] | None = None
        self.by_project = by_project
        self.specials = specials
        self.tree = tree
        self.standing = standing
        self.cluster_order = cluster_order
        """ADR 0080: the order per cluster the cycle walked (None: the tree's order); a job's rank then carries
        the standing it was ordered by."""
        self.settings = settings
        self.funded_in_use = dict(funded_in_use)
        self.quota = quota
        self.capacity = capacity
        self.running = running
        self.free_after = list(index.free)
        self.nodes_ok = [takes_new_work(n.state) for n in index.nodes]
        self.paths: dict[str, tuple[str, ...]] = {}
        self.rank_cache: dict[str, dict[str, Any]] = {}
        self._pos: dict[str, int] | None = None
        self._pos_in_project: dict[str, int] | None = None
        self._earliest: list[float] | None = None
        self._releases: list[list[tuple[float, int]]] | None = None
        self._gang_memo: dict[tuple[int, int], float | None] = {}
        self._summaries: dict[_ClassKey, tuple[str, int, str]] = {}
        self._gangs: list[int] | None = None
        self.placements = placements
        self.qualifications: Mapping[str, Qualification] = qualifications or {}
        """ADR 0029: the debug lane's qualification of each waiting piece of debug work."""
        self.blocked_by_res: Mapping[str, str] = blocked_by_reservation or {}
        """Job id → the reserved gang whose nodes it was kept off when the cycle tried it."""
        self._node_paths = [n.path for n in index.nodes]
        self._nodes = list(index.nodes)
        # release profile inputs, copied so later mutation of the index cannot change answers
        self._pos_of_node = index.pos
        self._caps = list(index.cap)
        self._leaving = leaving
        self._multi = len({n.cluster for n in index.nodes}) > 1
        self._accepts_memo: dict[tuple[tuple[str, ...], tuple[str, ...]], frozenset[str]] = {}
        self._admitted_memo: dict[tuple[tuple[str, ...], tuple[str, ...]], int] = {}

    @property
    def waiting(self) -> Sequence[PendingJob]:
        """The jobs still waiting after the cycle, in global order (taken when first read)."""
        if self._waiting is None:
            placed = {p.job_id for p in self.placements}
            self._waiting = [j for j in self.jobs if j.id not in placed] if placed else self.jobs
        return self._waiting

    def _node_releases(self) -> list[list[tuple[float, int]]]:
        """When the GPUs held on each node come free if every protection ends on time and nothing
        ends sooner: leaving jobs now (or at their grace end), unfunded work now, funded work at
        the end of its protection — this cycle's placements included. O(running)."""
        if self._releases is not None:
            return self._releases
        releases: list[list[tuple[float, int]]] = [[] for _ in self._caps]
        pos = self._pos_of_node
        leaving = self._leaving
        now = self.now
        settings = self.settings
        for job in self.running:
            if job.id in leaving:
                t = now
            elif job.preemption_requested_at is not None:
                t = max(now, grace_ends_at(job, settings))
            elif not job.funded:
                t = now
            else:
                t = max(now, job.protected_until)
            for nid, g in job.placement:
                i = pos.get(nid)
                if i is not None:
                    releases[i].append((t, g))
        for p in self.placements:
            for nid, g in p.assignments:
                releases[pos[nid]].append((p.protected_until, g))
        for rel in releases:
            rel.sort()
        self._releases = releases
        return releases

    def _init_release(self) -> list[float]:
        """Earliest time a single node has ≥ g free GPUs, for g = 1..node size (the "waiting for
        protections that end at T" figure of one-node jobs)."""
        releases = self._node_releases()
        now = self.now
        size = self.capacity.maxcap
        earliest = [math.inf] * (size + 1)
        for i, rel in enumerate(releases):
            if not self.nodes_ok[i]:
                continue
            cap = self._caps[i]
            acc = cap - sum(g for _, g in rel)
            for g in range(1, min(acc, size) + 1):
                earliest[g] = min(earliest[g], now)
            for t, g_rel in rel:
                before = acc
                acc = min(acc + g_rel, cap)
                for g in range(max(before, 0) + 1, min(acc, size) + 1):
                    if t < earliest[g]:
                        earliest[g] = t
        return earliest

    def _earliest_gang(self, gpus: int, depth: int) -> float | None:
        """Earliest time one domain at `depth` has whole free nodes for a multi-node gang."""
        key = (gpus, depth)
        if key in self._gang_memo:
            return self._gang_memo[key]
        releases = self._node_releases()
        by_dom: dict[tuple[str, ...], list[tuple[float, int]]] = {}
        for i, rel in enumerate(releases):
            if not self.nodes_ok[i]:
                continue
            clear = max((t for t, _ in rel), default=self.now)
            by_dom.setdefault(self._node_paths[i][:depth], []).append((clear, self._caps[i]))
        best = math.inf
        for items in by_dom.values():
            items.sort()
            total = 0
            for t, cap in items:
                total += cap
                if total >= gpus:
                    best = min(best, t)
                    break
        out = None if math.isinf(best) else best
        self._gang_memo[key] = out
        return out

    def position(self, job_id: str) -> int:
        return self._waiting_positions()[job_id]

    def position_in_project(self, job: PendingJob) -> int:
        if self._pos_in_project is None:
            waiting = self._waiting_positions()
            table: dict[str, int] = {}
            for jobs in self.by_project.values():
                k = 0
                for j in jobs:
                    if j.id in waiting:
                        k += 1
                        table[j.id] = k
            self._pos_in_project = table
        return self._pos_in_project[job.id]

    def _waiting_positions(self) -> dict[str, int]:
        if self._pos is None:
            self._pos = {j.id: k + 1 for k, j in enumerate(self.waiting)}
        return self._pos

    def path(self, project: str) -> tuple[str, ...]:
        p = self.paths.get(project)
        if p is None:
            p = self.tree.path(project) if self.tree.is_leaf(project) else ()
            self.paths[project] = p
        return p

    def rank(self, project: str) -> dict[str, Any]:
        r = self.rank_cache.get(project)
        if r is None:
            r = self.standing.evidence(self.tree, project)
            self.rank_cache[project] = r
        return r

    def scope(self, job: PendingJob) -> tuple[str, int]:
        """(words for the domain the job must fit in, free GPUs usable there now)."""
        cap = self.capacity
        if job.gpus <= cap.maxcap:
            return "one node", cap.max_free
        d = min(job.topology_depth or 0, cap.depth)
        if d == 0:
            return "the cluster (whole nodes)", cap.whole_by_depth[0]
        level = cap.levels[d - 1] if d - 1 < len(cap.levels) else f"level-{d}"
        return f"one {level} (whole nodes)", cap.whole_by_depth[d]

    def explain(self, job: PendingJob) -> Explanation:
        """The bulk rule, in order: a decision made this cycle; can never fit; no allocation;
        unfunded by request; no entitlement left; waiting for protections; outranked."""
        evidence: dict[str, Any] = {
            "now": self.now,
            "project": job.project,
            "gpus": job.gpus,
            "submitted_at": job.submitted_at,
            "priority": job.priority,
            "rank": self.rank(job.project) if self.cluster_order is None
            else self.cluster_order.rank(job, self.rank(job.project)),
        }
        q = self.qualifications.get(job.id) if job.klass != "batch" else None
        if q is not None:
            evidence["debug_quota"] = q.to_dict()
        if job.pin:
            evidence["pinned_to"] = self.pinned_to(job)
        reason, blocking, scope, until = self._reason(job, evidence)
        return Explanation(
            job.id,
            reason,
            blocking,
            scope,
            until,
            self.position(job.id),
            self.position_in_project(job),
            evidence,
        )

    def pinned_to(self, job: PendingJob) -> dict[str, Any]:
        """ADR 0067: the cluster the job's allocation is pinned to and its room now (free GPUs of ready nodes
        there that the job accepts, after this cycle's placements): the job waits for room there only."""
        free = sum(self.free_after[i] for i, node in enumerate(self._nodes)
                   if self.nodes_ok[i] and admits(job.gpu_models, job.clusters, node.model, node.cluster))
        return {"cluster": job.pin, "free_gpus": free}

    def summary(self, job: PendingJob, position: int = 0) -> tuple[str, int, str]:
        """(reason, blocking GPUs, scope) of `explain(job)` without building its evidence, position
        or words (ADR 0031: what the scheduler compares to decide which explanations to record).
        Jobs the bulk rule cannot tell apart share one answer: a job with a decision of this cycle
        (a special, or a reservation recorded when it was tried) is reasoned on its own; any other's
        answer depends only on `_class_of(job)`, so it is computed once per class. `position`: the
        job's (1-based) among the waiting when the caller knows it."""
        if job.id in self.specials or job.id in self.blocked_by_res:
            reason, blocking, scope, _ = self._reason(job, None)
            return reason, blocking, scope
        key = self._class_of(job, position)
        got = self._summaries.get(key)
        if got is None:
            reason, blocking, scope, _ = self._reason(job, None)
            got = (reason, blocking, scope)
            self._summaries[key] = got
        return got

    def _class_of(self, job: PendingJob, position: int = 0) -> _ClassKey:
        """Everything of a job (without a decision of this cycle) that `_reason` reads: its project,
        size, topology depth, class and min_runtime (funding and protection), and how many reserved
        gangs are ahead of it in the order (`_blocking_reservation`: behind a gang or not)."""
        behind = 0
        if self.capacity.reserved:
            mine = position or self._waiting_positions()[job.id]
            for g in self._gang_positions():
                if g < mine:
                    behind += 1
        # ADR 0073: with several clusters, which reservations concern it depends on the clusters it accepts
        request = (job.gpu_models, job.clusters) if behind and self._multi else None
        return job.project, job.gpus, job.topology_depth or 0, job.klass, job.min_runtime_s, behind, request

    def _gang_positions(self) -> list[int]:
        """Positions of the reserved gangs still waiting, ascending (0 for one that is not waiting:
        no job is behind it in `_blocking_reservation`'s sense — it is skipped there)."""
        if self._gangs is None:
            waiting = self._waiting_positions()
            self._gangs = sorted(waiting[r.job_id] for r in self.capacity.reserved if r.job_id in waiting)
        return self._gangs

    def _reason(self, job: PendingJob, evidence: dict[str, Any] | None) -> tuple[str, int, str, float | None]:
        """(reason, blocking GPUs, scope, until) by the rule of `explain`; the evidence of the reason
        goes into `evidence` when one is given."""
        settings = self.settings
        scope, usable = self.scope(job)
        blocking = max(0, job.gpus - usable)
        special = self.specials.get(job.id)
        reason: str
        until: float | None = None
        if special is not None:
            if evidence is not None:
                evidence.update(special.extra)
            return special.reason, special.blocking_gpus, special.scope, special.until
        path = self.path(job.project)
        largest = self._largest_possible(job)
        if job.gpus > largest:
            reason = TOO_LARGE
            blocking = job.gpus - largest
            if evidence is not None:
                evidence["largest_gpus"] = largest
                if job.gpu_models or job.clusters:  # what it accepts, for the words of `reasons`
                    evidence["gpu_models"] = list(job.gpu_models)
                    evidence["clusters"] = list(job.clusters)
        elif settings.funding and not path:
            reason = NO_ALLOCATION
        elif not asks_for_funding(job, settings):
            reason = UNFUNDED_BY_REQUEST
        else:
            funds = funding_path(path, settings)
            short = has_entitlement_left(funds, self.funded_in_use, self.quota) if settings.funding else None
            if short:
                reason = ENTITLEMENT_USED
                if evidence is not None:
                    evidence["funding"] = {
                        "allocation": short,
                        "funded_gpus": self.funded_in_use.get(short, 0.0),
                        "quota_gpus": self.quota.get(short, 0.0),
                    }
            elif (room := self._blocking_reservation(job)) is not None:
                reason = BLOCKED_BY_RESERVATION
                until = room.ready_at
                if evidence is not None:
                    evidence["reserved_for"] = room.job_id
                    evidence["domain"] = list(room.domain)
            else:
                until = self._earliest_for(job)
                reason = WAITING_FOR_PROTECTION if until is not None and until > self.now else OUTRANKED
                if blocking == 0:
                    blocking = job.gpus  # room exists, but not for it: it goes to work ahead of it
        return reason, blocking, scope, until

    def _blocking_reservation(self, job: PendingJob) -> ReservedRoom | None:
        """Issue 3 (ADR 0013): the reservation that keeps this job waiting — the one the cycle
        recorded when it tried the job; otherwise the first whose free room would hold it but that
        it may not use: the job is behind the reserved gang in the order and its protection would
        outlast the reservation. None when no reservation concerns it."""
        rooms = self.capacity.reserved
        recorded = self.blocked_by_res.get(job.id)
        if recorded is not None:
            return next((r for r in rooms if r.job_id == recorded), None)
        waiting = self._waiting_positions()
        mine = waiting[job.id]
        ends = self.now + protection_s(job.klass, job.min_runtime_s, self.settings)
        accepts = self._accepts(job) if self._multi else None
        for room in rooms:
            gang = waiting.get(room.job_id)
            if gang is None or mine <= gang:  # the gang itself, or ahead of it: may use its nodes
                continue
            if accepts is not None and room.cluster not in accepts:
                continue  # ADR 0073: a reservation on a cluster it does not accept never keeps it waiting
            if room.would_hold(job.gpus, self.capacity.maxcap) and ends > room.ready_at:
                return room
        return None

    def _accepts(self, job: PendingJob) -> frozenset[str]:
        """The clusters with a node `job` accepts (its models and clusters; memoised per request)."""
        key = (job.gpu_models, job.clusters)
        got = self._accepts_memo.get(key)
        if got is None:
            got = frozenset(n.cluster for n in self._nodes if admits(job.gpu_models, job.clusters, n.model, n.cluster))
            self._accepts_memo[key] = got
        return got

    def _largest_possible(self, job: PendingJob) -> int:
        """The most GPUs the cluster could ever give `job`: its node's or domain's capacity, and no more than
        the registered nodes it accepts hold in one cluster (`clusters.largest_gang`, the rule a submission is
        refused by), so a job whose models or clusters no node offers any more (its nodes retired, ADR 0078)
        reads "can never fit" instead of waiting behind the others for ever."""
        cap = self.capacity
        if job.gpus <= cap.maxcap:
            largest = cap.maxcap
        else:
            largest = cap.largest_domain_by_depth[min(job.topology_depth or 0, cap.depth)]
        if job.gpu_models or job.clusters:
            largest = min(largest, self._admitted(job))
        return largest

    def _admitted(self, job: PendingJob) -> int:
        """The GPUs, in the one cluster that has most, of the registered nodes `job`'s request admits (memoised
        per request)."""
        key = (job.gpu_models, job.clusters)
        got = self._admitted_memo.get(key)
        if got is None:
            got = largest_gang(((n.gpus, n.model, n.cluster) for n in self._nodes), job.gpu_models, job.clusters)[0]
            self._admitted_memo[key] = got
        return got

    def _earliest_for(self, job: PendingJob) -> float | None:
        if job.gpus <= self.capacity.maxcap:
            if self._earliest is None:
                self._earliest = self._init_release()
            t = self._earliest[job.gpus]
            return None if math.isinf(t) else t
        return self._earliest_gang(job.gpus, min(job.topology_depth or 0, self.capacity.depth))


class Explanations(Mapping[str, Explanation]):
    """job id → Explanation for every job still waiting, in global order; built when read."""

    __slots__ = ("_ctx", "_ids")

    def __init__(self, ctx: ExplainContext) -> None:
        self._ctx = ctx
        self._ids: dict[str, PendingJob] | None = None

    def _jobs(self) -> dict[str, PendingJob]:
        if self._ids is None:
            self._ids = {j.id: j for j in self._ctx.waiting}
        return self._ids

    def __getitem__(self, job_id: str) -> Explanation:
        return self._ctx.explain(self._jobs()[job_id])

    def __iter__(self) -> Iterator[str]:
        return (j.id for j in self._ctx.waiting)

    def summaries(self) -> Iterator[tuple[str, tuple[str, int, str]]]:
        """(job id, (reason, blocking GPUs, scope)) for every waiting job, in global order, without
        building the explanations (ADR 0031: `ExplainContext.summary`); each equals the key of
        `self[job_id]`."""
        ctx = self._ctx
        for position, job in enumerate(ctx.waiting, 1):
            yield job.id, ctx.summary(job, position)

    def __len__(self) -> int:
        return len(self._ctx.waiting)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return list(self.items()) == list(other.items())

    def __hash__(self) -> int:
        return id(self)
