"""Phase 5, the debug lane: debug jobs and sessions inside their allocation's debug quota, in global
order, ahead of the fair-share walk (ADR 0007, 0029; DESIGN.md "Debug quota and the
time-to-first-GPU SLO"). Debug work over the quota is ordinary funded work. With several clusters a
qualified job is placed only on the clusters where it is within its allocation's quota (ADR 0073).
"""

from __future__ import annotations

from dataclasses import replace

from steward.policy.churn import (
    defers_to_backfill,
)
from steward.policy.contract import (
    lane_funds,
    protection_s,
)
from steward.policy.plan import CyclePlan


def lane(cycle: CyclePlan) -> None:
    """DESIGN.md "Debug quota and the time-to-first-GPU SLO" (ADR 0007, 0029): qualified debug
    work, in global order, is placed before the fair-share walk; what does not fit is searched
    victims for first in phase 7. Debug work over its allocation's quota is left to the
    ordinary order (phase 6)."""
    s = cycle.s
    qual = cycle.qual
    if not s.lane or not qual:
        return
    lane_seen = cycle.lane_seen
    for k, job in enumerate(cycle.order.jobs):
        q = qual.get(job.id) if job.klass != "batch" else None
        if q is None or (lane_seen and job.id in lane_seen):
            continue
        if not q.qualified:
            continue  # over the quota: ordinary funded work (no trade either)
        path = cycle.path(job.project)
        if defers_to_backfill(lane_funds(cycle.funding_gap(job, path)), s):
            continue  # ADR 0028: unfunded, it waits for the backfill of idle capacity (phase 8)
        cycle.lane_seen.add(job.id)
        if q.clusters and len(q.clusters) < len(cycle.routes.candidates(job)):
            # ADR 0073: the lane places it (and searches victims for it) only where it is within its quota
            job = replace(job, clusters=q.clusters)
        fit, rule = cycle.try_place(job, k, cycle.now + protection_s(job.klass, job.min_runtime_s, s))
        if fit is None:
            cycle.lane_blocked.append((k, job))
            continue
        cycle.place_lane(job, fit, rule, path, k)
