"""Preemption (DESIGN.md "The time-slicing contract").

- Never inside protection: a funded job is not preempted for fairness before `protected_until`.
- Unfunded occupancy is preemptible at once, by funded work.
- After protection, a funded job is preempted only with strict improvement: the waiting job's
  allocation is more under-served than the victim's after the move, compared at the level where
  their paths in the org tree part.
  With several clusters, on the victim's cluster: each side stands at the worse of its standing over
  the tree and on that cluster, and the waiting side is not more served over the tree (ADR 0076,
  policy/cluster_share.py; `Branches.worst`, `branches_on`).
- Victims are chosen to free the fewest GPU-seconds of lost work (time since the last checkpoint
  plus restart overhead, so a recent checkpoint is preferred), then the fewest jobs.
- With `lane_claim` (ADR 0099), a qualified debug job's search may also take funded work out of protection
  of an allocation running above its entitlement, without strict improvement (`claim_within_debug_quota`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from steward.domain.policy_settings import PolicySettings
from steward.policy.cluster_share import ClusterStanding, standing_on, tree_allows
from steward.policy.contract import grace_s, in_grace, is_protected, protection_s
from steward.policy.model import PendingJob, RunningJob
from steward.policy.ordering import Standing
from steward.policy.placement import CapacityIndex
from steward.policy.usage import entitled_horizon_s


def projected_ratio(delivered: float, running_gpus: float, entitled: float, horizon_s: float) -> float:
    """Issue 3 "strict improvement ... after the move": an allocation's delivered ÷ entitled when its
    running funded GPUs keep running for `horizon_s` more (the waiting job's protection)."""
    if entitled <= 0.0:
        return math.inf
    return (delivered + running_gpus * horizon_s) / entitled


def divergence(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """Index of the level where two tree paths part; -1 when they are the same allocation."""
    for k, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return k
    if len(a) == len(b):
        return -1
    return min(len(a), len(b))


@dataclass(frozen=True, slots=True)
class Branches:
    """What strict improvement reads, per allocation (subtree totals)."""

    delivered: Mapping[str, float]
    entitled: Mapping[str, float]
    running: Mapping[str, float]
    """Funded GPUs running in the subtree, not counting jobs already leaving."""
    also: Branches | None = None
    """A second reading that strict improvement must hold under as well (ADR 0016: the order counts
    entitlement by demand, this is DESIGN.md's in-full reading with the same running GPUs)."""
    worst: Branches | None = None
    """ADR 0076, several clusters: these figures are one cluster's and `worst` the tree's; an allocation stands
    at the worse of the two (`cluster_share.standing_on`), projected alike."""

    def readings(self) -> tuple[Branches, ...]:
        return (self,) if self.also is None else (self, self.also)


def ratio_after(b: Branches, allocation: str, gpus: float, horizon_s: float) -> float:
    """An allocation's `projected_ratio` under `b` when `gpus` more (fewer, when negative) of its funded GPUs
    run for `horizon_s`; with `b.worst` (ADR 0076) the worse of the cluster's and the tree's."""
    r = projected_ratio(b.delivered.get(allocation, 0.0), b.running.get(allocation, 0.0) + gpus,
                        b.entitled.get(allocation, 0.0), horizon_s)
    if b.worst is None:
        return r
    return standing_on(ratio_after(b.worst, allocation, gpus, horizon_s), r)


def tree_now(b: Branches, allocation: str) -> float:
    """ADR 0076: an allocation's standing over the tree now (no projection) under `b.worst`'s reading."""
    w = b.worst
    assert w is not None
    e = w.entitled.get(allocation, 0.0)
    return math.inf if e <= 0.0 else w.delivered.get(allocation, 0.0) / e


def branches_of(stand: Standing, running: Mapping[str, float]) -> Branches:
    """What strict improvement reads this cycle: the figures the order ranks by, and, when those count
    entitlement by demand (ADR 0016), DESIGN.md's in-full figures as a second reading. Demand moves
    from one cycle to the next; a preemption needs both readings to agree, so a rank that flips with
    demand cannot drive preemptions one way and then back."""
    if stand.active is None:
        return Branches(stand.ranked_delivered, stand.ranked_entitled, running)
    full = Branches(stand.delivered, stand.entitled, running)
    return Branches(stand.ranked_delivered, stand.ranked_entitled, running, also=full)


def branches_on(tree: Branches, cluster: ClusterStanding, running: Mapping[str, float]) -> Branches:
    """ADR 0076: what strict improvement reads on one cluster: the cluster's figures (`running`: funded GPUs on
    the cluster per allocation subtree), each reading of the tree's (`branches_of`) as the worse side."""
    readings = tree.readings()
    also = None
    if len(readings) > 1:
        full = readings[1]
        also = Branches(cluster.delivered, cluster.entitled, running,
                        worst=Branches(full.delivered, full.entitled, full.running))
    first = readings[0]
    return Branches(cluster.delivered, cluster.entitled, running, also=also,
                    worst=Branches(first.delivered, first.entitled, first.running))


def strictly_improves(
    waiting_path: tuple[str, ...],
    waiting_gpus: int,
    victim_path: tuple[str, ...],
    freed_from_branch: float,
    horizon_s: float,
    branches: Branches,
) -> tuple[bool, dict[str, Any]]:
    """DESIGN.md "Preemption needs strict improvement: never preempt for a waiting job whose
    allocation is not more under-served than the victim's". At the level where the two paths part,
    the waiting side after gaining `waiting_gpus` must stay strictly below the victim side after
    losing `freed_from_branch` GPUs (both projected over the waiting job's protection)."""
    if not victim_path:
        return True, {"victim_allocation": None, "rule": "victim has no allocation"}
    k = divergence(waiting_path, victim_path)
    if k < 0 or k >= len(waiting_path) or k >= len(victim_path):
        return False, {"rule": "same allocation"}
    a_w, a_v = waiting_path[k], victim_path[k]
    veto = False
    if branches.worst is not None:  # ADR 0076: on one cluster of several
        after_w = ratio_after(branches, a_w, waiting_gpus, horizon_s)
        after_v = ratio_after(branches, a_v, -freed_from_branch, horizon_s)
        veto = not tree_allows(tree_now(branches, a_w), tree_now(branches, a_v))
    else:
        after_w = projected_ratio(
            branches.delivered.get(a_w, 0.0),
            branches.running.get(a_w, 0.0) + waiting_gpus,
            branches.entitled.get(a_w, 0.0),
            horizon_s,
        )
        after_v = projected_ratio(
            branches.delivered.get(a_v, 0.0),
            branches.running.get(a_v, 0.0) - freed_from_branch,
            branches.entitled.get(a_v, 0.0),
            horizon_s,
        )
    ok = after_w < after_v and not veto
    evidence: dict[str, Any] = {
        "level": k + 1,
        "waiting_allocation": a_w,
        "victim_allocation": a_v,
        "waiting_ratio_after": None if math.isinf(after_w) else after_w,
        "victim_ratio_after": None if math.isinf(after_v) else after_v,
        "horizon_s": horizon_s,
    }
    if branches.worst is not None:  # ADR 0076: which side read the tree's standing, which the cluster's
        tree_w = ratio_after(branches.worst, a_w, waiting_gpus, horizon_s)
        tree_v = ratio_after(branches.worst, a_v, -freed_from_branch, horizon_s)
        evidence["tree"] = {"waiting_ratio_after": None if math.isinf(tree_w) else tree_w,
                            "victim_ratio_after": None if math.isinf(tree_v) else tree_v,
                            "victim_less_served": veto}
    if ok and branches.also is not None:  # the in-full reading can only veto (and costs a second pass)
        ok_full, full = strictly_improves(
            waiting_path, waiting_gpus, victim_path, freed_from_branch, horizon_s, branches.also
        )
        ok = ok and ok_full
        evidence["in_full"] = {"waiting_ratio_after": full["waiting_ratio_after"],
                               "victim_ratio_after": full["victim_ratio_after"]}
    return ok, evidence


CLAIM_RULE = "claim_within_debug_quota"


def _flat(b: Branches) -> Branches:
    return Branches(b.delivered, b.entitled, b.running)


def over_readings(branches: Branches) -> tuple[Branches, ...]:
    """ADR 0099, the figures `over_entitlement` reads: each of strict improvement's readings (`Branches.readings`);
    on one cluster of several (ADR 0076) both the cluster's and the tree's of each (above on both)."""
    out: list[Branches] = []
    for b in branches.readings():
        out.append(_flat(b) if b.worst is not None else b)
        if b.worst is not None:
            out.append(_flat(b.worst))
    return tuple(out)


def entitled_gpus(b: Branches, allocation: str, window_s: float) -> float:
    """An allocation's entitlement in GPUs under one reading: its entitled-in-window ÷ the window (`window_s`,
    `usage.entitled_horizon_s`): entitlement × capacity (on one cluster of several, its part of that cluster's)."""
    return b.entitled.get(allocation, 0.0) / window_s if window_s > 0.0 else 0.0


def over_entitlement(branches: Branches, allocation: str, freed_gpus: float, window_s: float) -> bool:
    """ADR 0099: `allocation` runs above its entitlement by at least `freed_gpus`: its funded GPUs running now
    (`Branches.running`, this cycle's placements counted) less `freed_gpus` are still at least its entitlement in
    GPUs (`entitled_gpus`), under every reading strict improvement reads (`over_readings`). A claim takes back
    only GPUs an allocation runs beyond its entitlement (as Kueue reclaims only from a queue borrowing beyond its
    nominal quota), and never leaves it below."""
    for b in over_readings(branches):
        if not b.running.get(allocation, 0.0) - freed_gpus >= entitled_gpus(b, allocation, window_s):
            return False
    return True


def claim_within_debug_quota(
    waiting_path: tuple[str, ...],
    victim_path: tuple[str, ...],
    freed_from_branch: float,
    branches: Branches,
    window_s: float,
) -> tuple[bool, dict[str, Any]]:
    """DESIGN.md "Debug quota and the time-to-first-GPU SLO": the quota's GPUs "may run debug jobs and sessions
    ahead of the fair-share order". ADR 0099 reads them as a claim (as Kueue reclaims within nominal quota): a
    qualified job may take funded work out of protection (the caller's candidates are never protected: DESIGN.md
    "nothing preempts it for fairness during that time" stands) of an allocation that runs above its entitlement
    (`over_entitlement`: at the level where the two paths part, by at least the `freed_from_branch` GPUs the plan
    takes from it), without strict improvement on the waiting side. Never its own allocation (that is a trade,
    ADR 0021), never one at or below its entitlement (strict improvement still may take that one)."""
    if not victim_path:
        return True, {"rule": CLAIM_RULE, "victim_allocation": None}
    k = divergence(waiting_path, victim_path)
    if k < 0 or k >= len(waiting_path) or k >= len(victim_path):
        return False, {"rule": CLAIM_RULE, "victim_allocation": None, "above_entitlement": False,
                       "why": "same allocation"}
    a_v = victim_path[k]
    ok = over_entitlement(branches, a_v, freed_from_branch, window_s)
    readings = [{"running_gpus": b.running.get(a_v, 0.0), "entitled_gpus": entitled_gpus(b, a_v, window_s),
                 "freed_gpus": freed_from_branch} for b in over_readings(branches)]
    return ok, {"rule": CLAIM_RULE, "level": k + 1, "victim_allocation": a_v, "above_entitlement": ok,
                "readings": readings}


@dataclass(slots=True)
class Victim:
    """A running job that could give up its GPUs this cycle."""

    job: RunningJob
    nodes: tuple[tuple[int, int], ...]
    cost: float
    """Lost work in GPU-seconds (0 when it is already leaving)."""
    per_gpu: float
    path: tuple[str, ...]
    leaving: bool
    taken: bool = False

    def on(self, i: int) -> int:
        nodes = self.nodes
        if len(nodes) == 1:
            return nodes[0][1]
        return sum(g for n, g in nodes if n == i)


def cheap_victim(v: Victim, cheap_s: float | None) -> bool:
    """ADR 0016: a funded victim that loses at most `cheap_s` seconds of work per GPU (a recent
    checkpoint) may be taken when the order's ranked reading alone shows strict improvement; a
    costlier one needs DESIGN.md's in-full reading to agree as well. Lent entitlement is then taken
    back mostly where it costs little."""
    return cheap_s is not None and v.per_gpu <= cheap_s


@dataclass(frozen=True, slots=True)
class Trade:
    """ADR 0021: a lane job trading its own allocation's work: whose work (`project`), whether
    funded work out of protection may go too, and the most work per GPU a victim may lose."""

    project: str
    funded: bool = False
    max_lost_s: float | None = None
    own_only: bool = True
    """False: other allocations' work is a candidate too, under the usual rules (cheapest first)."""
    now: float = 0.0
    grace_funded_s: float = 0.0
    grace_unfunded_s: float = 0.0
    checkpoint_interval_s: float = 0.0
    restart_s: float = 0.0


def work_lost_by_stop_s(lost_now_s: float, grace_s: float, resumable: bool, interval_s: float) -> float:
    """ADR 0021: the work per GPU a victim that would lose `lost_now_s` if stopped now loses when it
    stops at the end of its grace instead: a resumable job whose next periodic checkpoint (every
    `interval_s`) falls inside the grace keeps it and loses only what it does after it."""
    at_stop = (lost_now_s if lost_now_s > 0.0 else 0.0) + grace_s
    if resumable and at_stop >= interval_s > 0.0:
        at_stop -= interval_s * (at_stop // interval_s)
    return at_stop


def lost_at_stop_s(job: RunningJob, trade: Trade) -> float:
    """ADR 0021: the work per GPU a victim loses at the end of its grace (`work_lost_by_stop_s`), plus
    the restart."""
    since = job.started_at
    ckpt = job.last_checkpoint_at
    if job.resumable and ckpt is not None and ckpt > since:
        since = ckpt
    grace = trade.grace_funded_s if job.funded else trade.grace_unfunded_s
    return work_lost_by_stop_s(trade.now - since, grace, job.resumable, trade.checkpoint_interval_s) + trade.restart_s


def trade_victim(v: Victim, for_job: str, trade: Trade) -> bool:
    """ADR 0021 (DESIGN.md "priority only orders jobs inside one project"): a lane job may take its
    own allocation's work, which takes nothing from anyone else. Unfunded work ("preemptible at
    once"), or, with `trade.funded`, funded work out of its protection (the candidates are never
    protected); no job already leaving for another waiting job (its GPUs are that job's,
    `RunningJob.claimed_for`); at most `trade.max_lost_s` of work per GPU lost at its stop."""
    job = v.job
    if job.project != trade.project:
        return False
    if v.leaving:
        return job.claimed_for is None or job.claimed_for == for_job
    if job.funded and not trade.funded:
        return False
    return trade.max_lost_s is None or lost_at_stop_s(job, trade) <= trade.max_lost_s


def victim_key(v: Victim) -> tuple[float, float, str]:
    """DESIGN.md "choose victims to free the fewest GPU-hours of lost work, preferring jobs with a
    recent checkpoint": cheapest lost work per GPU first, then the most recent checkpoint, then id."""
    ckpt = v.job.last_checkpoint_at
    return (v.per_gpu, -(ckpt if ckpt is not None else -math.inf), v.job.id)


def is_candidate(job: RunningJob, now: float, settings: PolicySettings) -> bool:
    """Can this job be a victim at all (before strict improvement)? Never inside protection; unfunded
    at once; funded after protection only when the policy preempts for fairness."""
    if in_grace(job):
        return True
    if is_protected(job, now):
        return False
    if not job.funded:
        return settings.funding
    return settings.fairness_preemption and settings.preemptible_after_protection


@dataclass(slots=True)
class VictimPlan:
    """Victims (new and already leaving) and the nodes the waiting job will take once they stop."""

    nodes: tuple[tuple[int, int], ...]
    victims: list[Victim]
    cost: float
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    considered: int = 0
    """Nodes whose victims were examined (the candidates of the search)."""
    claim: bool = False
    """Made by a claim within a debug quota (ADR 0099): its funded victims get `lane_claim_grace_s`."""


class _Attempt:
    """Strict improvement for one waiting job, with the per-level figures of its side computed once
    and each victim allocation's comparison memoised (the same rule as `strictly_improves`)."""

    __slots__ = ("branches", "cheap_s", "claim", "div", "gpus", "horizon", "job", "level", "path", "readings",
                 "w_after", "window")

    def __init__(
        self, job: PendingJob, path: tuple[str, ...], horizon: float, branches: Branches, cheap_s: float | None = None,
        claim: bool = False, window_s: float = 0.0,
    ) -> None:
        """`claim` (ADR 0099): a victim allocation running above its entitlement is eligible without strict
        improvement (`claim_within_debug_quota`; `window_s`: the usage window entitled-in-window is counted over)."""
        self.job = job
        self.claim = claim
        self.window = window_s
        self.cheap_s = cheap_s
        self.path = path
        self.gpus = job.gpus
        self.horizon = horizon
        self.branches = branches
        self.readings = branches.readings()
        g = job.gpus
        self.w_after = [
            [projected_ratio(b.delivered.get(a, 0.0), b.running.get(a, 0.0) + g, b.entitled.get(a, 0.0), horizon)
             for a in path] if b.worst is None else [ratio_after(b, a, g, horizon) for a in path]
            for b in self.readings
        ]
        self.div: dict[str, str | None] = {}
        self.level: dict[str, int] = {}

    def branch(self, v: Victim) -> str | None:
        """The victim-side allocation where the paths part, when the waiting side is strictly more
        under-served there under the ranked reading even with nothing freed yet (None: never
        eligible; "": the victim has no allocation). `eligible` asks the in-full reading per victim."""
        return self.branch_of(v.job.project, v.path)

    def branch_of(self, project: str, vpath: tuple[str, ...]) -> str | None:
        if project in self.div:
            return self.div[project]
        out: str | None = None
        if not vpath:
            out = ""
        else:
            k = divergence(self.path, vpath)
            if 0 <= k < len(self.path) and k < len(vpath):
                a_v = vpath[k]
                if self._holds(0, k, a_v, 0.0) or (self.claim and self._over(a_v, 0.0)):
                    out = a_v
                self.level[a_v] = k
        self.div[project] = out
        return out

    def _holds(self, reading: int, k: int, a_v: str, freed: float) -> bool:
        """`strictly_improves` at level k against the victim-side allocation `a_v`, under one reading
        (0: the one the order ranks by; 1: ADR 0016's in-full reading, when there is one)."""
        b = self.readings[reading]
        if b.worst is not None:  # ADR 0076
            return (self.w_after[reading][k] < ratio_after(b, a_v, -freed, self.horizon)
                    and tree_allows(tree_now(b, self.path[k]), tree_now(b, a_v)))
        v_after = projected_ratio(
            b.delivered.get(a_v, 0.0), b.running.get(a_v, 0.0) - freed, b.entitled.get(a_v, 0.0), self.horizon
        )
        return self.w_after[reading][k] < v_after

    def _over(self, a_v: str, freed: float) -> bool:
        """ADR 0099, `claim_within_debug_quota`'s test: `a_v` runs above its entitlement by at least `freed`."""
        return over_entitlement(self.branches, a_v, freed, self.window)

    def eligible(self, v: Victim, freed: dict[str, float]) -> bool:
        """Rules in order: already leaving → free; unfunded → preemptible at once by funded work;
        funded → strict improvement with every GPU this plan takes from the same branch. Records
        the GPUs taken in `freed` when eligible."""
        if v.taken:
            return False
        if v.leaving or not v.job.funded:
            return True
        a_v = self.branch(v)
        if a_v is None:
            return False
        if a_v == "":
            return True
        total = freed.get(a_v, 0.0) + v.job.gpus
        k = self.level[a_v]
        if not self._strict(v, k, a_v, total) and not (self.claim and self._over(a_v, total)):
            return False
        freed[a_v] = total
        return True

    def _strict(self, v: Victim, k: int, a_v: str, total: float) -> bool:
        """Strict improvement against `a_v` with `total` GPUs freed from it (the in-full reading too, unless the
        victim is cheap: ADR 0016)."""
        if not self._holds(0, k, a_v, total):
            return False
        return len(self.readings) == 1 or cheap_victim(v, self.cheap_s) or self._holds(1, k, a_v, total)

    def evidence(self, v: Victim, freed: float) -> dict[str, Any]:
        ok, ev = strictly_improves(self.path, self.gpus, v.path, freed, self.horizon, self.branches)
        if self.claim:  # ADR 0099: the claim's figures, whether or not strict improvement held as well
            _c, claim = claim_within_debug_quota(self.path, v.path, freed, self.branches, self.window)
            ev = {**ev, "strict_improvement": ok, "claim": claim}
        return ev


_Raw = tuple[float, float, str, float, bool, RunningJob, tuple[tuple[int, int], ...]]
"""(lost work per GPU, -last checkpoint, id, lost GPU-seconds, leaving, job, node placement): sorts
as `victim_key` does."""


class VictimSearch:
    """Candidate victims indexed by node, built once per cycle when some funded job is blocked.

    Only figures are computed for every running job; `Victim` objects are built per node when a
    search first visits it (one object per job, shared by its nodes, so `taken` is seen everywhere).
    """

    def __init__(
        self,
        index: CapacityIndex,
        running: Sequence[RunningJob],
        leaving: set[str],
        path_of: Callable[[str], tuple[str, ...]],
        branches: Branches,
        now: float,
        settings: PolicySettings,
        held_for: set[str] | None = None,
    ) -> None:
        """`held_for`: waiting jobs whose room is held this cycle (churn.holds_claimed_room): the jobs
        leaving for them are nobody else's victims."""
        self.index = index
        self.branches = branches
        self.settings = settings
        self.now = now
        self.path_of = path_of
        n = len(index.ids)
        self.raw: list[list[_Raw]] = [[] for _ in range(n)]
        self.held: list[int] = [0] * n  # GPUs held by jobs that can never be victims this cycle
        self._cands: list[list[Victim] | None] = [None] * n
        self._shared: dict[str, Victim] = {}
        pos = index.pos
        restart = settings.restart_overhead_s
        funding = settings.funding
        fairness = settings.fairness_preemption and settings.preemptible_after_protection
        raw, held = self.raw, self.held
        inf = math.inf
        at_stop = settings.victim_cost_at_stop
        grace_funded, grace_unfunded = grace_s(True, settings), grace_s(False, settings)
        interval = settings.checkpoint_interval_s
        settle = settings.settle_s
        self.settle = settle
        for job in running:
            placement = job.placement
            if len(placement) == 1:
                i = pos.get(placement[0][0], -1)
                nodes: tuple[tuple[int, int], ...] = ((i, placement[0][1]),) if i >= 0 else ()
            else:
                nodes = tuple((pos[nid], g) for nid, g in placement if nid in pos)
            going = job.preemption_requested_at is not None or job.id in leaving
            if going and held_for and job.claimed_for in held_for:
                for i, g in nodes:
                    held[i] += g
                continue
            if going:
                cost = 0.0
            else:
                # is_candidate(), inlined: never inside protection; unfunded at once; funded only
                # when the policy preempts for fairness.
                # churn.settled, inlined for unfunded work: not again before its settle time
                candidate = (fairness and now >= job.protected_until) if job.funded else (
                    funding and (settle is None or now - job.started_at >= settle))
                if not candidate:
                    for i, g in nodes:
                        held[i] += g
                    continue
                # lost_gpu_s(), inlined
                since = job.started_at
                ckpt = job.last_checkpoint_at
                if job.resumable and ckpt is not None and ckpt > since:
                    since = ckpt
                lost = now - since
                if at_stop:  # ADR 0021: the work lost at the end of the grace
                    lost = work_lost_by_stop_s(lost, grace_funded if job.funded else grace_unfunded,
                                               job.resumable, interval)
                cost = job.gpus * ((lost if lost > 0.0 else 0.0) + restart)
            ckpt = job.last_checkpoint_at
            item: _Raw = (cost / job.gpus, -ckpt if ckpt is not None else inf, job.id, cost, going, job, nodes)
            for i, _g in nodes:
                raw[i].append(item)
        for lst in raw:
            if len(lst) > 1:
                lst.sort()
        self.node_order = sorted((i for i in range(n) if raw[i]), key=lambda i: (raw[i][0][0], i))
        self.touched: list[bool] = [False] * n
        self._gangs: tuple[list[int], list[float], list[frozenset[str]], dict[str, tuple[str, ...]]] | None = None
        self._funded: set[str] | None = None

    def cands(self, i: int) -> list[Victim]:
        """Victims on node `i`, cheapest lost work per GPU first (`victim_key` order)."""
        got = self._cands[i]
        if got is None:
            got = []
            shared = self._shared
            for per_gpu, _ck, job_id, cost, going, job, nodes in self.raw[i]:
                v = shared.get(job_id)
                if v is None:
                    v = Victim(job, nodes, cost, per_gpu, self.path_of(job.project), going)
                    if len(nodes) > 1:
                        shared[job_id] = v
                got.append(v)
            self._cands[i] = got
        return got

    def _prepare_gangs(self) -> tuple[list[int], list[float], list[frozenset[str]], dict[str, tuple[str, ...]]]:
        """For multi-node gangs, built at the first gang: the nodes that could be emptied (no job on
        them is out of reach, and emptying them frees the whole node), their lost work, and the
        funded allocations whose consent (strict improvement) emptying them needs."""
        if self._gangs is not None:
            return self._gangs
        index = self.index
        n = len(self.raw)
        cost = [0.0] * n
        projects: list[frozenset[str]] = [frozenset()] * n
        paths: dict[str, tuple[str, ...]] = {}
        clearable = []
        free, cap = index.free, index.cap
        for i in range(n):
            if self.held[i] or cap[i] == 0:
                continue
            items = self.raw[i]
            gain = 0
            for item in items:
                nodes = item[6]
                gain += nodes[0][1] if len(nodes) == 1 else sum(g for k, g in nodes if k == i)
            if free[i] + gain < cap[i]:
                continue
            cost[i] = sum(item[3] for item in items)
            funded = set()
            for item in items:
                job = item[5]
                if job.funded and not item[4]:
                    funded.add(job.project)
                    if job.project not in paths:
                        paths[job.project] = self.path_of(job.project)
            projects[i] = frozenset(funded)
            clearable.append(i)
        self._gangs = (clearable, cost, projects, paths)
        return self._gangs

    def search(
        self,
        job: PendingJob,
        wpath: tuple[str, ...],
        allowed: set[int] | None = None,
        unfunded_only: bool = False,
        max_victim_gpus: int | None = None,
        trade: Trade | None = None,
        settle: bool = False,
        claim: bool = False,
    ) -> VictimPlan | None:
        """The cheapest plan for `job`, or None. `allowed` adds masked nodes the job may use (its
        reservation). `unfunded_only`: take only unfunded work and jobs already leaving;
        `max_victim_gpus`: take no job (not already leaving) larger than that (the debug lane, ADR
        0007: a 1-GPU debug job does not stop an 8-GPU job whose other GPUs nothing waiting can use);
        `trade`: take only the job's own allocation's work (ADR 0021, `trade_victim`); `settle`: a
        lane search, which takes no job that has not run its settle time (churn.settled; unfunded
        work never is a candidate before it); `claim`: a qualified lane job's claim within its debug quota
        (ADR 0099, `claim_within_debug_quota`)."""
        horizon = protection_s(job.klass, job.min_runtime_s, self.settings)
        attempt = _Attempt(job, wpath, horizon, self.branches, self.settings.cheap_victim_s, claim,
                           entitled_horizon_s(self.settings))
        if unfunded_only:
            attempt.div.update(dict.fromkeys(self._funded_projects(), None))
        young = self.now - self.settle if settle and self.settle is not None else math.inf
        if trade is not None:
            plan = self._search_single(attempt, allowed or set(), max_victim_gpus, trade, young)
        elif job.gpus <= self.index.maxcap:
            plan = self._search_single(attempt, allowed or set(), max_victim_gpus, None, young)
        else:
            plan = self._search_gang(attempt, allowed or set())
        if plan is not None:
            plan.claim = claim
            freed: dict[str, float] = {}
            for v in plan.victims:
                if v.job.funded and not v.leaving and (trade is None or v.job.project != trade.project):
                    a_v = attempt.branch(v) or ""
                    freed[a_v] = freed.get(a_v, 0.0) + v.job.gpus
                    plan.checks[v.job.id] = attempt.evidence(v, freed[a_v])
        return plan

    def _funded_projects(self) -> set[str]:
        """Projects with funded work among the candidates (marked ineligible for an unfunded-only
        search: `_Attempt.div[p] = None` means "never eligible")."""
        got = self._funded
        if got is None:
            got = {item[5].project for lst in self.raw for item in lst if item[5].funded}
            self._funded = got
        return got

    def _visible(self, i: int, allowed: set[int]) -> bool:
        return self.index.ok[i] or i in allowed

    def _search_single(
        self, attempt: _Attempt, allowed: set[int], max_victim_gpus: int | None = None, trade: Trade | None = None,
        young: float = math.inf,
    ) -> VictimPlan | None:
        """One-node job: on each node, take eligible victims cheapest-first until the job fits; keep
        the plan with the least lost work, then fewest jobs, then topology order. Nodes are visited by
        their cheapest victim, and the scan stops once no node can beat the best plan (lost work of
        the missing GPUs at that node's cheapest rate already costs more)."""
        g = attempt.gpus
        index = self.index
        free, ok, cap, held = index.free, index.ok, index.cap, self.held
        min_need = max(1, g - index.max_free())
        best: VictimPlan | None = None
        best_key: tuple[float, int, int] | None = None
        considered = 0
        div = attempt.div
        raw = self.raw
        limit = max_victim_gpus if max_victim_gpus is not None else 1 << 30
        for i in self.node_order:
            if best_key is not None and min_need * raw[i][0][0] > best_key[0]:
                break
            if not (ok[i] or i in allowed) or cap[i] - held[i] < g:
                continue
            acc = free[i]
            if acc >= g:
                continue  # fits already: a claimed node
            if best_key is not None:
                bound = (g - acc) * raw[i][0][0]  # no plan here can lose less work than this
                if bound > best_key[0] or (bound == best_key[0] and best_key[1] == 1 and i > best_key[2]):
                    continue
            considered += 1
            cands = self.cands(i)
            chosen: list[Victim] = []
            cost = 0.0
            freed: dict[str, float] = {}
            for v in cands:
                if v.taken or (v.job.gpus > limit and not v.leaving) or (v.job.started_at > young and not v.leaving):
                    continue  # (`young`: started after it, it has not run its settle time)
                if trade is not None and v.job.project == trade.project:
                    if not trade_victim(v, attempt.job.id, trade):
                        continue
                elif trade is not None and trade.own_only:
                    continue
                # fast path of attempt.eligible(): leaving and unfunded victims, and allocations
                # already known not to qualify
                elif v.leaving or not v.job.funded:
                    pass
                elif div.get(v.job.project, "") is None or not attempt.eligible(v, freed):
                    continue
                chosen.append(v)
                cost += v.cost
                acc += v.on(i)
                if acc >= g or (best_key is not None and cost > best_key[0]):
                    break
            if acc < g:
                continue
            key = (cost, len(chosen), i)
            if best_key is None or key < best_key:
                best_key = key
                best = VictimPlan(((i, g),), chosen, cost)
        if best is not None:
            best.considered = considered
        return best

    def _search_gang(self, attempt: _Attempt, allowed: set[int]) -> VictimPlan | None:
        """Multi-node gang: whole nodes. A node can be cleared when every job on it is an eligible
        victim; its cost is their lost work. DESIGN.md "place into the smallest topology domain that
        fits": the deepest level with a domain that can be cleared wins, and at that level the domain
        whose cheapest nodes lose the least work (then topology order)."""
        g = attempt.gpus
        index = self.index
        ok, cap = index.ok, index.cap
        clearable, node_cost, node_projects, paths = self._prepare_gangs()
        touched = self.touched
        bad = {p for p, path in paths.items() if attempt.branch_of(p, path) is None}
        clear: dict[int, float] = {}
        for i in clearable:
            if touched[i] or not (ok[i] or i in allowed):
                continue
            if not bad or bad.isdisjoint(node_projects[i]):
                clear[i] = node_cost[i]
        if sum(cap[i] for i in clear) < g:
            return None
        min_depth = min(attempt.job.topology_depth or 0, index.depth)
        best: tuple[float, int] | None = None
        best_nodes: list[int] = []
        for d in range(index.depth, min_depth - 1, -1):
            if best is not None:
                break
            of = index.dom_of[d]
            by_dom: dict[int, list[tuple[float, int]]] = {}
            for i, c in clear.items():
                if of[i] >= 0:
                    by_dom.setdefault(of[i], []).append((c, i))
            for dom in sorted(by_dom):
                nodes = by_dom[dom]
                if sum(cap[i] for _c, i in nodes) < g:
                    continue
                nodes.sort()
                total, picked, cost = 0, [], 0.0
                for c, i in nodes:
                    picked.append(i)
                    cost += c
                    total += cap[i]
                    if total >= g:
                        break
                key = (cost, dom)
                if best is None or key < best:
                    best, best_nodes = key, picked
        if best is None:
            return None
        seen: set[str] = set()
        victims = []
        freed: dict[str, float] = {}
        for i in best_nodes:
            for v in self.cands(i):
                if v.job.id in seen:
                    continue
                seen.add(v.job.id)
                if not attempt.eligible(v, freed):
                    return None  # the branch would no longer be strictly more served
                victims.append(v)
        left = g
        assignment = []
        for i in best_nodes:
            take = min(cap[i], left)
            assignment.append((i, take))
            left -= take
        return VictimPlan(tuple(assignment), victims, sum(v.cost for v in victims), considered=len(clear))

    def take(self, plan: VictimPlan) -> None:
        for v in plan.victims:
            v.taken = True
            for i, _g in v.nodes:
                self.touched[i] = True
