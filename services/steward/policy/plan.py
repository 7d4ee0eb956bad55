"""The plan of one scheduling cycle: what every phase reads and writes (policy/phases/).

One `CyclePlan` is built from a `Snapshot`, handed to the phases in the order they run
(policy/cycle.py), and discarded: the capacity index with this cycle's tentative placements, claims
and reservations, the fair-share standing and the order, the funding charged so far, and the
decisions (stops, placements, preemptions) and the special waits the explanations read. It also holds
the primitives more than one phase calls (where a job fits now, placing it with its evidence, the
funding gap, the reserved nodes a job may use); a rule used by one phase lives in that phase.
"""

from __future__ import annotations

import math
from typing import Any

from steward.policy.cluster_share import ClusterOrder, ClusterStanding
from steward.policy.contract import (
    ENTITLEMENT_USED,
    funding_charge,
    funding_gap,
    grace_ends_at,
    lane_funds,
    protected_until,
)
from steward.policy.debug_quota import Qualification
from steward.policy.errors import InvalidNode
from steward.policy.explain import (
    ReservedRoom,
    Special,
)
from steward.policy.model import (
    Node,
    PendingJob,
    Placement,
    Preemption,
    Reservation,
    RunningJob,
    Snapshot,
    Stop,
)
from steward.policy.ordering import Order, Standing
from steward.policy.packing import FirmLoad, pack_single
from steward.policy.placement import CapacityIndex, Fit
from steward.policy.preemption import Branches, branches_on
from steward.policy.reservation import (
    NodeReleases,
    ReservationPlan,
    may_backfill,
)
from steward.policy.routing import (
    Routes,
    choose_cluster,
    chosen_by,
    estimated_wait_s,
    hidden_except,
    left_free,
    releases_on,
    routing_evidence,
    stays_in_room,
)
from steward.policy.sessions import restore_node


class CyclePlan:
    """The plan of one cycle. Private and short-lived: built, run once through the phases, discarded.

    Attributes set by a phase are typed here (a later phase reads them)."""

    index: CapacityIndex  # phase 2
    routes: Routes  # phase 2 (ADR 0057)
    capacity: int  # phase 2
    stand: Standing  # phase 2
    order: Order  # phase 2
    quota: dict[str, float]  # phase 2: entitlement × weighted capacity (ADR 0090)
    funded_in_use: dict[str, float]  # phase 2: funded GPUs in use (what strict improvement projects)
    funded_weighted: dict[str, float]  # phase 2: the same, weighted (what the funding rule reads; ADR 0090)
    branches: Branches  # phase 2
    gpus: list[int]  # phase 2
    suffix_min: list[int]  # phase 2
    unfunded: list[tuple[int, PendingJob]]  # phase 6
    blocked: list[tuple[int, PendingJob]]  # phase 6
    tail_start: int  # phase 6
    fail_search: float  # phase 7

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
        self.going: list[RunningJob] = []  # phase 1: running jobs in their grace or stopped this cycle
        self.rooms: dict[str, list[RunningJob]] = {}  # phase 2 (ADR 0028): jobs in their grace, by beneficiary
        self.holders: list[int] = []  # phase 2 (ADR 0028): positions in the order of jobs that may hold a room
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
        # ADR 0073, several clusters: reservations held per cluster, and the (allocation, cluster) pairs whose
        # head gang has been reserved or tried there (`res_projects` per cluster)
        self.res_on: dict[str, int] = {}
        self.res_tried_on: set[tuple[str, str]] = set()
        self.reserved: set[int] = set()
        self.claimed: set[int] = set()
        self.reserved_room: int | None = None
        self.reserved_shape: tuple[int, int] | None = None
        self.reserved_rooms: list[ReservedRoom] | None = None  # per reservation, made with `reserved_shape`
        self.mask_memo: dict[float, int] = {}  # `eligible_mask` behind every reserved gang, by ends_at
        self.mask_for = 0  # the number of reservations `mask_memo` was made for
        self.res_last = -1  # the position of the last reserved gang in the order
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
        self.funded_weighted_by_project: dict[str, float] = {}  # phase 1 (a weight set): `funding_charge` of each
        # ADR 0090: per node id, the weight of its GPU model (what a funded GPU there is charged), and whether any
        # node's weighs other than 1 (the evidence and the words then say "weighted GPUs")
        # (`funding_weight` asked once per model, and the map left empty when every weight is 1: a node not in it
        # weighs 1, `contract.funding_charge`; this is built every cycle)
        by_model = {m: self.s.funding_weight(m) for m in {n.model for n in snapshot.nodes}}
        self.weights_set = any(w != 1.0 for w in by_model.values())
        self.weight_of: dict[str, float] = (
            {n.id: by_model[n.model] for n in snapshot.nodes} if self.weights_set else {})
        self.lane_seen: set[str] = set()
        self.lane_blocked: list[tuple[int, PendingJob]] = []
        self.qual: dict[str, Qualification] = {}  # ADR 0029: waiting debug work of an allocation
        self.room_for: list[str] = []  # waiting jobs a preemption makes room for (fresh victims or not)
        self.held_rooms: set[str] = set()  # ADR 0028: beneficiaries whose room is held this cycle
        self.releases: dict[int, list[tuple[float, int]]] | None = None  # per node: jobs leaving it
        self.res_releases: NodeReleases | None = None  # per node: when its jobs release it to a reserving gang
        self.churn_refused: list[dict[str, Any]] = []  # preemptions `worth_preempting` refused
        self.load: FirmLoad | None = None  # ADR 0013: gang-aware packing of one-node work
        self.backfilling = False  # phase 8: placing unfunded work
        # ADR 0057: per (cluster, request, shape) the smallest size that did not fit
        self.route_fail: dict[tuple[Any, ...], float] = {}
        self.route_notes: dict[str, dict[str, Any]] = {}  # ADR 0057: a routed job's `routing` evidence
        self.route_releases: dict[int, list[tuple[float, int]]] | None = None
        self.route_victims: dict[str, dict[str, Any]] = {}  # ADR 0071: the clusters a victim search compared
        # ADR 0076, several clusters: each cluster's standing, its funded GPUs running per allocation subtree
        # (charged like `funded_in_use`) and what strict improvement reads there; None: the tree's everywhere
        self.cluster_stand: dict[str, ClusterStanding] | None = None
        self.cluster_running: dict[str, dict[str, float]] = {}
        self.cluster_branches: dict[str, Branches] = {}
        self.cluster_order: ClusterOrder | None = None  # ADR 0080: the order per cluster (None: the tree's)

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

    def rank_of(self, job: PendingJob) -> dict[str, Any]:
        """A waiting job's rank as its decisions' evidence carries it: its project's over the tree (`rank`), and
        with the order per cluster (ADR 0080) the standing it was ordered by (`ClusterOrder.rank`)."""
        if self.cluster_order is None:
            return self.rank(job.project)
        return self.cluster_order.rank(job, self.rank(job.project))

    def funding_gap(self, job: PendingJob, path: tuple[str, ...]) -> str | None:
        """None when the job would be funded now; else why not (contract.funding_gap). Funding moves
        only when something is charged, which clears the per-project memo `fund_ok`."""
        return funding_gap(job, path, self.funded_weighted, self.quota, self.s, self.fund_ok)

    def weighted(self, nodes: tuple[tuple[int, int], ...] | list[tuple[int, int]], gpus: int) -> float:
        """ADR 0090: a job of `gpus` GPUs taking `nodes` ((position, GPUs) in the index) charged at each node's
        model's weight (`contract.funding_charge`), never more than `gpus` of them; GPUs not on a listed node (a
        room still being assembled) at the first node's weight, 1 with none."""
        ids = self.index.ids
        on: list[tuple[str, int]] = []
        rest = gpus
        for i, g in nodes:
            if rest <= 0:
                break
            on.append((ids[i], min(g, rest)))
            rest -= on[-1][1]
        if rest > 0:
            on.append((on[0][0] if on else "", rest))
        return funding_charge(on, self.weight_of)

    def charge(self, path: tuple[str, ...], gpus: int, node: int = -1, weighted: float | None = None) -> None:
        """Funded GPUs of `path`'s allocations now in use (`weighted`: the same charged at their models' weights,
        ADR 0090: `weighted()`; when not given, `gpus` at `node`'s weight); `node` (a position in the index): on
        its cluster too (ADR 0076, when the cycle reads standings per cluster)."""
        if self.fund_ok:
            self.fund_ok.clear()
        if weighted is None:
            weighted = self.weighted(((node, gpus),) if node >= 0 else (), gpus)
        for a in path:
            self.funded_in_use[a] = self.funded_in_use.get(a, 0.0) + gpus
            self.funded_weighted[a] = self.funded_weighted.get(a, 0.0) + weighted
        if self.cluster_stand is not None and node >= 0:
            on = self.cluster_running.setdefault(self.routes.clusters[node], {})
            for a in path:
                on[a] = on.get(a, 0.0) + gpus

    def branches_for(self, cluster: str | None) -> Branches:
        """ADR 0076: what strict improvement reads on `cluster` (the tree's figures with one cluster, or when
        fair share per cluster is off or the cluster is not known)."""
        if self.cluster_stand is None or cluster is None:
            return self.branches
        got = self.cluster_branches.get(cluster)
        if got is None:
            stand = self.cluster_stand.get(cluster)
            if stand is None:
                return self.branches
            got = branches_on(self.branches, stand, self.cluster_running.setdefault(cluster, {}))
            self.cluster_branches[cluster] = got
        return got

    def served_on(self, project: str) -> dict[str, float] | None:
        """ADR 0090: a project's standing on each cluster (ADR 0076's `ClusterStanding.ratio`: its usage there in
        the window ÷ its part of the cluster; infinite where it has no part), what routing chooses by among the
        clusters where a job fits now; None when the cycle reads no standings per cluster or the setting
        `route_by_standing` is off."""
        if self.cluster_stand is None or not self.s.route_by_standing:
            return None
        return {c: st.ratio.get(project, math.inf) for c, st in self.cluster_stand.items()}

    def cluster_of_job(self, job: RunningJob) -> str | None:
        """The cluster a running job's GPUs are in (gangs never span clusters); None when its nodes are gone."""
        pos = self.index.pos
        for nid, _ in job.placement:
            i = pos.get(nid)
            if i is not None:
                return self.routes.clusters[i]
        return None

    def reserved_free(self) -> int:
        """Free GPUs on reserved nodes not claimed by a preemption (cached: changes only when work
        lands on them or a claim is made)."""
        if self.reserved_room is None:
            self.reserved_room = sum(self.index.free[i] for i in self.reserved if i not in self.claimed)
        return self.reserved_room

    def eligible_mask(self, pos: int, ends_at: float | None) -> int:
        """The reservations whose nodes a job at `pos` in the order, protected until `ends_at`, may
        use (bit r for reservation r): those of gangs behind it in the order, and those due no
        earlier than its protection ends (issue 3's backfill rule). None: no reserved node.
        Behind every reserved gang the answer depends on `ends_at` alone (a handful of values in a
        queue): kept per value until a reservation is added."""
        if ends_at is None:
            return 0
        plans = self.res_plans
        if len(plans) != self.mask_for:
            self.mask_memo = {}
            self.mask_for = len(plans)
            self.res_last = max(self.res_pos, default=-1)
        behind_all = pos > self.res_last
        if behind_all:
            got = self.mask_memo.get(ends_at)
            if got is not None:
                return got
        mask = 0
        for r, plan in enumerate(plans):
            if pos <= self.res_pos[r] or may_backfill(ends_at - self.now, self.now, plan.ready_at):
                mask |= 1 << r
        if behind_all:
            self.mask_memo[ends_at] = mask
        return mask

    def try_place(self, job: PendingJob, pos: int, ends_at: float | None,
                  mask: int = -1, room: str | None = None) -> tuple[Fit | None, str]:
        """Where the job goes now (visible capacity first, then the reserved nodes it may use: see
        `eligible_mask`; `mask` when the caller has it already). A routed job (several clusters, or a job
        naming the models or clusters it accepts) is placed by `try_place_routed` (`room`: the cluster a
        room is being made on for it, phase 3)."""
        if self.routes.active and self.routes.routed(job):
            return self.try_place_routed(job, room, pos, ends_at, mask)
        index = self.index
        g = job.gpus
        fit: Fit | None = None
        rule: str = self.s.placement
        if g <= index.maxcap:
            if g < self.fail_single:
                fit, rule = self.fit_single(job)
                if fit is None:
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
            if mask < 0:
                mask = self.eligible_mask(pos, ends_at)
            if mask:
                fit = self.fit_reserved(g, mask)
                if fit is not None:
                    rule = "backfill_reserved"
        return fit, rule

    def fit_single(self, job: PendingJob) -> tuple[Fit | None, str]:
        """A one-node job on the visible nodes: a session's restore node, gang-aware packing (ADR 0013) or
        the placement mode's search, with the rule that chose it."""
        index, g = self.index, job.gpus
        rule: str = self.s.placement
        if job.previous_node is not None:
            i, rule = restore_node(job, index)
        elif self.load is not None:
            i = pack_single(index, g, self.load, not self.backfilling)
        else:
            i = index.find_single(g)
        if i < 0:
            return None, rule
        n = index.nodes[i]
        return Fit(((i, g),), len(n.path) + 1, (*n.path, n.id)), rule

    def fit_here(self, job: PendingJob, cluster: str, nodes: list[int]) -> tuple[Fit | None, str]:
        """Where the job fits now among `nodes` (the others hidden), as `try_place` looks: a one-node job
        when one of them is large enough, else a gang of wholly free ones inside one domain."""
        index, g = self.index, job.gpus
        rule: str = self.s.placement
        maxcap = max((index.cap[i] for i in nodes if index.layout_ready[i]), default=0)
        single = g <= maxcap
        depth = 0 if single else min(job.topology_depth or 0, index.depth)
        key = (cluster, job.gpu_models, job.clusters, single, depth)  # the same nodes for the same request
        if g >= self.route_fail.get(key, math.inf):
            return None, rule
        fit: Fit | None = None
        with hidden_except(index, nodes):
            if single:
                fit, rule = self.fit_single(job)
            else:
                fit = index.find_gang(g, depth)
                rule = f"{rule}_gang"
        if fit is None:
            self.route_fail[key] = g
        return fit, rule

    def try_place_routed(self, job: PendingJob, room: str | None = None, pos: int = -1,
                         ends_at: float | None = None, mask: int = -1) -> tuple[Fit | None, str]:
        """ADR 0057: a routed job fits cluster by cluster (gangs never span clusters; only nodes of models
        and clusters it accepts); among the clusters where it fits now, `routing.choose_cluster` (ADR 0090: with
        `route_by_standing`, its allocation's standing there first; the tightest fit; the name);
        the cluster of the room being made for it first when it fits there (`room`, ADR 0068:
        `stays_in_room`), and when it goes elsewhere the evidence says it moved from there.
        The choice and the other candidates (with an estimate of the wait there) are kept for the
        placement's `routing` evidence. When it fits nowhere on visible nodes, it may backfill reserved nodes
        it accepts under the rule every job follows (`eligible_mask`: it leaves before the reservation is due,
        or it is ahead of the reserved gang; ADR 0071), on one reservation, so in one cluster."""
        index = self.index
        found: list[tuple[int, str, Fit, str]] = []
        tried: list[tuple[str, list[int], bool]] = []
        for cluster, nodes in self.routes.candidates(job):
            fit, rule = self.fit_here(job, cluster, nodes)
            tried.append((cluster, nodes, fit is not None))
            if fit is not None:
                found.append((left_free(index, fit), cluster, fit, rule))
        if not found and self.reserved:
            if mask < 0:
                mask = self.eligible_mask(pos, ends_at)
            if mask:
                allowed = {i for _, nodes, _ in tried for i in nodes}
                fit = self.fit_reserved(job.gpus, mask, allowed,
                                        max((index.cap[i] for i in allowed if index.layout_ready[i]), default=0))
                if fit is not None:
                    on = self.routes.clusters[fit.nodes[0][0]]
                    tried = [(c, nodes, c == on) for c, nodes, _ in tried]
                    found.append((0, on, fit, "backfill_reserved"))
        if not found:
            return None, self.s.placement
        served = self.served_on(job.project)
        options = [(c, left) for left, c, _, _ in found]
        chosen = choose_cluster(options, served)  # ADR 0090: least served, then tightest fit, then the name
        decided_by = chosen_by(options, served, chosen)
        if room is not None:
            kept = stays_in_room(room, [c for _, c, _, _ in found], chosen)
            if kept != chosen:
                chosen, decided_by = kept, "room"
        _, _, fit, rule = next(x for x in found if x[1] == chosen)
        candidates: list[dict[str, Any]] = []
        for cluster, nodes, fits in tried:
            entry: dict[str, Any] = {"cluster": cluster, "models": sorted({index.nodes[i].model for i in nodes}),
                                     "fits_now": fits}
            if served is not None:  # ADR 0090: its allocation's standing there, what the choice read
                r = served.get(cluster, math.inf)
                entry["served"] = None if r == math.inf else r
            if self.cluster_order is not None:  # ADR 0080: its allocation's rank there, as the order reads it
                entry.update(self.cluster_order.candidate(job.project, cluster))
            if fits:
                entry["estimated_wait_s"] = 0.0
            else:
                if self.route_releases is None:
                    self.route_releases = releases_on(self.snap.running, index.pos, self.now, self.s)
                entry["estimated_wait_s"] = estimated_wait_s(index, nodes, job.gpus, self.route_releases, self.now)
            candidates.append(entry)
        moved_from = room if room is not None and room != chosen else None
        self.route_notes[job.id] = routing_evidence(job, chosen, fit, index, candidates, moved_from,
                                                    decided_by if served is not None else None)
        return fit, rule

    def fit_reserved(self, g: int, mask: int, allowed: set[int] | None = None, maxcap: int = 0) -> Fit | None:
        """Best fit among the reserved nodes of the reservations in `mask` (a gang: the wholly free
        nodes of one reservation). Their room only shrinks during a cycle, so a size that did not
        fit is not tried again with the same (or a smaller) set of reservations. `allowed`: only those
        nodes (a routed job's admissible ones, the largest holding `maxcap` GPUs; ADR 0071), not memoised."""
        index = self.index
        single = g <= (index.maxcap if allowed is None else maxcap)
        if allowed is not None:
            return self._fit_reserved(g, mask, single, allowed)
        if g >= self.fail_reserved.get((single, mask), math.inf):
            return None
        fit = self._fit_reserved(g, mask, single, None)
        if fit is None:
            self.fail_reserved[(single, mask)] = g
        return fit

    def _fit_reserved(self, g: int, mask: int, single: bool, allowed: set[int] | None) -> Fit | None:
        index = self.index
        claimed = self.claimed
        if single:
            cands = [
                (index.free[i], i)
                for r, nodes in enumerate(self.res_nodes)
                if mask >> r & 1
                for i in nodes
                if i not in claimed and index.free[i] >= g and (allowed is None or i in allowed)
            ]
            if not cands:
                return None
            _, i = min(cands)
            n = index.nodes[i]
            return Fit(((i, g),), len(n.path) + 1, (*n.path, n.id))
        for r, nodes in enumerate(self.res_nodes):
            if not mask >> r & 1:
                continue
            whole = [i for i in sorted(nodes) if i not in claimed and index.free[i] == index.cap[i] > 0
                     and (allowed is None or i in allowed)]
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
        return None

    def place(self, job: PendingJob, fit: Fit, rule: str, funded: bool, path: tuple[str, ...], pos: int) -> None:
        before = {a: self.funded_weighted.get(a, 0.0) for a in path[-1:]}
        fitting = self.index.nodes_fitting(job.gpus)  # the candidates it was chosen among
        assignments = self.index.commit(fit)
        if self.load is not None:
            self.load.add(fit.nodes, funded)
        self.reserved_room = self.reserved_shape = None
        if funded:
            self.charge(path, job.gpus, fit.nodes[0][0] if fit.nodes else -1, self.weighted(fit.nodes, job.gpus))
        until = protected_until(job, self.now, funded, self.s)
        evidence: dict[str, Any] = {
            "rule": rule,
            "position": pos + 1,
            "fitting_nodes": fitting,
            "domain": list(fit.domain),
            "funded": funded,
            "protected_until": until,
            "rank": self.rank_of(job),
        }
        routing = self.route_notes.pop(job.id, None) if self.route_notes else None
        if routing is not None:
            evidence["routing"] = routing  # ADR 0057: where it could run, where it goes, why
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
            if self.weights_set:  # ADR 0090: both in weighted GPUs (GPUs × the model's weight), and its own charge
                evidence["funding"]["units"] = "weighted_gpus"
                evidence["funding"]["charged"] = self.weighted(fit.nodes, job.gpus) if funded else 0.0
        if self.reserved and any(i in self.reserved for i, _ in fit.nodes):
            for r, nodes in enumerate(self.res_nodes):
                if any(i in nodes for i, _ in fit.nodes):
                    res = self.reservations[r]
                    evidence["reservation"] = {"job_id": res.job_id, "ready_at": res.ready_at}
                    break
        self.placements.append(Placement(job.id, job.project, assignments, funded, until, evidence))

    def place_lane(self, job: PendingJob, fit: Fit, rule: str, path: tuple[str, ...], k: int) -> dict[str, Any]:
        """Place a lane job, funded as the lane funds it; returns the placement's `lane` evidence:
        its qualification (quota, in use, ahead; ADR 0029) and whether the lane funded it."""
        gap = self.funding_gap(job, path)
        self.place(job, fit, rule, lane_funds(gap), path, k)
        q = self.qual.get(job.id)
        lane: dict[str, Any] = q.to_dict() if q is not None else {}
        lane["funded_by_lane"] = gap == ENTITLEMENT_USED
        self.placements[-1].evidence["lane"] = lane
        return lane

    def reserved_would_hold(self, gpus: int) -> bool:
        """Would the (unclaimed) reserved nodes hold a job of `gpus` GPUs right now?"""
        single, whole = self.reserved_now()
        return gpus <= (single if gpus <= self.index.maxcap else whole)

    def reserved_now(self) -> tuple[int, int]:
        """(most free GPUs on one unclaimed reserved node, GPUs on wholly free ones), cached until
        work lands on them or a claim is made (every such change sets `reserved_shape` to None; the
        per-reservation `reserved_rooms` are made again with it)."""
        if self.reserved_shape is None:
            nodes = [i for i in self.reserved if i not in self.claimed]
            free, cap = self.index.free, self.index.cap
            self.reserved_shape = (
                max((free[i] for i in nodes), default=0),
                sum(cap[i] for i in nodes if free[i] == cap[i]),
            )
            self.reserved_rooms = None
        return self.reserved_shape

    def blocking_reservation(self, gpus: int, mask: int, job: PendingJob | None = None) -> int | None:
        """ADR 0013: the first reservation a job of `gpus` may not use (not in `mask`) whose
        unclaimed nodes would hold it now — the one its explanation names. With several clusters, only a
        reservation on a cluster `job` accepts (ADR 0073: another cluster's gang does not keep it waiting)."""
        self.reserved_now()
        rooms = self.reserved_rooms
        if rooms is None:
            rooms = [self.room_of(nodes) for nodes in self.res_nodes]
            self.reserved_rooms = rooms
        maxcap = self.index.maxcap
        accepts = ({c for c, _ in self.routes.candidates(job)}
                   if job is not None and self.routes.multi else None)
        for r, room in enumerate(rooms):
            if accepts is not None and self.reservations[r].cluster not in accepts:
                continue
            if not mask >> r & 1 and room.would_hold(gpus, maxcap):
                return r
        return None

    def room_of(self, nodes: tuple[int, ...], job_id: str = "", ready_at: float = 0.0,
                domain: tuple[str, ...] = (), cluster: str | None = None) -> ReservedRoom:
        """The free room on one reservation's unclaimed nodes."""
        free, cap = self.index.free, self.index.cap
        mine = [i for i in nodes if i not in self.claimed]
        return ReservedRoom(
            job_id, ready_at, domain,
            max((free[i] for i in mine), default=0),
            sum(cap[i] for i in mine if free[i] == cap[i]),
            cluster,
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
        if not self.reserved_has_room():
            return True
        full = (1 << len(self.res_plans)) - 1  # the most any job may use; fewer fail sooner
        fails = self.fail_reserved
        return rest_min >= max(fails.get((True, full), math.inf), fails.get((False, full), math.inf))

    def node_releases(self) -> NodeReleases:
        """Per node, when its running jobs release their GPUs to a reserving gang, less the gang's consent
        (`reservation.NodeReleases`). Built once per cycle, when the first reservation is planned: the running
        jobs and the jobs leaving (phase 1) do not change after that; this cycle's placements do, and each gang
        adds them itself."""
        if self.res_releases is None:
            index = self.index
            self.res_releases = NodeReleases(index.pos, len(index.ids), self.snap.running, self.now, self.s,
                                             self.leaving)
        return self.res_releases

    def release_times(self) -> dict[int, list[tuple[float, int]]]:
        """Per node, (time, GPUs) of the jobs leaving it, soonest first: stops of this cycle now, jobs
        in their grace at its end; not those leaving for a job whose room is held (its GPUs are that
        job's). Built once per cycle, when a preemption is first weighed, from the jobs phase 1 found
        going (`going`: every job stopped this cycle or in its grace), not from every running job."""
        if self.releases is None:
            out: dict[int, list[tuple[float, int]]] = {}
            pos = self.index.pos
            held = self.held_rooms
            s = self.s
            for job in self.going:
                if job.id in self.leaving:
                    t = self.now
                elif job.preemption_requested_at is not None and job.claimed_for not in held:
                    t = grace_ends_at(job, s)
                else:
                    continue
                for nid, g in job.placement:
                    i = pos.get(nid)
                    if i is not None:
                        out.setdefault(i, []).append((t, g))
            for lst in out.values():
                lst.sort()
            self.releases = out
        return self.releases
