"""Reservations (DESIGN.md "Placement": "plan protection expiries so that large gangs and host
drains get whole domains"; issue 3: "a reservation for the head large gang so that protection
expiries assemble a whole domain for it (backfill only work whose protection ends before the
reservation)").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from steward.domain.policy_settings import PolicySettings
from steward.policy.contract import grace_ends_at, in_grace, is_protected
from steward.policy.model import PendingJob, RunningJob
from steward.policy.placement import CapacityIndex


def wants_reservation(job: PendingJob, settings: PolicySettings) -> bool:
    """Issue 3: only the head *large* gang (at least `reservation_min_gpus`) gets a reservation, and
    only when the policy makes reservations (the `ai2` and older baselines do not)."""
    return settings.reservations and job.gpus >= settings.reservation_min_gpus


def release_time(
    job: RunningJob,
    now: float,
    settings: PolicySettings,
    leaving: bool,
    may_preempt: Callable[[RunningJob], bool],
) -> float:
    """When a running job's GPUs can be had by the gang: a job already leaving at the end of its
    grace (now when stopped this cycle); unfunded work at once; funded work when its protection
    ends, if the gang may preempt it then (strict improvement holds now); otherwise never — its own
    end is unknown to the policy."""
    if leaving:
        return now
    if in_grace(job):
        return max(now, grace_ends_at(job, settings))
    if not job.funded:
        return now if settings.funding else math.inf
    if not (settings.fairness_preemption and settings.preemptible_after_protection):
        return math.inf
    if not may_preempt(job):
        return math.inf
    return job.protected_until if is_protected(job, now) else now


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


def plan_reservation(
    job: PendingJob,
    index: CapacityIndex,
    on_node: Sequence[list[tuple[float, int]]],
    now: float,
    maxcap: int | None = None,
) -> ReservationPlan | None:
    """The nodes that assemble room for `job` soonest, given `on_node[i]` = [(release time, GPUs)]
    of the jobs on node i. A one-node job: the node where enough GPUs free up first. A multi-node
    gang: a node is whole when its last job releases; in each domain (deepest level first) the time
    its fastest nodes add up to the gang; the soonest domain wins, then the smallest, then topology
    order. None when nothing ever frees enough. `maxcap`: the largest node the job may use (a routed job
    sees one cluster's admissible nodes, ADR 0071), the index's by default."""
    g = job.gpus
    now_free = index.free
    best: tuple[float, int, int] | None = None
    if g <= (index.maxcap if maxcap is None else maxcap):
        for i in range(len(index.ids)):
            if not index.ok[i] or index.cap[i] < g:
                continue
            acc = now_free[i]
            t = now
            for rt, gpus in sorted(on_node[i]):
                if acc >= g:
                    break
                acc += gpus
                t = rt
            if acc < g or t == math.inf:
                continue
            key = (t, 0, i)
            if best is None or key < best:
                best = key
        if best is None:
            return None
        i = best[2]
        return ReservationPlan((i,), len(index.nodes[i].path) + 1, (*index.nodes[i].path, index.ids[i]), best[0])
    clear: list[tuple[float, int]] = []
    for i in range(len(index.ids)):
        if not index.ok[i] or index.cap[i] == 0:
            continue
        t = max((rt for rt, _ in on_node[i]), default=now)
        if t != math.inf:
            clear.append((max(t, now), i))
    clear.sort()
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
