"""Phase 3, held rooms: the GPUs a preemption freed, or is freeing, are its beneficiary's. A lane job
whose victims just stopped (ADR 0021), and any beneficiary whose victims are in their grace or just
stopped (ADR 0028, DESIGN.md "Churn is bounded"), is placed, or has its room held, before anything
else.
"""

from __future__ import annotations

from steward.policy.churn import (
    claimed_rooms,
    holds_claimed_room,
)
from steward.policy.contract import (
    grace_ends_at,
    lane_funds,
    protection_s,
)
from steward.policy.explain import (
    PREEMPTING,
    Special,
)
from steward.policy.lane import holds_room, lane_pending
from steward.policy.plan import CyclePlan


def held_rooms(cycle: CyclePlan) -> None:
    """ADR 0021: a lane job whose victims stopped in the last `lane_hold_s` seconds takes the
    GPUs they freed before anything else is placed (reservations included: the room was made
    for it first), funded as the lane funds it, whatever its qualification now: the preemption
    that made the room was made for it when it was qualified, or traded the project's own work
    (`lane_trade`)."""
    s = cycle.s
    if not s.lane or s.lane_hold_s is None:
        return
    now = cycle.now
    for k, job in enumerate(cycle.order.jobs):
        if job.room_freed_at is None or not holds_room(job, now, s):
            continue
        fit, rule = cycle.try_place(job, k, now + protection_s(job.klass, job.min_runtime_s, s))
        if fit is None:
            continue  # not all of its room is free yet: the lane treats it as usual
        cycle.lane_seen.add(job.id)
        cycle.place_lane(job, fit, rule, cycle.path(job.project), k)["held_room_since"] = job.room_freed_at


def claimed_rooms_held(cycle: CyclePlan) -> None:
    """ADR 0028 (churn.holds_claimed_room): the room a preemption made is its beneficiary's. A
    waiting job whose victims are in their grace, or stopped less than `claim_hold_s` ago, is
    placed before anything else when it fits; while its victims still run, the free GPUs its
    plan counted on their node are held for it (a gang: their nodes), its victims are nobody
    else's, and it is not searched victims for again. Funded as it would be now (the lane funds
    a lane job as usual); it was charged when the room was made."""
    s = cycle.s
    if s.claim_hold_s is None:
        return
    rooms = claimed_rooms(cycle.snap.running)
    now = cycle.now
    index = cycle.index
    lane_seen = cycle.lane_seen  # placed by the lane's own hold (ADR 0021) already
    for k, job in enumerate(cycle.order.jobs):
        victims = rooms.get(job.id)
        if (victims is None and job.room_freed_at is None) or (lane_seen and job.id in lane_seen):
            continue
        if not holds_claimed_room(job, victims or (), now, s):
            continue
        path = cycle.path(job.project)
        gap = cycle.funding_gap(job, path)
        lane = s.lane and lane_pending(job, s)
        funded = lane_funds(gap) if lane else gap is None
        ends_at = now + protection_s(job.klass, job.min_runtime_s, s) if funded else now
        fit, rule = cycle.try_place(job, k, ends_at)
        if fit is not None:
            cycle.lane_seen.add(job.id)
            if lane:
                cycle.place_lane(job, fit, rule, path, k)
            else:
                cycle.place(job, fit, rule, funded, path, k)
            cycle.placements[-1].evidence["claimed_room"] = {
                "victims_leaving": sorted(v.id for v in victims or ()),
                "room_freed_at": job.room_freed_at,
            }
            continue
        if not victims:
            continue  # its room is not all free (someone else's stop): the usual phases
        on: dict[int, int] = {}
        for v in victims:
            for nid, g in v.placement:
                i = index.pos.get(nid)
                if i is not None:
                    on[i] = on.get(i, 0) + g
        held = 0
        if job.gpus <= index.maxcap:
            i = max(on, key=lambda n: (index.free[n] + on[n], -n))
            held = min(index.free[i], max(0, job.gpus - on[i]))
            if held:
                index.take(i, held)
        else:
            for i in on:
                index.mask(i)
                cycle.claimed.add(i)
        cycle.reserved_room = cycle.reserved_shape = None
        if funded:
            cycle.charge(path, job.gpus)
        cycle.lane_seen.add(job.id)
        cycle.held_rooms.add(job.id)
        cycle.room_for.append(job.id)
        until = max(grace_ends_at(v, s) for v in victims)
        nodes = sorted(index.ids[i] for i in on)
        cycle.specials[job.id] = Special(
            PREEMPTING, 0, "one node" if len(nodes) == 1 else "whole nodes", until,
            {"victims": len(victims), "new_preemptions": 0, "nodes": nodes, "room_held": True,
             "held_free_gpus": held},
        )
