"""Phase 6, place funded work in order, best fit in the smallest domain; a large gang that does not
fit gets a reservation if fewer than `reservation_allocations` are held, after which the same
backfill rule holds for its nodes (DESIGN.md "Placement").
"""

from __future__ import annotations

from steward.policy.contract import (
    protection_s,
)
from steward.policy.phases.phase4_reserve import make_reservation, may_reserve
from steward.policy.plan import CyclePlan


def place_funded(cycle: CyclePlan) -> None:
    """In global order: funded work is placed where it fits; work that cannot be funded waits
    for the backfill (phase 8); the first blocked large gang gets a reservation."""
    jobs = cycle.order.jobs
    index = cycle.index
    cycle.unfunded = []
    cycle.blocked = []
    k = 0
    n = len(jobs)
    lane_seen = cycle.lane_seen
    paths = cycle.paths
    unfunded = cycle.unfunded
    now, s = cycle.now, cycle.s
    while k < n:
        job = jobs[k]
        if index.total_free == 0 and not cycle.reserved_has_room():
            break
        if lane_seen and job.id in lane_seen:
            k += 1
            continue
        path = paths.get(job.project)
        if path is None:
            path = cycle.path(job.project)
        gap = cycle.funding_gap(job, path)
        if gap is not None:
            unfunded.append((k, job))
            k += 1
            continue
        ends_at = now + protection_s(job.klass, job.min_runtime_s, s)
        mask = cycle.eligible_mask(k, ends_at) if cycle.reserved else 0
        fit, rule = cycle.try_place(job, k, ends_at, mask)
        if fit is not None:
            cycle.place(job, fit, rule, True, path, k)
            k += 1
            continue
        cycle.blocked.append((k, job))
        if (
            cycle.reserved
            and job.id not in cycle.res_by_job
            and mask != (1 << len(cycle.res_plans)) - 1
            and cycle.reserved_would_hold(job.gpus)
        ):
            r = cycle.blocking_reservation(job.gpus, mask, job)
            if r is not None:
                cycle.blocked_by_reservation[job.id] = cycle.reservations[r].job_id
        if may_reserve(cycle, job):
            make_reservation(cycle, job, path, k)
        k += 1
        if cycle.nothing_fits_after(k):
            break
    cycle.tail_start = k
    cycle.counters["walked"] = k
