"""Phase 8, backfill unfunded work on idle capacity, but not on GPUs that waiting work will need
within the restart overhead (DESIGN.md "Unfunded occupancy", "Churn is bounded"); then gather idle
GPUs scattered over several nodes for unfunded work that fits on none, by moving settled unfunded
work to idle GPUs elsewhere (consolidation, ADR 0034).
"""

from __future__ import annotations

import math

from steward.policy.churn import (
    CONSOLIDATE_RULE,
    idle_to_gather,
    lost_per_gpu_s,
    needed_soon,
    relocatable,
    relocation_fits,
)
from steward.policy.contract import grace_s
from steward.policy.explain import Special
from steward.policy.model import PendingJob, Preemption, RunningJob
from steward.policy.phases.phase7_preempt import churn_check, victim_evidence, waiting_evidence
from steward.policy.plan import CyclePlan
from steward.policy.preemption import Victim, VictimPlan
from steward.policy.reasons import PREEMPTING


def backfill_unfunded(cycle: CyclePlan) -> None:
    """DESIGN.md "Unfunded occupancy ... runs only on idle capacity, is not charged, and is
    preemptible at once. This keeps the cluster full." Reserved nodes too: no protection."""
    cycle.backfilling = True
    keep_needed_soon(cycle)
    for k, job in cycle.unfunded:
        if cycle.index.total_free == 0 and not cycle.reserved_has_room():
            break
        fit, rule = cycle.try_place(job, k, cycle.now)  # no protection: every reservation
        if fit is not None:
            cycle.place(job, fit, rule, False, cycle.path(job.project), k)
    consolidate(cycle)


def keep_needed_soon(cycle: CyclePlan) -> None:
    """churn.needed_soon: hide from the backfill the nodes where GPUs about to be freed (within the
    restart overhead), with the free ones, hold the smallest funded job still blocked."""
    s = cycle.s
    if s.claim_hold_s is None or not cycle.unfunded:
        return
    placed = {p.job_id for p in cycle.placements}
    least: float = math.inf
    for _k, job in cycle.blocked:
        if job.gpus < least and job.id not in placed and job.id not in cycle.held_rooms:
            special = cycle.specials.get(job.id)
            if special is None or special.reason != PREEMPTING:
                least = float(job.gpus)
    for _k, job in cycle.lane_blocked:
        if job.gpus < least and job.id not in placed and job.id not in cycle.specials:
            least = float(job.gpus)
    if math.isinf(least):
        return
    soon = cycle.now + s.restart_overhead_s
    index = cycle.index
    for i, rel in cycle.release_times().items():
        released = sum(g for t, g in rel if t <= soon)
        if index.ok[i] and needed_soon(index.free[i], released, least):
            index.mask(i)
            cycle.claimed.add(i)
            cycle.counters["kept_for_funded"] = cycle.counters.get("kept_for_funded", 0) + 1


class _Movable:
    """The work consolidation may move (`churn.relocatable`), by visible node, and the other visible
    nodes' idle GPUs it may move to (nodes counted by free GPUs). Built once per cycle, when a waiting
    job first needs it."""

    def __init__(self, cycle: CyclePlan) -> None:
        index, now, s = cycle.index, cycle.now, cycle.s
        ok, pos = index.ok, index.pos
        leaving = cycle.leaving
        self.on: dict[int, list[tuple[float, str, RunningJob]]] = {}
        self.gpus: dict[int, int] = {}
        for r in cycle.snap.running:
            if r.id in leaving or not relocatable(r, now, s):
                continue
            i = pos.get(r.placement[0][0])
            if i is None or not ok[i]:
                continue
            self.on.setdefault(i, []).append((lost_per_gpu_s(r, now, s) * r.gpus, r.id, r))
            self.gpus[i] = self.gpus.get(i, 0) + r.gpus
        for lst in self.on.values():
            lst.sort(key=lambda x: (x[0], x[1]))  # least lost work first
        self.by_free = [0] * (index.maxcap + 1)
        for i, f in enumerate(index.free):
            if ok[i] and 0 < f <= index.maxcap:
                self.by_free[f] += 1


def consolidate(cycle: CyclePlan) -> None:
    """DESIGN.md "Unfunded occupancy ... This keeps the cluster full" and "Churn is bounded" (ADR
    0034): a waiting one-node job that backfill could not place because no node has its GPUs free,
    while idle GPUs lie scattered, gets the node where its free GPUs plus the cheapest settled
    unfunded work on it (`churn.relocatable`) hold it, if that work can start again at once on idle
    GPUs of other nodes (`churn.relocation_fits`) and the move is worth its cost
    (`churn.worth_preempting`, as every preemption). The moved jobs are preempted as unfunded work
    (short grace) for the waiting job, whose room is then held (phase 3); they requeue with their
    submit time and the backfill starts them on the idle GPUs they were counted on. At most
    `consolidation_searches_per_cycle` waiting jobs are looked at, in order; a size that found no
    room is not looked at again this cycle. Only while enough of the cluster is idle
    (`churn.idle_to_gather`, ADR 0095): a few idle GPUs on a large cluster are its turnover."""
    s = cycle.s
    budget = s.consolidation_searches_per_cycle
    if budget == 0 or s.claim_hold_s is None or not cycle.unfunded or not cycle.snap.running:
        return
    index = cycle.index
    if not idle_to_gather(index.total_free, cycle.capacity, s) or funded_waits(cycle):
        return
    movable: _Movable | None = None
    placed: set[str] | None = None
    failed = math.inf
    for k, job in cycle.unfunded:
        g = job.gpus
        if budget == 0:
            break
        if g >= failed or g > index.maxcap or g <= index.max_free() or job.id in cycle.specials:
            continue
        if placed is None:
            placed = {p.job_id for p in cycle.placements}
        if job.id in placed:
            continue
        if movable is None:
            movable = _Movable(cycle)
        budget -= 1
        cycle.counters["consolidation_searches"] = cycle.counters.get("consolidation_searches", 0) + 1
        routed = cycle.routes.active and cycle.routes.routed(job)
        found = gather_room(cycle, movable, g, job if routed else None)
        if found is None:
            if not routed:  # a routed job's failure says nothing of other jobs (ADR 0057)
                failed = float(g)
            continue
        i, victims, counts = found
        plan = VictimPlan(((i, g),), [Victim(r, ((i, r.gpus),), lost, lost / r.gpus, (), False)
                                      for lost, _, r in victims],
                          sum(lost for lost, _, _ in victims), {}, len(movable.on))
        check = churn_check(cycle, job, plan, k)
        if not check.allowed:
            continue
        commit_consolidation(cycle, job, plan, k, check.evidence())
        movable.by_free = counts
        del movable.on[i]


def funded_waits(cycle: CyclePlan) -> bool:
    """DESIGN.md "Unfunded occupancy ... runs only on idle capacity" (ADR 0034): idle GPUs are idle
    only when no funded work waits for them. While funded or qualified lane work is blocked (and no
    room is being made for it), the scattered idle GPUs are its to take as they free, and gathering
    them for unfunded work would hand them to a job the cost rule then protects (an 8-GPU victim
    costs more than a 1-GPU job gains)."""
    placed: set[str] | None = None
    for _k, job in (*cycle.blocked, *cycle.lane_blocked):
        special = cycle.specials.get(job.id)
        if special is not None and special.reason == PREEMPTING:
            continue
        if placed is None:
            placed = {p.job_id for p in cycle.placements}
        if job.id not in placed:
            return True
    return False


def gather_room(cycle: CyclePlan, movable: _Movable, gpus: int, routed: PendingJob | None = None
                ) -> tuple[int, list[tuple[float, str, RunningJob]], list[int]] | None:
    """The node whose free GPUs plus its cheapest movable work hold `gpus`, with the work moved
    (fewest lost GPU-seconds; ties: the node first in topology order), and the idle GPUs of the
    other nodes after the move (`relocation_fits`). None when no node can be gathered. `routed`: the
    job it is gathered for when it is routed (ADR 0057), which takes only a node it accepts."""
    index = cycle.index
    free, ok = index.free, index.ok
    best: tuple[float, int] | None = None
    out: tuple[int, list[tuple[float, str, RunningJob]], list[int]] | None = None
    for i in sorted(movable.on):
        if not ok[i] or free[i] + movable.gpus[i] < gpus:
            continue
        if routed is not None and not cycle.routes.admissible(routed, i):
            continue
        need = gpus - free[i]
        chosen: list[tuple[float, str, RunningJob]] = []
        got = 0
        lost = 0.0
        for v in movable.on[i]:
            chosen.append(v)
            got += v[2].gpus
            lost += v[0]
            if got >= need:
                break
        if got < need or (best is not None and (lost, i) >= best):
            continue
        others = list(movable.by_free)
        if 0 < free[i] < len(others):
            others[free[i]] -= 1  # the gathered node itself is no destination
        counts = relocation_fits([v[2].gpus for v in chosen], others)
        if counts is None:
            continue
        best = (lost, i)
        out = (i, chosen, counts)
    return out


def commit_consolidation(cycle: CyclePlan, job: PendingJob, plan: VictimPlan, k: int,
                         churn: dict[str, object]) -> None:
    """The moves of one consolidation, as unfunded preemptions for `job` with their evidence; the
    gathered node is claimed for it (held from the next cycle by phase 3)."""
    now, s = cycle.now, cycle.s
    index = cycle.index
    i = plan.nodes[0][0]
    index.mask(i)
    cycle.claimed.add(i)
    cycle.reserved_room = cycle.reserved_shape = None
    grace = grace_s(False, s)
    node = index.ids[i]
    for v in plan.victims:
        cycle.preemptions.append(
            Preemption(
                victim_id=v.job.id,
                for_job_id=job.id,
                reason="unfunded",
                grace_ends_at=now + grace,
                lost_gpu_s=v.cost,
                evidence={
                    "rule": CONSOLIDATE_RULE,
                    "waiting": waiting_evidence(cycle, job, k) | {
                        "free_gpus_on_node": index.free[i],
                        "most_free_on_one_node": index.max_free(),
                    },
                    "victim": victim_evidence(cycle, v),  # relocatable: unfunded work only
                    "churn": churn,
                    "lane": False,
                    "trade": False,
                    "plan": {
                        "nodes": [node],
                        "victims": len(plan.victims),
                        "lost_gpu_s": plan.cost,
                        "nodes_considered": plan.considered,
                    },
                    "now": now,
                },
            )
        )
    cycle.room_for.append(job.id)
    cycle.counters["consolidations"] = cycle.counters.get("consolidations", 0) + 1
    cycle.specials[job.id] = Special(
        PREEMPTING, 0, "one node", now + grace,
        {"victims": len(plan.victims), "new_preemptions": len(plan.victims), "nodes": [node],
         "lost_gpu_s": plan.cost, "consolidation": True},
    )
