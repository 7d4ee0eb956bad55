"""The scheduling cycle: a pure function from a `Snapshot` to decisions with evidence.

Numbered phases (policy/phases/, one module each) run in order over one plan (`CyclePlan`,
policy/plan.py: the `CapacityIndex` with this cycle's tentative decisions, the standing, the order
and the funding) that only this call sees; the result is built from the plan at the end. The same
snapshot always gives the same result, whatever the order of its tuples.

1. expire — grace periods that ended, sessions at their cap, jobs on draining or unhealthy nodes
   whose protection ended: stops.
2. order — fair-share standing, the global order of waiting jobs, funding, debug qualification.
3. rooms — the GPUs a preemption freed, or is freeing, go to its beneficiary first.
4. reserve — the head large gang of the most under-served allocations holds nodes assembled from
   protection expiries.
5. lane — qualified debug work ahead of the fair-share walk.
6. place — funded work in order, best fit in the smallest domain (and reservations for gangs).
7. preempt — for funded work still blocked: strict improvement, least lost work, worth its cost.
8. backfill — unfunded work on idle capacity not needed soon.
9. explain — every waiting job (lazily), fragmentation, the cycle's evidence.
"""

from __future__ import annotations

from operator import attrgetter

from steward.policy.model import CycleResult, Snapshot
from steward.policy.phases.phase1_expire import expire_and_drain
from steward.policy.phases.phase2_order import order_and_fund
from steward.policy.phases.phase3_rooms import claimed_rooms_held
from steward.policy.phases.phase4_reserve import reserve
from steward.policy.phases.phase5_lane import lane
from steward.policy.phases.phase6_place import place_funded
from steward.policy.phases.phase7_preempt import preempt
from steward.policy.phases.phase8_backfill import backfill_unfunded
from steward.policy.phases.phase9_explain import explain
from steward.policy.plan import CyclePlan

__all__ = ["schedule"]

_id_of = attrgetter("id")


def schedule(snapshot: Snapshot) -> CycleResult:
    """One scheduling cycle: the phases of the module docstring, in order, over one plan."""
    cycle = CyclePlan(snapshot)
    expire_and_drain(cycle)
    order_and_fund(cycle)
    claimed_rooms_held(cycle)
    reserve(cycle)
    lane(cycle)
    place_funded(cycle)
    preempt(cycle)
    backfill_unfunded(cycle)
    explanations, frag, evidence = explain(cycle)
    return CycleResult(
        now=cycle.now,
        placements=tuple(cycle.placements),
        preemptions=tuple(cycle.preemptions),
        stops=tuple(sorted(cycle.stops, key=lambda x: x.job_id)),
        explanations=explanations,
        reservation=cycle.reservation,
        fragmentation=frag,
        order=tuple(map(_id_of, cycle.order.jobs)),
        evidence=evidence,
    )

