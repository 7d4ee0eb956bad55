"""Phase 7, preempt with strict improvement for funded work still blocked, choosing victims by least
lost work, only where the beneficiary's gain outweighs the preemption's cost (DESIGN.md "The
time-slicing contract", "Churn is bounded"; ADR 0028); blocked qualified lane jobs first, from
unfunded work.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from steward.policy.churn import (
    ChurnCheck,
    soonest_release,
    victim_cost_gpu_s,
    worth_preempting,
)
from steward.policy.contract import (
    grace_ends_at,
    grace_s,
    lane_funds,
    victim_grace_s,
)
from steward.policy.explain import Special
from steward.policy.model import (
    PendingJob,
    Preemption,
    PreemptionReason,
)
from steward.policy.plan import CyclePlan
from steward.policy.preemption import CLAIM_RULE, Trade, Victim, VictimPlan, VictimSearch
from steward.policy.reasons import PREEMPTING, PREEMPTION_COSTS_MORE, RESERVED
from steward.policy.routing import hidden_except


def blocked_funded(cycle: CyclePlan) -> Iterator[tuple[int, PendingJob]]:
    """Blocked funded jobs in order: those phase 6 tried, then the rest of the queue."""
    yield from cycle.blocked
    jobs = cycle.order.jobs
    lane_seen = cycle.lane_seen
    suffix_min = cycle.suffix_min
    paths = cycle.paths
    for k in range(cycle.tail_start, len(jobs)):
        if suffix_min[k] >= cycle.fail_search:
            return
        job = jobs[k]
        if lane_seen and job.id in lane_seen:
            continue
        path = paths.get(job.project)
        if cycle.funding_gap(job, cycle.path(job.project) if path is None else path) is None:
            yield k, job


def routed(cycle: CyclePlan, job: PendingJob) -> bool:
    return cycle.routes.active and cycle.routes.routed(job)


def search_for(cycle: CyclePlan, search: VictimSearch, job: PendingJob, path: tuple[str, ...],
               allowed: set[int] | None, *args: Any) -> VictimPlan | None:
    """`search.search(job, path, allowed, *args)`; for a routed job (ADR 0057), cluster by cluster with every
    node it may not use hidden, so its victims free GPUs it can use, all in one cluster; of the clusters with a
    plan, the cheapest (`cheapest_cluster`, ADR 0071), the clusters compared kept for the evidence."""
    if not routed(cycle, job):
        return search.search(job, path, allowed, *args)
    plans: list[tuple[str, VictimPlan | None]] = []
    for cluster, nodes in cycle.routes.candidates(job):
        mine = None if allowed is None else allowed.intersection(nodes)  # a reservation is on one cluster
        search.branches = cycle.branches_for(cluster)  # ADR 0076: strict improvement on that cluster
        try:
            with hidden_except(cycle.index, nodes):
                plans.append((cluster, search.search(job, path, mine, *args)))
        finally:
            search.branches = cycle.branches
    chosen = cheapest_cluster(plans)
    if chosen is None:
        return None
    cluster, plan = chosen
    if len(plans) > 1:
        cycle.route_victims[job.id] = {
            "cluster": cluster,
            "compared": [{"cluster": c, "lost_gpu_s": None if p is None else p.cost,
                          "victims": None if p is None else len(p.victims)} for c, p in plans],
        }
    return plan


def cheapest_cluster(plans: list[tuple[str, VictimPlan | None]]) -> tuple[str, VictimPlan] | None:
    """ADR 0071: where a routed job's room is made, among the clusters with a plan (`plans` by name): the least
    lost work (the cost the search minimises inside one cluster), then the fewest victims, then the name."""
    best: tuple[str, VictimPlan] | None = None
    for cluster, plan in plans:
        if plan is not None and (best is None or (plan.cost, len(plan.victims)) < (best[1].cost, len(best[1].victims))):
            best = (cluster, plan)
    return best


def preempt(cycle: CyclePlan) -> None:
    """For blocked funded work, in order, up to `preemption_attempts_per_cycle` searches."""
    s = cycle.s
    cycle.fail_search = math.inf
    if not cycle.snap.running:
        return
    search: VictimSearch | None = lane_preempt(cycle)
    if s.preemption_attempts_per_cycle == 0:
        return
    attempts = 0
    gang_searches = 0
    for k, job in blocked_funded(cycle):
        if attempts >= s.preemption_attempts_per_cycle:
            break
        special = cycle.specials.get(job.id)
        if job.gpus >= cycle.fail_search or (special is not None and special.reason != RESERVED):
            continue
        path = cycle.path(job.project)
        if cycle.funding_gap(job, path) is not None:
            continue
        gang = job.gpus > cycle.index.maxcap
        if gang and gang_searches >= s.gang_preemption_searches_per_cycle:
            continue
        if search is None:
            search = VictimSearch(
                cycle.index, cycle.snap.running, cycle.leaving, cycle.path, cycle.branches, cycle.now, s,
                cycle.held_rooms,
            )
        gang_searches += gang
        r = cycle.res_by_job.get(job.id)
        allowed = set(cycle.res_nodes[r]) if r is not None else None
        plan = search_for(cycle, search, job, path, allowed)
        attempts += 1
        if plan is None:
            if not routed(cycle, job):  # a routed job's failure says nothing of other jobs (ADR 0057)
                cycle.fail_search = min(cycle.fail_search, job.gpus)
            continue
        check = churn_check(cycle, job, plan, k)
        if not check.allowed:
            continue
        search.take(plan)
        commit_preemption(cycle, job, path, plan, k, check=check)
    cycle.counters["preemption_searches"] = attempts


def lane_preempt(cycle: CyclePlan) -> VictimSearch | None:
    """ADR 0007, 0029: a blocked qualified lane job that would be funded takes the GPUs of
    unfunded work first (preemptible at once, short grace), else of funded work out of
    protection under strict improvement (with `lane_claim`, ADR 0099: or of an allocation running above its
    entitlement, a claim within its debug quota), else (`lane_trade`) its own allocation's work. Every
    job in `lane_blocked` is inside its quota, the GPUs being freed for it counted (they are
    its own, "ahead" of the jobs behind it)."""
    if not cycle.lane_blocked:
        return None
    s = cycle.s
    search = VictimSearch(cycle.index, cycle.snap.running, cycle.leaving, cycle.path, cycle.branches, cycle.now, s,
                          cycle.held_rooms)
    searches = 0
    failed = math.inf  # as in `preempt`: a size that found no victims is not searched again
    small = s.lane_victim_max_gpus  # ADR 0007: no big victim for a small job
    no_trade: dict[str, float] = {}  # per project: the smallest size a trade found no victims for
    for k, job in cycle.lane_blocked:
        path = cycle.path(job.project)
        if not lane_funds(cycle.funding_gap(job, path)):
            continue  # DESIGN.md: only funded work preempts, in the lane too
        plan = None
        traded = False
        if s.lane_trade and s.lane_cheapest:
            # ADR 0021: one search, cheapest lost work first, the allocation's own work included
            if job.gpus < failed:
                searches += 1
                trade = trade_of(cycle, job, False)
                plan = search_for(cycle, search, job, path, None, False, small, trade, True, s.lane_claim)
                if plan is None:
                    if not routed(cycle, job):
                        failed = float(job.gpus)
                else:
                    traded = any(v.job.project == job.project and not v.leaving for v in plan.victims)
        else:
            if job.gpus < failed:
                searches += 1
                plan = (search_for(cycle, search, job, path, None, True, small, None, True)
                        or search_for(cycle, search, job, path, None, False, small, None, True, s.lane_claim))
                if plan is None and not routed(cycle, job):
                    failed = float(job.gpus)
            traded = plan is None
            if traded:
                plan = trade_plan(cycle, search, job, path, no_trade)
        if plan is None:
            continue
        check = churn_check(cycle, job, plan, k)
        if not check.allowed:
            continue
        search.take(plan)
        commit_preemption(cycle, job, path, plan, k, lane=True, trade=traded, check=check)
    cycle.counters["lane_searches"] = searches
    return search


def trade_of(cycle: CyclePlan, job: PendingJob, own_only: bool) -> Trade:
    s = cycle.s
    return Trade(job.project, s.lane_trade_funded, s.lane_trade_max_lost_s, own_only, cycle.now,
                 grace_s(True, s), grace_s(False, s), s.checkpoint_interval_s, s.restart_overhead_s)


def trade_plan(
    cycle: CyclePlan, search: VictimSearch, job: PendingJob, path: tuple[str, ...], no_trade: dict[str, float]
) -> VictimPlan | None:
    """ADR 0021, 0029: a qualified lane job that found no victim under ADR 0007's rules takes its
    own allocation's work (`preemption.trade_victim`), which takes nothing from anyone else; the
    GPUs freed are held for it (phase3_rooms)."""
    s = cycle.s
    if not s.lane_trade or job.gpus >= no_trade.get(job.project, math.inf):
        return None
    trade = trade_of(cycle, job, True)
    plan = search_for(cycle, search, job, path, None, False, s.lane_victim_max_gpus, trade, True)
    if plan is None and not routed(cycle, job):
        no_trade[job.project] = float(job.gpus)
    cycle.counters["lane_trades"] = cycle.counters.get("lane_trades", 0) + 1
    return plan


def churn_check(cycle: CyclePlan, job: PendingJob, plan: VictimPlan, k: int) -> ChurnCheck:
    """churn.worth_preempting for one plan: its victims' cost against the beneficiary's earlier
    start. A refusal is kept for the cycle's evidence and the job's "why pending"."""
    now, s = cycle.now, cycle.s
    start_by = now
    cost = 0.0
    for v in plan.victims:
        rq = v.job.preemption_requested_at
        if v.leaving:
            end = now if rq is None else grace_ends_at(v.job, s)
        else:
            grace = victim_grace_s(v.job.funded, claim_victim(plan, job, v), s)
            end = now + grace
            cost += victim_cost_gpu_s(v.job, now, s, grace)
        if end > start_by:
            start_by = end
    if s.preemption_gain_horizon_s is None or job.gpus > cycle.index.maxcap:
        without = math.inf
    elif routed(cycle, job):  # ADR 0057: only where it may run; another cluster's or model's free GPUs are none
        with hidden_except(cycle.index, [i for _, nodes in cycle.routes.candidates(job) for i in nodes]):
            without = soonest_release_now(cycle, job)
    else:
        without = soonest_release_now(cycle, job)
    check = worth_preempting(job.gpus, now, start_by, without, cost, s)
    if not check.allowed:
        ev = check.evidence()
        ev.update({"job_id": job.id, "position": k + 1, "victims": [v.job.id for v in plan.victims]})
        cycle.churn_refused.append(ev)
        if job.id not in cycle.specials:
            cycle.specials[job.id] = Special(PREEMPTION_COSTS_MORE, job.gpus, "one node", None, {"churn": ev})
    return check


def claim_victim(plan: VictimPlan, job: PendingJob, v: Victim) -> bool:
    """ADR 0099: a funded victim of another allocation in a plan made by a claim within a debug quota (its own
    allocation's work in such a plan is a trade, ADR 0021)."""
    return plan.claim and v.job.funded and not v.leaving and v.job.project != job.project


def soonest_release_now(cycle: CyclePlan, job: PendingJob) -> float:
    """When `job` would start without a new preemption (`churn.soonest_release`) over the nodes visible now."""
    index = cycle.index
    return soonest_release(job.gpus, index.free, index.ok, cycle.release_times(), cycle.now, index.max_free())


def waiting_evidence(cycle: CyclePlan, job: PendingJob, k: int) -> dict[str, object]:
    """The beneficiary as a preemption's evidence names it (DESIGN "Evidence"): the job, its place in the
    order (`k`, from 0) and its project's rank."""
    return {"job_id": job.id, "project": job.project, "gpus": job.gpus, "position": k + 1,
            "rank": cycle.rank_of(job)}


def victim_evidence(cycle: CyclePlan, v: Victim) -> dict[str, object]:
    """The victim as a preemption's evidence names it: its funding, protection, last checkpoint, the work it
    loses and its project's rank."""
    return {"job_id": v.job.id, "project": v.job.project, "funded": v.job.funded, "started_at": v.job.started_at,
            "protected_until": v.job.protected_until, "protected": False,
            "last_checkpoint_at": v.job.last_checkpoint_at, "lost_gpu_s": v.cost, "rank": cycle.rank(v.job.project)}


def standing_on_cluster(cycle: CyclePlan, job: PendingJob, v: Victim, plan: VictimPlan) -> dict[str, Any]:
    """ADR 0076, several clusters: the standing on the cluster the room is made on of the two allocations strict
    improvement compared (where the paths of the waiting job's and the victim's projects part), before the move,
    as `standing_on_cluster`; nothing otherwise (one cluster, an unfunded victim)."""
    check = plan.checks.get(v.job.id)
    if cycle.cluster_stand is None or not plan.nodes or not check or "waiting_allocation" not in check:
        return {}  # one cluster, or no judgement between two allocations (unfunded, leaving, no allocation)
    cluster = cycle.routes.clusters[plan.nodes[0][0]]
    stand = cycle.cluster_stand.get(cluster)
    if stand is None:
        return {}
    ratio = cycle.stand.ratio
    waiting, victim = check["waiting_allocation"], check["victim_allocation"]
    return {"standing_on_cluster": {
        "cluster": cluster,
        "waiting": {"allocation": waiting, **stand.evidence(waiting, ratio.get(waiting, math.inf))},
        "victim": {"allocation": victim, **stand.evidence(victim, ratio.get(victim, math.inf))},
    }}


def commit_preemption(
    cycle: CyclePlan, job: PendingJob, path: tuple[str, ...], plan: VictimPlan, k: int, lane: bool = False,
    trade: bool = False, check: ChurnCheck | None = None,
) -> None:
    now, s = cycle.now, cycle.s
    churn = check.evidence() if check is not None else None
    for i, _g in plan.nodes:
        cycle.index.mask(i)  # claimed: the job starts here once the victims stop
        cycle.claimed.add(i)
    cycle.reserved_room = cycle.reserved_shape = None
    cycle.charge(path, job.gpus, plan.nodes[0][0] if plan.nodes else -1, cycle.weighted(plan.nodes, job.gpus))
    until = now
    nodes = [cycle.index.ids[i] for i, _ in plan.nodes]
    plan_evidence: dict[str, Any] = {
        "nodes": nodes,
        "victims": len(plan.victims),
        "lost_gpu_s": plan.cost,
        "nodes_considered": plan.considered,
    }
    routing = cycle.route_victims.pop(job.id, None) if cycle.route_victims else None
    if routing is not None:
        plan_evidence["routing"] = routing  # ADR 0071: the clusters compared and their lost work
    fresh = 0
    for v in plan.victims:
        if v.leaving:
            rq = v.job.preemption_requested_at
            until = max(until, now if rq is None else grace_ends_at(v.job, s))
            continue
        fresh += 1
        claimed = claim_victim(plan, job, v)
        grace = victim_grace_s(v.job.funded, claimed, s)
        until = max(until, now + grace)
        reason: PreemptionReason = "fair_share" if v.job.funded else "unfunded"
        cycle.preemptions.append(
            Preemption(
                victim_id=v.job.id,
                for_job_id=job.id,
                reason=reason,
                grace_ends_at=now + grace,
                lost_gpu_s=v.cost,
                evidence={
                    "rule": CLAIM_RULE if claimed else "lane_trade_own_work" if trade
                    else "strict_improvement" if v.job.funded else "unfunded_preemptible_at_once",
                    "waiting": waiting_evidence(cycle, job, k),
                    "victim": victim_evidence(cycle, v),
                    "check": plan.checks.get(v.job.id),
                    "churn": churn,
                    "lane": lane,
                    "trade": trade,
                    "plan": plan_evidence,
                    "now": now,
                } | standing_on_cluster(cycle, job, v, plan),
            )
        )
    cycle.room_for.append(job.id)
    cycle.specials[job.id] = Special(
        PREEMPTING,
        0,
        "one node" if len(nodes) == 1 else "whole nodes",
        until,
        {"victims": len(plan.victims), "new_preemptions": fresh, "nodes": nodes, "lost_gpu_s": plan.cost},
    )
