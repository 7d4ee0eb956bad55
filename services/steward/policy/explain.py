"""Explanations (issue 3 "Explanations"; DESIGN.md "Every decision has evidence"): for every waiting
job a reason code, the amount blocking it ("needs 4 more GPUs in one block", "allocation ranked 7 of
12 at its level", "waiting for protections that end at T"), its position overall and inside its
project, and the evidence.

A cycle touches only the head of a long queue; the rest of the waiting jobs are explained in bulk
from figures taken once at the end of the cycle (free capacity per level, funding per allocation,
when protections end), so an explanation costs O(1) and is built when it is read.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from steward.policy.contract import (
    ENTITLEMENT_USED,
    NO_ALLOCATION,
    UNFUNDED_BY_REQUEST,
    asks_for_funding,
    funding_path,
    grace_ends_at,
    has_entitlement_left,
    protection_s,
)
from steward.policy.debug_quota import Qualification
from steward.policy.model import Explanation, PendingJob, Placement, RunningJob
from steward.policy.ordering import Standing
from steward.policy.settings import PolicySettings
from steward.policy.tree import AllocationTree

if TYPE_CHECKING:
    from steward.policy.placement import CapacityIndex

# Reason codes (stable: they end up in events and the API); the funding ones live with their rule
# (contract.funding_gap)
WAITING_FOR_PROTECTION = "waiting_for_protection"
OUTRANKED = "outranked"
INSUFFICIENT_CAPACITY = "insufficient_capacity"
PREEMPTING = "preempting"
RESERVED = "reserved"
BLOCKED_BY_RESERVATION = "blocked_by_reservation"
TOO_LARGE = "too_large"
PREEMPTION_COSTS_MORE = "preemption_costs_more"

REASONS: tuple[str, ...] = (
    NO_ALLOCATION,
    UNFUNDED_BY_REQUEST,
    ENTITLEMENT_USED,
    WAITING_FOR_PROTECTION,
    OUTRANKED,
    INSUFFICIENT_CAPACITY,
    PREEMPTING,
    RESERVED,
    BLOCKED_BY_RESERVATION,
    TOO_LARGE,
    PREEMPTION_COSTS_MORE,
)


def _when(t: float | None, now: float) -> str:
    if t is None or math.isinf(t):
        return "an unknown time"
    d = max(0.0, t - now)
    h, rem = divmod(round(d), 3600)
    m, s = divmod(rem, 60)
    rel = f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")
    return f"t={t:.0f} (in {rel})"


def _rank_words(e: Explanation) -> str:
    levels = e.evidence.get("rank", {}).get("levels") or []
    if not levels:
        return f"position {e.position} in the queue"
    lvl = levels[-1]
    return f"allocation {lvl['allocation']} ranked {lvl['rank']} of {lvl['of']} at its level"


def debug_quota_words(q: Mapping[str, Any]) -> str:
    """DESIGN.md "Debug quota": whether a debug job or session is qualified, with the figures
    (`Qualification.to_dict()`, as explanations carry it under `debug_quota`)."""
    figures = (f"debug quota {q.get('quota_gpus', 0)} GPUs, {q.get('in_use_gpus', 0)} in use, "
               f"{q.get('ahead_gpus', 0)} waiting ahead")
    if q.get("qualified"):
        return f"qualified for the debug lane ({figures}): it goes ahead of the fair-share order"
    if q.get("reason") == "over_quota":
        return f"over its allocation's debug quota ({figures}): it waits as ordinary funded work"
    return f"not qualified for the debug lane ({q.get('reason')})"


def explanation_text(e: Explanation) -> str:
    """Plain words for one explanation (DESIGN.md: "'Why pending' ... answered from those events"),
    with the debug lane's qualification after it for debug work (ADR 0029)."""
    text = _reason_text(e)
    q = e.evidence.get("debug_quota")
    return f"{text}; {debug_quota_words(q)}" if isinstance(q, Mapping) else text


def _reason_text(e: Explanation) -> str:
    need = f"needs {e.blocking_gpus} more GPUs in {e.blocking_scope}"
    until = _when(e.blocking_until, e.evidence.get("now", 0.0))
    ev = e.evidence
    if e.reason == NO_ALLOCATION:
        return f"project {ev.get('project')} has no allocation: it runs unfunded, only on idle capacity; {need}"
    if e.reason == UNFUNDED_BY_REQUEST:
        return f"asked for no protection (min_runtime 0): it runs unfunded, only on idle capacity; {need}"
    if e.reason == ENTITLEMENT_USED:
        f = ev.get("funding", {})
        return (
            f"allocation {f.get('allocation')} has no entitlement left ({f.get('funded_gpus', 0):g} of "
            f"{f.get('quota_gpus', 0):.1f} GPUs funded): it runs unfunded, only on idle capacity; {need}"
        )
    if e.reason == WAITING_FOR_PROTECTION:
        return f"{need}; waiting for protections that end at {until}; {_rank_words(e)}"
    if e.reason == OUTRANKED:
        return (
            f"{need}; {_rank_words(e)}: the GPUs it needs are held by work that is not less served "
            f"or go first to jobs ahead of it"
        )
    if e.reason == PREEMPTING:
        return f"making room: {ev.get('victims', 0)} job(s) checkpoint and stop for it by {until}"
    if e.reason == RESERVED:
        return f"holds a reservation on {'/'.join(ev.get('domain', []))}: room assembles by {until}"
    if e.reason == BLOCKED_BY_RESERVATION:
        return (
            f"the free GPUs that fit it are reserved for {ev.get('reserved_for')} until {until}, "
            f"and its protection would outlast that; {need}"
        )
    if e.reason == PREEMPTION_COSTS_MORE:
        c = ev.get("churn", {})
        return (
            f"{need}; the cheapest preemption would throw away {c.get('cost_gpu_s', 0):.0f} GPU-seconds of "
            f"work, more than the {c.get('gain_gpu_s', 0):.0f} it would gain by starting early (ADR 0028): "
            f"it waits for GPUs to free; {_rank_words(e)}"
        )
    if e.reason == TOO_LARGE:
        return (
            f"can never fit: it needs {ev.get('gpus')} GPUs in {e.blocking_scope}, and the largest has "
            f"{ev.get('largest_gpus', 0)} schedulable GPUs"
        )
    return f"{need}; {_rank_words(e)}"


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
        "_caps",
        "_earliest",
        "_gang_memo",
        "_leaving",
        "_node_paths",
        "_pos",
        "_pos_in_project",
        "_pos_of_node",
        "_releases",
        "blocked_by_res",
        "by_project",
        "capacity",
        "free_after",
        "funded_in_use",
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
        "waiting",
    )

    def __init__(
        self,
        *,
        now: float,
        waiting: Sequence[PendingJob],
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
    ) -> None:
        self.now = now
        self.waiting = waiting
        self.by_project = by_project
        self.specials = specials
        self.tree = tree
        self.standing = standing
        self.settings = settings
        self.funded_in_use = dict(funded_in_use)
        self.quota = quota
        self.capacity = capacity
        self.running = running
        self.free_after = list(index.free)
        self.nodes_ok = [n.state == "ready" for n in index.nodes]
        self.paths: dict[str, tuple[str, ...]] = {}
        self.rank_cache: dict[str, dict[str, Any]] = {}
        self._pos: dict[str, int] | None = None
        self._pos_in_project: dict[str, int] | None = None
        self._earliest: list[float] | None = None
        self._releases: list[list[tuple[float, int]]] | None = None
        self._gang_memo: dict[tuple[int, int], float | None] = {}
        self.placements = placements
        self.qualifications: Mapping[str, Qualification] = qualifications or {}
        """ADR 0029: the debug lane's qualification of each waiting piece of debug work."""
        self.blocked_by_res: Mapping[str, str] = blocked_by_reservation or {}
        """Job id → the reserved gang whose nodes it was kept off when the cycle tried it."""
        self._node_paths = [n.path for n in index.nodes]
        # release profile inputs, copied so later mutation of the index cannot change answers
        self._pos_of_node = index.pos
        self._caps = list(index.cap)
        self._leaving = leaving

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
        settings = self.settings
        evidence: dict[str, Any] = {
            "now": self.now,
            "project": job.project,
            "gpus": job.gpus,
            "submitted_at": job.submitted_at,
            "priority": job.priority,
            "rank": self.rank(job.project),
        }
        q = self.qualifications.get(job.id) if job.klass != "batch" else None
        if q is not None:
            evidence["debug_quota"] = q.to_dict()
        scope, usable = self.scope(job)
        blocking = max(0, job.gpus - usable)
        special = self.specials.get(job.id)
        reason: str
        until: float | None = None
        if special is not None:
            evidence.update(special.extra)
            return Explanation(
                job.id,
                special.reason,
                special.blocking_gpus,
                special.scope,
                special.until,
                self.position(job.id),
                self.position_in_project(job),
                evidence,
            )
        path = self.path(job.project)
        largest = self._largest_possible(job)
        if job.gpus > largest:
            reason = TOO_LARGE
            blocking = job.gpus - largest
            evidence["largest_gpus"] = largest
        elif settings.funding and not path:
            reason = NO_ALLOCATION
        elif not asks_for_funding(job, settings):
            reason = UNFUNDED_BY_REQUEST
        else:
            funds = funding_path(path, settings)
            short = has_entitlement_left(funds, self.funded_in_use, self.quota) if settings.funding else None
            if short:
                reason = ENTITLEMENT_USED
                evidence["funding"] = {
                    "allocation": short,
                    "funded_gpus": self.funded_in_use.get(short, 0.0),
                    "quota_gpus": self.quota.get(short, 0.0),
                }
            elif (room := self._blocking_reservation(job)) is not None:
                reason = BLOCKED_BY_RESERVATION
                until = room.ready_at
                evidence["reserved_for"] = room.job_id
                evidence["domain"] = list(room.domain)
            else:
                until = self._earliest_for(job)
                reason = WAITING_FOR_PROTECTION if until is not None and until > self.now else OUTRANKED
                if blocking == 0:
                    blocking = job.gpus  # room exists, but not for it: it goes to work ahead of it
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
        for room in rooms:
            gang = waiting.get(room.job_id)
            if gang is None or mine <= gang:  # the gang itself, or ahead of it: may use its nodes
                continue
            if room.would_hold(job.gpus, self.capacity.maxcap) and ends > room.ready_at:
                return room
        return None

    def _largest_possible(self, job: PendingJob) -> int:
        cap = self.capacity
        if job.gpus <= cap.maxcap:
            return cap.maxcap
        d = min(job.topology_depth or 0, cap.depth)
        return cap.largest_domain_by_depth[d]

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
