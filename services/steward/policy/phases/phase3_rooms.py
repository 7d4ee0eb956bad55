"""Phase 3, held rooms: the GPUs a preemption freed, or is freeing, are its beneficiary's. A
beneficiary whose victims are in their grace or just stopped (ADR 0028, DESIGN.md "Churn is
bounded"; a lane job's too: ADR 0021's lane hold is this rule), is placed, or has its room held,
before anything else.
"""

from __future__ import annotations

from steward.policy.churn import (
    holds_claimed_room,
)
from steward.policy.contract import (
    grace_ends_at,
    lane_funds,
    protection_s,
)
from steward.policy.explain import Special
from steward.policy.lane import lane_pending
from steward.policy.placement import CapacityIndex
from steward.policy.plan import CyclePlan
from steward.policy.reasons import PREEMPTING
from steward.policy.routing import room_cluster


def claimed_rooms_held(cycle: CyclePlan) -> None:
    """ADR 0028 (churn.holds_claimed_room): the room a preemption made is its beneficiary's. A
    waiting job whose victims are in their grace, or stopped less than `claim_hold_s` ago, is
    placed before anything else when it fits; while its victims still run, the free GPUs its
    plan counted on their node are held for it (a gang: their nodes and the wholly free nodes it
    still needs, `gang_room`), its victims are nobody
    else's, and it is not searched victims for again. Funded as it would be now (the lane funds
    a lane job as usual, whatever its qualification now: the preemption was made for it when it
    was qualified, or traded its allocation's own work); it was charged when the room was made."""
    s = cycle.s
    if s.claim_hold_s is None:
        return
    rooms = cycle.rooms  # phase 2: the jobs in their grace, by beneficiary
    now = cycle.now
    index = cycle.index
    jobs = cycle.order.jobs
    for k in cycle.holders:  # phase 2: the positions of the jobs with victims leaving or a room freed
        job = jobs[k]
        victims = rooms.get(job.id)
        if not holds_claimed_room(job, victims or (), now, s):
            continue
        path = cycle.path(job.project)
        gap = cycle.funding_gap(job, path)
        lane = s.lane and lane_pending(job, s)
        funded = lane_funds(gap) if lane else gap is None
        ends_at = now + protection_s(job.klass, job.min_runtime_s, s) if funded else now
        # ADR 0068: a routed job takes the room made for it when it fits there now, and moves to another
        # cluster only when it fits there now and not in its room yet
        room = (room_cluster(victims, index.pos, cycle.routes.clusters)
                if victims and cycle.routes.active and cycle.routes.routed(job) else None)
        fit, rule = cycle.try_place(job, k, ends_at, room=room)
        if fit is not None:
            cycle.lane_seen.add(job.id)
            if lane:
                cycle.place_lane(job, fit, rule, path, k)
            else:
                cycle.place(job, fit, rule, funded, path, k)
            evidence = cycle.placements[-1].evidence
            left = "moved_from" in evidence.get("routing", {})
            # a job that moved did not take its room: the evidence says which room it left
            evidence["room_left" if left else "claimed_room"] = {
                "victims_leaving": sorted(v.id for v in victims or ()),
                "room_freed_at": job.room_freed_at,
            } | ({"cluster": room} if left else {})
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
        taken: list[tuple[int, int]] = []  # where the job will run, for its charge (ADR 0090)
        if job.gpus <= index.maxcap:
            i = max(on, key=lambda n: (index.free[n] + on[n], -n))
            held = min(index.free[i], max(0, job.gpus - on[i]))
            if held:
                index.take(i, held)
            taken.append((i, job.gpus))
        else:
            rest = job.gpus
            for i in gang_room(index, on, job.gpus, min(job.topology_depth or 0, index.depth)):
                index.mask(i)
                cycle.claimed.add(i)
                on.setdefault(i, 0)
                if rest > 0:
                    taken.append((i, min(rest, index.cap[i])))
                    rest -= taken[-1][1]
        cycle.reserved_room = cycle.reserved_shape = None
        if funded:
            cycle.charge(path, job.gpus, min(on, default=-1), cycle.weighted(taken, job.gpus))
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


def gang_room(index: CapacityIndex, on: dict[int, int], gpus: int, min_depth: int) -> list[int]:
    """The nodes a multi-node gang's held room spans (DESIGN.md "Churn is bounded": the room a
    preemption makes is its beneficiary's; ADR 0028): the nodes its victims still run on,
    and the wholly free nodes its plan counted on (free at the preemption, or freed since by its
    victims that stopped first: an unfunded victim's grace is shorter than a funded one's) — as many
    as the gang still needs, in topology order, inside the deepest domain (at `min_depth` or deeper)
    that holds its victims' nodes and enough of them. Holding the victims' nodes alone gave the
    other nodes to the next taker, whose protection then blocked the gang until the next round of
    preemptions for it: the gang-heavy loop of issue 18. Just the victims' nodes when no domain has
    enough whole free nodes (its room is someone else's now; the usual phases see to it)."""
    mine = sorted(on)
    cap = index.cap
    need = gpus - sum(cap[i] for i in mine)
    if need <= 0 or not mine:
        return mine
    free, ok = index.free, index.ok
    for d in range(index.depth, min_depth - 1, -1):
        of = index.dom_of[d]
        dom = of[mine[0]]
        if dom < 0 or any(of[i] != dom for i in mine):
            continue
        lo, hi = index.dom_range[d][dom]
        extra: list[int] = []
        left = need
        for i in range(lo, hi):
            if i not in on and ok[i] and free[i] == cap[i] > 0:
                extra.append(i)
                left -= cap[i]
                if left <= 0:
                    return mine + extra
    return mine
