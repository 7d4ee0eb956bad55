"""The scheduling cycle: a pure function from a `Snapshot` to decisions with evidence.

Numbered phases over an immutable snapshot; every tentative decision goes into one plan (the
`CapacityIndex` and the lists below) that only this call sees, and the result is built from it at
the end. The same snapshot always gives the same result, whatever the order of its tuples.

1. Expire and drain — grace periods that ended, sessions at their cap, jobs on draining or
   unhealthy nodes whose protection ended: stops (DESIGN.md "Interactive sessions"; issue 3
   "Draining").
2. Order and fund — fair-share standing of every allocation, the global order of waiting jobs, and
   the funding state (DESIGN.md "Ordering", "Funded occupancy").
2a. Reservations — the blocked head large gang of each of the `reservation_allocations` most
   under-served allocations (earliest in the order) holds nodes assembled from protection expiries;
   work behind it in the order (lane jobs included) may use them only if its protection ends before
   the reservation is due (DESIGN.md "Placement"; ADR 0007 "Reservations before the lane").
2b. The debug lane — first the lane jobs whose victims just freed GPUs for them (the hold, ADR 0021),
   then debug jobs and sessions inside their allocation's debug quota, in global order (ADR 0007,
   0029; DESIGN.md "Debug quota and the time-to-first-GPU SLO"). Debug work over the quota is
   ordinary funded work.
3. Place funded work in order, best fit in the smallest domain; a large gang that does not fit gets
   a reservation if fewer than `reservation_allocations` are held, after which the same backfill
   rule holds for its nodes (DESIGN.md "Placement").
4. Preempt with strict improvement for funded work still blocked, choosing victims by least lost
   work (DESIGN.md "The time-slicing contract"); blocked qualified lane jobs first, from unfunded
   work.
5. Backfill unfunded work on idle capacity (DESIGN.md "Unfunded occupancy").
6. Explain every waiting job and measure fragmentation (issue 3 "Explanations").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from itertools import compress
from operator import attrgetter
from typing import Any

from steward.policy.contract import (
    ENTITLEMENT_USED,
    UNFUNDED_BY_REQUEST,
    funding_gap,
    grace_ends_at,
    grace_s,
    lane_funds,
    protected_until,
    protection_s,
)
from steward.policy.debug_quota import Qualification, debug_quota_gpus, qualify_all
from steward.policy.draining import drain_stop
from steward.policy.errors import InvalidNode
from steward.policy.explain import (
    PREEMPTING,
    RESERVED,
    CapacityFigures,
    ExplainContext,
    Explanations,
    ReservedRoom,
    Special,
)
from steward.policy.lane import holds_room
from steward.policy.model import (
    CycleResult,
    Node,
    PendingJob,
    Placement,
    Preemption,
    PreemptionReason,
    Reservation,
    RunningJob,
    Snapshot,
    Stop,
)
from steward.policy.ordering import Order, demand_of, order_pending, standing, tree_layout
from steward.policy.packing import FirmLoad, pack_single
from steward.policy.placement import CapacityIndex, Fit, fragmentation, level_name
from steward.policy.preemption import Branches, Trade, VictimPlan, VictimSearch, branches_of, strictly_improves
from steward.policy.reservation import (
    ReservationPlan,
    may_backfill,
    plan_reservation,
    release_time,
    wants_reservation,
)
from steward.policy.sessions import restore_node, session_cap_stop
from steward.policy.settings import PolicySettings

__all__ = ["schedule"]

_id_of = attrgetter("id")
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


def sizes_and_suffix_min(jobs: Sequence[PendingJob]) -> tuple[list[int], list[int]]:
    """The GPUs of each job in the order, and suffix_min[k]: the smallest job at or after position k
    (a sentinel 1 << 62 past the end). One compiled loop: `list(map(...))` and `accumulate(..., min)`
    called back into the interpreter per job (≈ 10 % of a compiled simulation, round 5)."""
    n = len(jobs)
    gpus = [0] * n
    suffix = [1 << 62] * (n + 1)
    for k in range(n - 1, -1, -1):
        g = jobs[k].gpus
        gpus[k] = g
        suffix[k] = g if k == n - 1 or g < suffix[k + 1] else suffix[k + 1]
    return gpus, suffix


def schedule(snapshot: Snapshot) -> CycleResult:
    """One scheduling cycle (see the module docstring for the phases)."""
    return _Cycle(snapshot).run()


class _GangMayPreempt:
    """May a reserving gang preempt a project's work once its protection ends (strict improvement,
    memoised per project)? An object rather than closures in `make_reservation`: a closure over the
    cycle made every such cycle reference-cyclic garbage for the collector."""

    def __init__(self, path: tuple[str, ...], gpus: int, horizon: float, branches: Branches,
                 path_of: Callable[[str], tuple[str, ...]]) -> None:
        self.path = path
        self.gpus = gpus
        self.horizon = horizon
        self.branches = branches
        self.path_of = path_of
        self.memo: dict[str, bool] = {}

    def project(self, project: str) -> bool:
        ok = self.memo.get(project)
        if ok is None:
            ok, _ = strictly_improves(self.path, self.gpus, self.path_of(project), 0.0, self.horizon, self.branches)
            self.memo[project] = ok
        return ok

    def victim(self, victim: RunningJob) -> bool:
        return self.project(victim.project)


class _Cycle:
    """The plan of one cycle. Private and short-lived: built, run once, discarded."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snap = snapshot
        self.s = snapshot.settings
        self.now = snapshot.now
        self.nodes_by_id: dict[str, Node] = {}
        for node in snapshot.nodes:
            if node.id in self.nodes_by_id:
                raise InvalidNode(node.id, "appears twice in the snapshot")
            self.nodes_by_id[node.id] = node
        self.stops: list[Stop] = []
        self.leaving: set[str] = set()
        self.placements: list[Placement] = []
        self.preemptions: list[Preemption] = []
        self.specials: dict[str, Special] = {}
        self.reservation: Reservation | None = None
        self.reservations: list[Reservation] = []
        self.res_plans: list[ReservationPlan] = []
        self.res_pos: list[int] = []  # the reserved gang's position in the order
        self.res_nodes: list[tuple[int, ...]] = []
        self.res_by_job: dict[str, int] = {}
        self.res_projects: set[str] = set()
        self.reserved: set[int] = set()
        self.claimed: set[int] = set()
        self.reserved_room: int | None = None
        self.reserved_shape: tuple[int, int] | None = None
        self.blocked_by_reservation: dict[str, str] = {}  # job id → the gang whose nodes it may not use
        self.fail_reserved: dict[tuple[bool, int], float] = {}
        self.paths: dict[str, tuple[str, ...]] = {}
        self.rank_cache: dict[str, dict[str, Any]] = {}
        self.fail_single = math.inf
        self.fail_gang: dict[int, float] = {}
        self.counters: dict[str, int] = {}
        self.fund_ok: dict[str, bool] = {}  # per project: funded now? (cleared by every charge)
        self.used: dict[str, int] = {}
        self.funded_by_project: dict[str, int] = {}
        self.lane_seen: set[str] = set()
        self.lane_blocked: list[tuple[int, PendingJob]] = []
        self.qual: dict[str, Qualification] = {}  # ADR 0029: waiting debug work of an allocation
        self.room_for: list[str] = []  # waiting jobs a preemption makes room for (fresh victims or not)
        self.load: FirmLoad | None = None  # ADR 0013: gang-aware packing of one-node work
        self.backfilling = False  # phase 5: placing unfunded work

    # --- helpers -----------------------------------------------------------------------------------

    def path(self, project: str) -> tuple[str, ...]:
        p = self.paths.get(project)
        if p is None:
            tree = self.snap.tree
            p = tree.path(project) if tree.is_leaf(project) else ()
            self.paths[project] = p
        return p

    def rank(self, project: str) -> dict[str, Any]:
        r = self.rank_cache.get(project)
        if r is None:
            r = self.stand.evidence(self.snap.tree, project)
            self.rank_cache[project] = r
        return r

    def funding_gap(self, job: PendingJob, path: tuple[str, ...]) -> str | None:
        """None when the job would be funded now; else why not (contract.funding_gap). Funding moves
        only when something is charged, which clears the per-project memo `fund_ok`."""
        return funding_gap(job, path, self.funded_in_use, self.quota, self.s, self.fund_ok)

    def charge(self, path: tuple[str, ...], gpus: int) -> None:
        if self.fund_ok:
            self.fund_ok.clear()
        for a in path:
            self.funded_in_use[a] = self.funded_in_use.get(a, 0.0) + gpus

    # --- phase 1 -----------------------------------------------------------------------------------

    def phase1_expire_and_drain(self) -> None:
        """Grace ended → stop; session at cap → checkpoint and stop; on a draining or unhealthy node
        and out of protection → checkpoint, stop, requeue."""
        now, s = self.now, self.s
        ready = {nid for nid, node in self.nodes_by_id.items() if node.state == "ready"}
        # phase 2's tallies ride along (one pass over the running jobs): GPUs used per node, and
        # funded GPUs per project of the jobs that keep running
        used = self.used
        used_get = used.get
        funded_by_project = self.funded_by_project
        for job in self.snap.running:
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
                if now >= grace_ends_at(job, s):
                    self.stops.append(
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
                    self.leaving.add(job.id)
                continue
            # only a session reaches a cap (`is_session`), and only a job on a node that is not
            # ready (or gone) is drained: the rules are asked about those jobs alone
            stop = session_cap_stop(job, now, s) if job.klass == "interactive" else None
            if stop is None and not on_ready:
                stop = drain_stop(job, self.nodes_by_id, now)
            if stop is not None:
                self.stops.append(stop)
                self.leaving.add(job.id)
            elif job.funded:
                funded_by_project[job.project] = funded_by_project.get(job.project, 0) + job.gpus

    # --- phase 2 -----------------------------------------------------------------------------------

    def phase2_order_and_fund(self) -> None:
        snap, s = self.snap, self.s
        funded_by_project = self.funded_by_project  # tallied in phase 1
        self.index = CapacityIndex(snap.nodes, self.used, s.placement)
        if s.gang_packing and s.placement == "best_fit":
            self.load = FirmLoad(self.index, snap.running, self.leaving)
        self.capacity = sum(compress(self.index.cap, self.index.layout_ready))
        self.stand = standing(snap.tree, snap.usage, self.capacity, s, demand_of(snap))
        self.order: Order = order_pending(snap.pending, self.stand, snap.usage, s)
        tree = snap.tree
        entitlement = tree_layout(tree).entitlement
        self.quota = {a: e * self.capacity for a, e in entitlement.items()}
        self.funded_in_use: dict[str, float] = {}
        for project in sorted(funded_by_project):
            self.charge(self.path(project), funded_by_project[project])
        self.branches = branches_of(self.stand, self.funded_in_use)
        self.gpus, self.suffix_min = sizes_and_suffix_min(self.order.jobs)

    # --- placement primitives ----------------------------------------------------------------------

    def reserved_free(self) -> int:
        """Free GPUs on reserved nodes not claimed by a preemption (cached: changes only when work
        lands on them or a claim is made)."""
        if self.reserved_room is None:
            self.reserved_room = sum(self.index.free[i] for i in self.reserved if i not in self.claimed)
        return self.reserved_room

    def eligible_mask(self, pos: int, ends_at: float | None) -> int:
        """The reservations whose nodes a job at `pos` in the order, protected until `ends_at`, may
        use (bit r for reservation r): those of gangs behind it in the order, and those due no
        earlier than its protection ends (issue 3's backfill rule). None: no reserved node."""
        if ends_at is None:
            return 0
        mask = 0
        for r, plan in enumerate(self.res_plans):
            if pos <= self.res_pos[r] or may_backfill(ends_at - self.now, self.now, plan.ready_at):
                mask |= 1 << r
        return mask

    def try_place(self, job: PendingJob, pos: int, ends_at: float | None) -> tuple[Fit | None, str]:
        """Where the job goes now (visible capacity first, then the reserved nodes it may use: see
        `eligible_mask`)."""
        index = self.index
        g = job.gpus
        fit: Fit | None = None
        rule: str = self.s.placement
        if g <= index.maxcap:
            if g < self.fail_single:
                if job.previous_node is not None:
                    i, rule = restore_node(job, index)
                elif self.load is not None:
                    i = pack_single(index, g, self.load, not self.backfilling)
                else:
                    i = index.find_single(g)
                if i >= 0:
                    n = index.nodes[i]
                    fit = Fit(((i, g),), len(n.path) + 1, (*n.path, n.id))
                else:
                    self.fail_single = float(g)
        else:
            d = min(job.topology_depth or 0, index.depth)
            if g < self.fail_gang.get(d, math.inf):
                fit = index.find_gang(g, d)
                if fit is None:
                    self.fail_gang[d] = g
                else:
                    rule = f"{rule}_gang"
        if fit is None and self.reserved:
            mask = self.eligible_mask(pos, ends_at)
            if mask:
                fit = self.fit_reserved(g, mask)
                if fit is not None:
                    rule = "backfill_reserved"
        return fit, rule

    def fit_reserved(self, g: int, mask: int) -> Fit | None:
        """Best fit among the reserved nodes of the reservations in `mask` (a gang: the wholly free
        nodes of one reservation). Their room only shrinks during a cycle, so a size that did not
        fit is not tried again with the same (or a smaller) set of reservations."""
        index = self.index
        single = g <= index.maxcap
        if g >= self.fail_reserved.get((single, mask), math.inf):
            return None
        claimed = self.claimed
        if single:
            cands = [
                (index.free[i], i)
                for r, nodes in enumerate(self.res_nodes)
                if mask >> r & 1
                for i in nodes
                if i not in claimed and index.free[i] >= g
            ]
            if not cands:
                self.fail_reserved[(single, mask)] = g
                return None
            _, i = min(cands)
            n = index.nodes[i]
            return Fit(((i, g),), len(n.path) + 1, (*n.path, n.id))
        for r, nodes in enumerate(self.res_nodes):
            if not mask >> r & 1:
                continue
            whole = [i for i in sorted(nodes) if i not in claimed and index.free[i] == index.cap[i] > 0]
            if sum(index.cap[i] for i in whole) < g:
                continue
            out, left = [], g
            for i in whole:
                take = min(index.cap[i], left)
                out.append((i, take))
                left -= take
                if not left:
                    break
            plan = self.res_plans[r]
            return Fit(tuple(out), plan.domain_depth, plan.domain)
        self.fail_reserved[(single, mask)] = g
        return None

    def place(self, job: PendingJob, fit: Fit, rule: str, funded: bool, path: tuple[str, ...], pos: int) -> None:
        before = {a: self.funded_in_use.get(a, 0.0) for a in path[-1:]}
        fitting = self.index.nodes_fitting(job.gpus)  # the candidates it was chosen among
        assignments = self.index.commit(fit)
        if self.load is not None:
            self.load.add(fit.nodes, funded)
        self.reserved_room = self.reserved_shape = None
        if funded:
            self.charge(path, job.gpus)
        until = protected_until(job, self.now, funded, self.s)
        evidence: dict[str, Any] = {
            "rule": rule,
            "position": pos + 1,
            "fitting_nodes": fitting,
            "domain": list(fit.domain),
            "funded": funded,
            "protected_until": until,
            "rank": self.rank(job.project),
        }
        q = self.qual.get(job.id) if self.qual else None
        if q is not None:
            evidence["qualified"] = q.qualified  # ADR 0029: inside its allocation's debug quota?
        if path and self.s.funding:
            leaf = path[-1]
            evidence["funding"] = {
                "allocation": leaf,
                "funded_gpus_before": before.get(leaf, 0.0),
                "quota_gpus": self.quota.get(leaf, 0.0),
            }
        if self.reserved and any(i in self.reserved for i, _ in fit.nodes):
            for r, nodes in enumerate(self.res_nodes):
                if any(i in nodes for i, _ in fit.nodes):
                    res = self.reservations[r]
                    evidence["reservation"] = {"job_id": res.job_id, "ready_at": res.ready_at}
                    break
        self.placements.append(Placement(job.id, job.project, assignments, funded, until, evidence))

    # --- phase 2b: the debug lane --------------------------------------------------------------------

    def qualifications(self) -> dict[str, Qualification]:
        """ADR 0029: the qualification of every waiting piece of debug work of an allocation, at the
        start of the lane (jobs stopping this cycle no longer count). Placing a qualified job moves
        its GPUs from "ahead" to "in use" of the jobs behind it, and a preemption made for it frees
        GPUs (victims leave): neither adds to what counts, so the qualifications hold all cycle."""
        snap, s = self.snap, self.s
        tree = snap.tree
        quotas: dict[str, int] = {}
        capacity = self.capacity
        for job in snap.pending:
            if job.klass != "batch" and job.project not in quotas and self.path(job.project):
                quotas[job.project] = debug_quota_gpus(tree, job.project, capacity, s)
        if not quotas:
            return {}
        leaving = self.leaving
        running = [r for r in snap.running if r.id not in leaving] if leaving else snap.running
        return qualify_all(quotas, running, snap.pending, s)

    def phase2b_held_room(self) -> None:
        """ADR 0021: a lane job whose victims stopped in the last `lane_hold_s` seconds takes the
        GPUs they freed before anything else is placed (reservations included: the room was made
        for it first), funded as the lane funds it, whatever its qualification now: the preemption
        that made the room was made for it when it was qualified, or traded the project's own work
        (`lane_trade`)."""
        s = self.s
        if not s.lane:
            return
        self.qual = self.qualifications()
        if s.lane_hold_s is None:
            return
        now = self.now
        for k, job in enumerate(self.order.jobs):
            if job.room_freed_at is None or not holds_room(job, now, s):
                continue
            fit, rule = self.try_place(job, k, now + protection_s(job.klass, job.min_runtime_s, s))
            if fit is None:
                continue  # not all of its room is free yet: the lane treats it as usual
            self.lane_seen.add(job.id)
            self.place_lane(job, fit, rule, self.path(job.project), k)["held_room_since"] = job.room_freed_at

    def phase2b_lane(self) -> None:
        """DESIGN.md "Debug quota and the time-to-first-GPU SLO" (ADR 0007, 0029): qualified debug
        work, in global order, is placed before the fair-share walk; what does not fit is searched
        victims for first in phase 4. Debug work over its allocation's quota is left to the
        ordinary order (phase 3)."""
        s = self.s
        qual = self.qual
        if not s.lane or not qual:
            return
        lane_seen = self.lane_seen
        for k, job in enumerate(self.order.jobs):
            q = qual.get(job.id) if job.klass != "batch" else None
            if q is None or (lane_seen and job.id in lane_seen):
                continue
            if not q.qualified:
                continue  # over the quota: ordinary funded work (no trade either)
            self.lane_seen.add(job.id)
            path = self.path(job.project)
            fit, rule = self.try_place(job, k, self.now + protection_s(job.klass, job.min_runtime_s, s))
            if fit is None:
                self.lane_blocked.append((k, job))
                continue
            self.place_lane(job, fit, rule, path, k)

    def place_lane(self, job: PendingJob, fit: Fit, rule: str, path: tuple[str, ...], k: int) -> dict[str, Any]:
        """Place a lane job, funded as the lane funds it; returns the placement's `lane` evidence:
        its qualification (quota, in use, ahead; ADR 0029) and whether the lane funded it."""
        gap = self.funding_gap(job, path)
        self.place(job, fit, rule, self.lane_funds(gap), path, k)
        q = self.qual.get(job.id)
        lane: dict[str, Any] = q.to_dict() if q is not None else {}
        lane["funded_by_lane"] = gap == ENTITLEMENT_USED
        self.placements[-1].evidence["lane"] = lane
        return lane

    @staticmethod
    def lane_funds(gap: str | None) -> bool:
        """contract.lane_funds (the rule's one home; the submit preview calls it too)."""
        return lane_funds(gap)

    # --- phase 3 -----------------------------------------------------------------------------------

    def phase3_place_funded(self) -> None:
        """In global order: funded work is placed where it fits; work that cannot be funded waits
        for phase 5; the first blocked large gang gets a reservation."""
        jobs = self.order.jobs
        index = self.index
        self.unfunded: list[tuple[int, PendingJob]] = []
        self.blocked: list[tuple[int, PendingJob]] = []
        k = 0
        n = len(jobs)
        lane_seen = self.lane_seen
        paths = self.paths
        unfunded = self.unfunded
        now, s = self.now, self.s
        while k < n:
            job = jobs[k]
            if index.total_free == 0 and not self.reserved_has_room():
                break
            if lane_seen and job.id in lane_seen:
                k += 1
                continue
            path = paths.get(job.project)
            if path is None:
                path = self.path(job.project)
            gap = self.funding_gap(job, path)
            if gap is not None:
                unfunded.append((k, job))
                k += 1
                continue
            ends_at = now + protection_s(job.klass, job.min_runtime_s, s)
            fit, rule = self.try_place(job, k, ends_at)
            if fit is not None:
                self.place(job, fit, rule, True, path, k)
                k += 1
                continue
            self.blocked.append((k, job))
            if (
                self.reserved
                and job.id not in self.res_by_job
                and self.eligible_mask(k, ends_at) != (1 << len(self.res_plans)) - 1
                and self.reserved_would_hold(job.gpus)
            ):
                r = self.blocking_reservation(job.gpus, self.eligible_mask(k, ends_at))
                if r is not None:
                    self.blocked_by_reservation[job.id] = self.reservations[r].job_id
            if self.may_reserve(job):
                self.make_reservation(job, path, k)
            k += 1
            if self.nothing_fits_after(k):
                break
        self.tail_start = k
        self.counters["walked"] = k

    def reserved_would_hold(self, gpus: int) -> bool:
        """Would the (unclaimed) reserved nodes hold a job of `gpus` GPUs right now?"""
        if self.reserved_shape is None:
            nodes = [i for i in self.reserved if i not in self.claimed]
            free, cap = self.index.free, self.index.cap
            self.reserved_shape = (
                max((free[i] for i in nodes), default=0),
                sum(cap[i] for i in nodes if free[i] == cap[i]),
            )
        single, whole = self.reserved_shape
        return gpus <= (single if gpus <= self.index.maxcap else whole)

    def blocking_reservation(self, gpus: int, mask: int) -> int | None:
        """ADR 0013: the first reservation a job of `gpus` may not use (not in `mask`) whose
        unclaimed nodes would hold it now — the one its explanation names."""
        for r, nodes in enumerate(self.res_nodes):
            if not mask >> r & 1 and self.room_of(nodes).would_hold(gpus, self.index.maxcap):
                return r
        return None

    def room_of(self, nodes: tuple[int, ...], job_id: str = "", ready_at: float = 0.0,
                domain: tuple[str, ...] = ()) -> ReservedRoom:
        """The free room on one reservation's unclaimed nodes."""
        free, cap = self.index.free, self.index.cap
        mine = [i for i in nodes if i not in self.claimed]
        return ReservedRoom(
            job_id, ready_at, domain,
            max((free[i] for i in mine), default=0),
            sum(cap[i] for i in mine if free[i] == cap[i]),
        )

    def reserved_has_room(self) -> bool:
        return bool(self.reserved) and self.reserved_free() > 0

    def nothing_fits_after(self, k: int) -> bool:
        """Stop walking once no remaining job can fit in the visible capacity (the rest are
        explained in bulk) — unless reserved nodes still have room for backfill."""
        rest_min = self.suffix_min[k]
        index = self.index
        if rest_min <= index.max_free() or rest_min <= index.whole_free:
            return False
        full = (1 << len(self.res_plans)) - 1  # the most any job may use; fewer fail sooner
        fails = [self.fail_reserved.get((single, full), math.inf) for single in (True, False)]
        return not self.reserved_has_room() or rest_min >= max(fails)

    def may_reserve(self, job: PendingJob) -> bool:
        """Issue 3, ADR 0007: a large gang gets a reservation when it is its allocation's head gang
        (the first the walk meets) and fewer than `reservation_allocations` are held."""
        return (
            wants_reservation(job, self.s)
            and job.project not in self.res_projects
            and len(self.res_plans) < self.s.reservation_allocations
        )

    def phase2a_reserve(self) -> None:
        """ADR 0007 "Reservations before the lane": before anything is placed, the head large gang of
        each allocation, in the order (most under-served first), that does not fit now gets a
        reservation, up to `reservation_allocations`; so lane jobs and work behind it in the order
        cannot take the nodes it is waiting for unless they leave before it is due."""
        s = self.s
        if not s.reservations:
            return
        seen: set[str] = set()
        jobs = self.order.jobs
        least = s.reservation_min_gpus  # `wants_reservation` asks for at least this many GPUs
        for k in (k for k, g in enumerate(self.gpus) if g >= least):
            if len(self.res_plans) >= s.reservation_allocations:
                break
            job = jobs[k]
            if job.project in seen or not wants_reservation(job, s):
                continue
            path = self.path(job.project)
            gap = self.funding_gap(job, path)
            if gap == UNFUNDED_BY_REQUEST:
                continue  # ADR 0013: not the allocation's head gang; a funded one behind it may be
            seen.add(job.project)
            if gap is not None:
                continue
            fit, _ = self.try_place(job, k, None)
            if fit is None and self.may_reserve(job):
                self.make_reservation(job, path, k)

    def make_reservation(self, job: PendingJob, path: tuple[str, ...], order_pos: int) -> None:
        """Issue 3: a reservation for a blocked large gang, assembled from protection expiries."""
        index, s, now = self.index, self.s, self.now
        gang_may_preempt = _GangMayPreempt(path, job.gpus, protection_s(job.klass, job.min_runtime_s, s),
                                           self.branches, self.path)
        may_preempt = gang_may_preempt.victim
        may_preempt_project = gang_may_preempt.project
        on_node: list[list[tuple[float, int]]] = [[] for _ in index.ids]
        pos = index.pos
        for r in self.snap.running:
            t = release_time(r, now, s, r.id in self.leaving, may_preempt)
            for nid, g in r.placement:
                i = pos.get(nid)
                if i is not None:
                    on_node[i].append((t, g))
        preemptible = s.fairness_preemption and s.preemptible_after_protection
        for p in self.placements:  # this cycle's placements hold their nodes too
            if not p.funded:
                t = now
            elif preemptible and may_preempt_project(p.project):
                t = p.protected_until
            else:
                t = math.inf
            for nid, g in p.assignments:
                on_node[pos[nid]].append((t, g))
        plan = plan_reservation(job, index, on_node, now)
        self.res_projects.add(job.project)
        if plan is None:
            return
        for i in plan.nodes:
            index.mask(i)
            self.reserved.add(i)
        self.reserved_room = self.reserved_shape = None
        self.fail_reserved.clear()  # the masks now name a different set of reservations
        nodes = tuple(index.ids[i] for i in plan.nodes)
        evidence = {
            "domain": list(plan.domain),
            "level": level_name(self.snap.topology_levels, plan.domain_depth),
            "nodes": list(nodes),
            "ready_at": plan.ready_at,
            "gpus": job.gpus,
            "rank": self.rank(job.project),
        }
        reservation = Reservation(job.id, plan.domain, nodes, plan.ready_at, evidence)
        if self.reservation is None:
            self.reservation = reservation
        self.res_by_job[job.id] = len(self.res_plans)
        self.reservations.append(reservation)
        self.res_plans.append(plan)
        self.res_pos.append(order_pos)
        self.res_nodes.append(plan.nodes)
        self.specials[job.id] = Special(RESERVED, job.gpus, "/".join(plan.domain), plan.ready_at, evidence)

    # --- phase 4 -----------------------------------------------------------------------------------

    def blocked_funded(self) -> Iterator[tuple[int, PendingJob]]:
        """Blocked funded jobs in order: those phase 3 tried, then the rest of the queue."""
        yield from self.blocked
        jobs = self.order.jobs
        lane_seen = self.lane_seen
        suffix_min = self.suffix_min
        paths = self.paths
        for k in range(self.tail_start, len(jobs)):
            if suffix_min[k] >= self.fail_search:
                return
            job = jobs[k]
            if lane_seen and job.id in lane_seen:
                continue
            path = paths.get(job.project)
            if self.funding_gap(job, self.path(job.project) if path is None else path) is None:
                yield k, job

    def phase4_preempt(self) -> None:
        """For blocked funded work, in order, up to `preemption_attempts_per_cycle` searches."""
        s = self.s
        self.fail_search = math.inf
        if not self.snap.running:
            return
        search: VictimSearch | None = self.lane_preempt()
        if s.preemption_attempts_per_cycle == 0:
            return
        attempts = 0
        gang_searches = 0
        for k, job in self.blocked_funded():
            if attempts >= s.preemption_attempts_per_cycle:
                break
            special = self.specials.get(job.id)
            if job.gpus >= self.fail_search or (special is not None and special.reason != RESERVED):
                continue
            path = self.path(job.project)
            if self.funding_gap(job, path) is not None:
                continue
            gang = job.gpus > self.index.maxcap
            if gang and gang_searches >= s.gang_preemption_searches_per_cycle:
                continue
            if search is None:
                search = VictimSearch(
                    self.index, self.snap.running, self.leaving, self.path, self.branches, self.now, s
                )
            gang_searches += gang
            r = self.res_by_job.get(job.id)
            allowed = set(self.res_nodes[r]) if r is not None else None
            plan = search.search(job, path, allowed)
            attempts += 1
            if plan is None:
                self.fail_search = min(self.fail_search, job.gpus)
                continue
            search.take(plan)
            self.commit_preemption(job, path, plan, k)
        self.counters["preemption_searches"] = attempts

    def lane_preempt(self) -> VictimSearch | None:
        """ADR 0007, 0029: a blocked qualified lane job that would be funded takes the GPUs of
        unfunded work first (preemptible at once, short grace), else of funded work out of
        protection under strict improvement, else (`lane_trade`) its own allocation's work. Every
        job in `lane_blocked` is inside its quota, the GPUs being freed for it counted (they are
        its own, "ahead" of the jobs behind it)."""
        if not self.lane_blocked:
            return None
        s = self.s
        search = VictimSearch(self.index, self.snap.running, self.leaving, self.path, self.branches, self.now, s)
        searches = 0
        failed = math.inf  # as in phase 4: a size that found no victims is not searched again
        small = s.lane_victim_max_gpus  # ADR 0007: no big victim for a small job
        no_trade: dict[str, float] = {}  # per project: the smallest size a trade found no victims for
        for k, job in self.lane_blocked:
            path = self.path(job.project)
            if not self.lane_funds(self.funding_gap(job, path)):
                continue  # DESIGN.md: only funded work preempts, in the lane too
            plan = None
            traded = False
            if s.lane_trade and s.lane_cheapest:
                # ADR 0021: one search, cheapest lost work first, the allocation's own work included
                if job.gpus < failed:
                    searches += 1
                    trade = self.trade_of(job, False)
                    plan = search.search(job, path, None, False, small, trade)
                    if plan is None:
                        failed = float(job.gpus)
                    else:
                        traded = any(v.job.project == job.project and not v.leaving for v in plan.victims)
            else:
                if job.gpus < failed:
                    searches += 1
                    plan = search.search(job, path, None, True, small) or search.search(job, path, None, False, small)
                    if plan is None:
                        failed = float(job.gpus)
                traded = plan is None
                if traded:
                    plan = self.trade_plan(search, job, path, no_trade)
            if plan is None:
                continue
            search.take(plan)
            self.commit_preemption(job, path, plan, k, lane=True, trade=traded)
        self.counters["lane_searches"] = searches
        return search

    def trade_of(self, job: PendingJob, own_only: bool) -> Trade:
        s = self.s
        return Trade(job.project, s.lane_trade_funded, s.lane_trade_max_lost_s, own_only, self.now,
                     grace_s(True, s), grace_s(False, s), s.checkpoint_interval_s, s.restart_overhead_s)

    def trade_plan(
        self, search: VictimSearch, job: PendingJob, path: tuple[str, ...], no_trade: dict[str, float]
    ) -> VictimPlan | None:
        """ADR 0021, 0029: a qualified lane job that found no victim under ADR 0007's rules takes its
        own allocation's work (`preemption.trade_victim`), which takes nothing from
        anyone else; the GPUs freed are held for it (`phase2b_held_room`)."""
        s = self.s
        if not s.lane_trade or job.gpus >= no_trade.get(job.project, math.inf):
            return None
        trade = self.trade_of(job, True)
        plan = search.search(job, path, None, False, s.lane_victim_max_gpus, trade)
        if plan is None:
            no_trade[job.project] = float(job.gpus)
        self.counters["lane_trades"] = self.counters.get("lane_trades", 0) + 1
        return plan

    def commit_preemption(
        self, job: PendingJob, path: tuple[str, ...], plan: VictimPlan, k: int, lane: bool = False,
        trade: bool = False,
    ) -> None:
        now, s = self.now, self.s
        for i, _g in plan.nodes:
            self.index.mask(i)  # claimed: the job starts here once the victims stop
            self.claimed.add(i)
        self.reserved_room = self.reserved_shape = None
        self.charge(path, job.gpus)
        until = now
        nodes = [self.index.ids[i] for i, _ in plan.nodes]
        fresh = 0
        for v in plan.victims:
            if v.leaving:
                rq = v.job.preemption_requested_at
                until = max(until, now if rq is None else grace_ends_at(v.job, s))
                continue
            fresh += 1
            grace = grace_s(v.job.funded, s)
            until = max(until, now + grace)
            reason: PreemptionReason = "fair_share" if v.job.funded else "unfunded"
            self.preemptions.append(
                Preemption(
                    victim_id=v.job.id,
                    for_job_id=job.id,
                    reason=reason,
                    grace_ends_at=now + grace,
                    lost_gpu_s=v.cost,
                    evidence={
                        "rule": "lane_trade_own_work" if trade
                        else "strict_improvement" if v.job.funded else "unfunded_preemptible_at_once",
                        "waiting": {
                            "job_id": job.id,
                            "project": job.project,
                            "gpus": job.gpus,
                            "position": k + 1,
                            "rank": self.rank(job.project),
                        },
                        "victim": {
                            "job_id": v.job.id,
                            "project": v.job.project,
                            "funded": v.job.funded,
                            "started_at": v.job.started_at,
                            "protected_until": v.job.protected_until,
                            "protected": False,
                            "last_checkpoint_at": v.job.last_checkpoint_at,
                            "lost_gpu_s": v.cost,
                            "rank": self.rank(v.job.project),
                        },
                        "check": plan.checks.get(v.job.id),
                        "lane": lane,
                        "trade": trade,
                        "plan": {
                            "nodes": nodes,
                            "victims": len(plan.victims),
                            "lost_gpu_s": plan.cost,
                            "nodes_considered": plan.considered,
                        },
                        "now": now,
                    },
                )
            )
        self.room_for.append(job.id)
        self.specials[job.id] = Special(
            PREEMPTING,
            0,
            "one node" if len(nodes) == 1 else "whole nodes",
            until,
            {"victims": len(plan.victims), "new_preemptions": fresh, "nodes": nodes, "lost_gpu_s": plan.cost},
        )

    # --- phase 5 -----------------------------------------------------------------------------------

    def phase5_backfill_unfunded(self) -> None:
        """DESIGN.md "Unfunded occupancy ... runs only on idle capacity, is not charged, and is
        preemptible at once. This keeps the cluster full." Reserved nodes too: no protection."""
        self.backfilling = True
        for k, job in self.unfunded:
            if self.index.total_free == 0 and not self.reserved_has_room():
                break
            fit, rule = self.try_place(job, k, self.now)  # no protection: every reservation
            if fit is not None:
                self.place(job, fit, rule, False, self.path(job.project), k)

    # --- phase 6 -----------------------------------------------------------------------------------

    def phase6_explain(self) -> tuple[Explanations, float, dict[str, Any]]:
        placed = {p.job_id for p in self.placements}
        waiting = [j for j in self.order.jobs if j.id not in placed] if placed else list(self.order.jobs)
        index = self.index
        depth = index.depth
        largest_by_depth = index.largest_domain_by_depth
        room = [index.free[i] for i in sorted(self.reserved - self.claimed)]
        whole_room = sum(
            f for i, f in zip(sorted(self.reserved - self.claimed), room, strict=True) if f == index.cap[i]
        )
        figures = CapacityFigures(
            reserved_for=self.reservation.job_id if self.reservation else None,
            reserved_until=self.reservation.ready_at if self.reservation else None,
            reserved_domain=tuple(self.reservation.domain) if self.reservation else (),
            reserved_max_free=max(room, default=0),
            reserved_whole=whole_room,
            reserved=tuple(
                self.room_of(nodes, res.job_id, res.ready_at, tuple(res.domain))
                for nodes, res in zip(self.res_nodes, self.reservations, strict=True)
            ),
            maxcap=index.maxcap,
            max_free=index.max_free(),
            whole_by_depth=tuple(index.max_whole_at(d) for d in range(depth + 1)),
            depth=depth,
            levels=self.snap.topology_levels,
            total_capacity=self.capacity,
            largest_domain_by_depth=tuple(largest_by_depth),
        )
        ctx = ExplainContext(
            now=self.now,
            waiting=waiting,
            by_project=self.order.by_project,
            specials=self.specials,
            tree=self.snap.tree,
            standing=self.stand,
            settings=self.s,
            funded_in_use=self.funded_in_use,
            quota=self.quota,
            capacity=figures,
            running=self.snap.running,
            index=index,
            leaving=frozenset(self.leaving),
            placements=self.placements,
            blocked_by_reservation=self.blocked_by_reservation,
            qualifications=self.qual,
        )
        ctx.rank_cache.update(self.rank_cache)
        largest = 0  # the largest waiting job (a compiled loop: see `sizes_and_suffix_min`)
        for job in waiting:
            if job.gpus > largest:
                largest = job.gpus
        frag = fragmentation(index, largest)
        free_after = index.physical_free_total()
        evidence = {
            "capacity_gpus": self.capacity,
            "free_gpus_after": free_after,
            "waiting": len(waiting),
            "placed": len(self.placements),
            "preempted": len(self.preemptions),
            "stopped": len(self.stops),
            "largest_waiting_gang": largest,
            "making_room_for": self.room_for,
            "reservations": [
                {"job_id": r.job_id, "nodes": list(r.nodes), "ready_at": r.ready_at} for r in self.reservations
            ],
            "settings": settings_dict(self.s),
            **self.counters,
        }
        return Explanations(ctx), frag, evidence

    # --- run ---------------------------------------------------------------------------------------

    def run(self) -> CycleResult:
        self.phase1_expire_and_drain()
        self.phase2_order_and_fund()
        self.phase2b_held_room()
        self.phase2a_reserve()
        self.phase2b_lane()
        self.phase3_place_funded()
        self.phase4_preempt()
        self.phase5_backfill_unfunded()
        explanations, frag, evidence = self.phase6_explain()
        return CycleResult(
            now=self.now,
            placements=tuple(self.placements),
            preemptions=tuple(self.preemptions),
            stops=tuple(sorted(self.stops, key=lambda x: x.job_id)),
            explanations=explanations,
            reservation=self.reservation,
            fragmentation=frag,
            order=tuple(map(_id_of, self.order.jobs)),
            evidence=evidence,
        )
