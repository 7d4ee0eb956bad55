"""Phase 9, explain every waiting job (lazily: `Explanations` builds each one when asked, and even
the list of waiting jobs is taken when first read; ADR 0031) and measure fragmentation (issue 3
"Explanations").
"""

from __future__ import annotations

from typing import Any

from steward.domain.policy_settings import PolicySettings
from steward.policy.explain import (
    CapacityFigures,
    ExplainContext,
    Explanations,
)
from steward.policy.model import Reservation
from steward.policy.placement import fragmentation
from steward.policy.plan import CyclePlan

_settings_dicts: list[tuple[PolicySettings, dict[str, Any]]] = []


def settings_dict(settings: PolicySettings) -> dict[str, Any]:
    """`settings.to_dict()` for the cycle's evidence, taken once per settings object (immutable)
    and copied per cycle so that no two results share a dict."""
    if _settings_dicts and _settings_dicts[0][0] is settings:
        base = _settings_dicts[0][1]
    else:
        base = settings.to_dict()
        _settings_dicts[:] = [(settings, base)]
    return {k: dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v for k, v in base.items()}


def largest_waiting(cycle: CyclePlan) -> int:
    """GPUs of the largest job still waiting: the largest in the order unless every job of that size
    was placed (then a walk over the waiting ones). Jobs are placed with exactly their GPUs."""
    gpus = cycle.gpus
    if not gpus:
        return 0
    top = max(gpus)
    placed_top = 0
    for p in cycle.placements:
        g = 0
        for _, n in p.assignments:
            g += n
        if g == top:
            placed_top += 1
    if gpus.count(top) > placed_top:
        return top
    placed = {p.job_id for p in cycle.placements}
    largest = 0  # a compiled loop: see `sizes_and_suffix_min`
    for job in cycle.order.jobs:
        if job.gpus > largest and job.id not in placed:
            largest = job.gpus
    return largest


def explain(cycle: CyclePlan) -> tuple[Explanations, float, dict[str, Any]]:
    """The lazy explanations of the jobs still waiting, the fragmentation, the cycle's evidence."""
    index = cycle.index
    depth = index.depth
    largest_by_depth = index.largest_domain_by_depth
    room = [index.free[i] for i in sorted(cycle.reserved - cycle.claimed)]
    whole_room = sum(
        f for i, f in zip(sorted(cycle.reserved - cycle.claimed), room, strict=True) if f == index.cap[i]
    )
    figures = CapacityFigures(
        reserved_for=cycle.reservation.job_id if cycle.reservation else None,
        reserved_until=cycle.reservation.ready_at if cycle.reservation else None,
        reserved_domain=tuple(cycle.reservation.domain) if cycle.reservation else (),
        reserved_max_free=max(room, default=0),
        reserved_whole=whole_room,
        reserved=tuple(
            cycle.room_of(nodes, res.job_id, res.ready_at, tuple(res.domain), res.cluster)
            for nodes, res in zip(cycle.res_nodes, cycle.reservations, strict=True)
        ),
        maxcap=index.maxcap,
        max_free=index.max_free(),
        whole_by_depth=tuple(index.max_whole_at(d) for d in range(depth + 1)),
        depth=depth,
        levels=cycle.snap.topology_levels,
        total_capacity=cycle.capacity,
        largest_domain_by_depth=tuple(largest_by_depth),
    )
    ctx = ExplainContext(
        now=cycle.now,
        jobs=cycle.order.jobs,
        by_project=cycle.order.by_project,
        specials=cycle.specials,
        tree=cycle.snap.tree,
        standing=cycle.stand,
        settings=cycle.s,
        funded_in_use=cycle.funded_weighted,
        weighted_units=cycle.weights_set,
        quota=cycle.quota,
        capacity=figures,
        running=cycle.snap.running,
        index=index,
        leaving=frozenset(cycle.leaving),
        placements=cycle.placements,
        blocked_by_reservation=cycle.blocked_by_reservation,
        qualifications=cycle.qual,
        cluster_order=cycle.cluster_order,
    )
    ctx.rank_cache.update(cycle.rank_cache)
    largest = largest_waiting(cycle)
    frag = fragmentation(index, largest)
    free_after = index.physical_free_total()
    evidence = {
        "capacity_gpus": cycle.capacity,
        "free_gpus_after": free_after,
        "waiting": len(cycle.order.jobs) - len(cycle.placements),  # each placement is of one job in the order
        "placed": len(cycle.placements),
        "preempted": len(cycle.preemptions),
        "stopped": len(cycle.stops),
        "largest_waiting_gang": largest,
        "making_room_for": cycle.room_for,
        "rooms_held": sorted(cycle.held_rooms),
        "preemptions_refused": cycle.churn_refused,
        "reservations": [reservation_summary(r) for r in cycle.reservations],
        "settings": settings_dict(cycle.s),
        **cycle.counters,
    }
    return Explanations(ctx), frag, evidence


def reservation_summary(r: Reservation) -> dict[str, Any]:
    """A reservation as the cycle's evidence lists it; with its cluster when the gang is routed (ADR 0071)."""
    out: dict[str, Any] = {"job_id": r.job_id, "nodes": list(r.nodes), "ready_at": r.ready_at}
    if r.cluster is not None:
        out["cluster"] = r.cluster
    return out
