"""Phase 1, expire and drain: grace periods that ended, sessions at their cap, jobs on draining or
unhealthy nodes whose protection ended: stops (DESIGN.md "Interactive sessions"; issue 3 "Draining").
"""

from __future__ import annotations

from steward.domain.nodes import takes_new_work
from steward.policy.contract import (
    funding_charge,
    grace_ends_at,
    grace_s,
)
from steward.policy.draining import drain_stop
from steward.policy.model import (
    Stop,
)
from steward.policy.plan import CyclePlan
from steward.policy.sessions import session_cap_stop


def expire_and_drain(cycle: CyclePlan) -> None:
    """Grace ended → stop; session at cap → checkpoint and stop; on a draining (or gone) node and
    out of protection → checkpoint, stop, requeue (an unhealthy node's jobs keep running:
    policy/draining.py)."""
    now, s = cycle.now, cycle.s
    ready = {nid for nid, node in cycle.nodes_by_id.items() if takes_new_work(node.state)}
    # the order phase's tallies ride along (one pass over the running jobs): GPUs used per node,
    # funded GPUs per project of the jobs that keep running, and the jobs going (in their grace or
    # stopped now: what ADR 0028's held rooms and release times read)
    used = cycle.used
    used_get = used.get
    funded_by_project = cycle.funded_by_project
    weighted_by_project = cycle.funded_weighted_by_project
    weight_of = cycle.weight_of
    weights_set = cycle.weights_set  # every weight 1: phase 2 charges each project's GPUs (`CyclePlan.weighted`)
    for job in cycle.snap.running:
        placement = job.placement
        if len(placement) == 1:
            nid, c = placement[0]
            used[nid] = used_get(nid, 0) + c
            on_ready = nid in ready
        else:
            for nid, c in placement:
                used[nid] = used_get(nid, 0) + c
            on_ready = all(nid in ready for nid, _ in placement)
        if job.preemption_requested_at is not None:
            cycle.going.append(job)
            if now >= grace_ends_at(job, s):
                cycle.stops.append(
                    Stop(
                        job.id,
                        "grace_ended",
                        checkpoint=job.resumable,
                        requeue=True,
                        evidence={
                            "preemption_requested_at": job.preemption_requested_at,
                            "grace_s": grace_s(job.funded, s),
                            "now": now,
                        },
                    )
                )
                cycle.leaving.add(job.id)
            continue
        # only a session reaches a cap (`is_session`), and only a job on a node that is not
        # ready (or gone) is drained: the rules are asked about those jobs alone
        stop = session_cap_stop(job, now, s) if job.klass == "interactive" else None
        if stop is None and not on_ready:
            stop = drain_stop(job, cycle.nodes_by_id, now)
        if stop is not None:
            cycle.stops.append(stop)
            cycle.leaving.add(job.id)
            cycle.going.append(job)
        elif job.funded:
            funded_by_project[job.project] = funded_by_project.get(job.project, 0) + job.gpus
            if weights_set:
                weighted_by_project[job.project] = (weighted_by_project.get(job.project, 0.0)
                                                    + funding_charge(placement, weight_of))  # ADR 0090
