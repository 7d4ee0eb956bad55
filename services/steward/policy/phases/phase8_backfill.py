"""Phase 8, backfill unfunded work on idle capacity, but not on GPUs that waiting work will need
within the restart overhead (DESIGN.md "Unfunded occupancy", "Churn is bounded").
"""

from __future__ import annotations

import math

from steward.policy.churn import (
    needed_soon,
)
from steward.policy.explain import (
    PREEMPTING,
)
from steward.policy.plan import CyclePlan


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
