"""The budget arithmetic: the one home of DESIGN.md "Org tree and allocations" (entitlement down the tree),
"Usage window" and "Owed vs delivered" (owed per hour, delivered, the ratio, the window and the period).

Every reader calls these functions: the ledger's period close (`steward.domain.periods`), the period-close
workflow, the API's read model (`steward.api.figures`: the allocation tree, the overview, the budget report),
the what-if, the simulator's metrics, the CLI and the demo summary (both read the API). Pure: no IO, no clock;
times are arguments (epoch seconds), amounts are GPU-seconds.

The figures of one allocation over an interval [start, end), summed hour by hour (hours counted from
`start`):
- entitled  = entitlement × registered capacity, integrated over the interval (share and node changes take
  effect from their event time);
- demand    = GPU-seconds its jobs wanted (from submission to their end, waiting or running);
- owed      = Σ over hours of min(entitled in the hour, demand in the hour)  (`owed_gpu_s`);
- delivered = GPU-seconds its jobs ran (every run, funded or not);
- ratio     = delivered ÷ owed, as it is (above 1 is over-delivery, `over_delivered`; never capped);
- an inner node's demand and delivery are the sums of its subtree's projects.
All of them are in weighted GPU-seconds (ADR 0057, 0062; one home: `Prices` and `job_levels` below): capacity
is Σ GPUs × the weight of their model, a run is charged at the weight of the model of the nodes it ran on, and
a waiting job's demand at the lowest weight among the models it accepts that have registered capacity; each
at the weights in force at that moment (a `PolicySet` of `gpu_model_weights` takes effect from its event
time; past usage is never re-priced). With no weights set (every weight 1.0) they are plain GPU-seconds.
An allocation pinned to a cluster (ADR 0067) is owed at most what that cluster could deliver: its owed per hour
is min(entitled, demand, the pin's cluster's weighted capacity), its jobs' waiting demand is valued at the
cheapest place of the pin's cluster they accept, and its delivered is where its jobs ran (never dropped).
The cluster-wide figure (`delivered_of_owed`) credits each project at most what it was owed, so one
project's over-delivery never hides another's shortfall.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from steward.domain.clusters import (
    DEFAULT_CLUSTER,
    WEIGHTS_SETTING,
    admits,
    cluster_name,
    effective_pin,
    pinned_clusters,
)
from steward.domain.commands import ROOT
from steward.domain.policy_settings import model_weight

HOUR_S = 3600.0
DAY_S = 86400.0
DEFAULT_WINDOW_S = 7 * DAY_S
FIGURES = ("owed_gpu_s", "delivered_gpu_s", "demand_gpu_s", "entitled_gpu_s")
# events that end a job's demand (it no longer waits nor runs) and those that end a run
DEMAND_ENDS = ("JobCompleted", "JobFailed", "JobCancelled", "SessionRestored")
RUN_ENDS = ("JobCompleted", "JobFailed", "JobCancelled", "JobPreempted", "JobLost")
# the events that change what the tree is entitled to: shares and pins, nodes (registered, retired: ADR 0078),
# GPU model weights
TREE_EVENTS = ("AllocationsSet", "NodeRegistered", "NodeRetired", "PolicySet")


# -- the rules ---------------------------------------------------------------------------------------------


def _time(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def run_start(payload: Mapping[str, Any], at: float) -> float:
    """DESIGN.md "Owed vs delivered": a run is delivered from when its process started by the executor's clock
    (`JobStarted.started_at`; Slurm's StartTime under Slurm, issue 23), never later than the start was
    recorded (`at`); without a time of its own, from `at`."""
    started = _time(payload.get("started_at"))
    return started if started is not None and started <= at else at


def run_end(kind: str, payload: Mapping[str, Any], at: float, start: float) -> float:
    """...to when it ended by the executor's clock (`ended_at` of `JobCompleted`/`JobFailed`, or of a
    preemption's `evidence`: Slurm's EndTime under Slurm), within [start, at]; else to when its end was recorded.
    So Steward's delivered GPU-seconds are the executor's (Slurm's accounting of the same jobs agrees), not
    the executor's report delay later."""
    if kind == "JobPreempted":
        evidence = payload.get("evidence")
        ended = _time(evidence.get("ended_at")) if isinstance(evidence, Mapping) else None
    else:
        ended = _time(payload.get("ended_at"))
    return ended if ended is not None and start <= ended <= at else max(at, start)


def owed_gpu_s(entitled_gpu_s: float, demand_gpu_s: float) -> float:
    """DESIGN.md "Owed vs delivered": for each allocation and hour, owed = min(entitlement × capacity, that
    allocation's demand in the hour). Both arguments are GPU-seconds of the same hour."""
    return min(entitled_gpu_s, demand_gpu_s)


def capped_owed(entitled_gpu_s: float, demand_gpu_s: float, ceiling: float | None) -> float:
    """ADR 0067: a pinned allocation's owed, min(entitled, demand, `ceiling`: what its pin's cluster could
    deliver in the same stretch, weighted); `ceiling` None (unpinned) is `owed_gpu_s`."""
    owed = owed_gpu_s(entitled_gpu_s, demand_gpu_s)
    return owed if ceiling is None else min(owed, ceiling)


def owed_over_hours(entitled: Sequence[float] | float, demand: Sequence[float], ceiling: float | None = None) -> float:
    """Owed summed over hours: `demand` per hour, `entitled` per hour (or one figure for every hour);
    `ceiling`: a pinned allocation's most per hour (`capped_owed`)."""
    if isinstance(entitled, (int, float)):
        return sum(capped_owed(entitled, d, ceiling) for d in demand)
    return sum(capped_owed(e, d, ceiling) for e, d in zip(entitled, demand, strict=False))


def ratio(delivered_gpu_s: float, owed_gpu_s_: float) -> float | None:
    """delivered ÷ owed, as it is (None when nothing was owed). Above 1 is over-delivery: an allocation ran
    more than it was owed (on idle capacity, or ahead of its share); it is shown, never capped."""
    return delivered_gpu_s / owed_gpu_s_ if owed_gpu_s_ > 0 else None


def over_delivered(r: float | None) -> bool:
    """Whether a ratio is over-delivery (more delivered than owed)."""
    return r is not None and r > 1.0


def burn(running_gpus: float, entitled_gpus: float) -> float | None:
    """An allocation's burn: the GPUs its subtree runs on now ÷ the GPUs it is entitled to now (its
    entitlement × the ready capacity); 1.0 is exactly its share, None when it is entitled to nothing. The
    API's figure (`Allocation.burn`) and the notifications' forecast (`burn_forecast`) both take it from here."""
    return running_gpus / entitled_gpus if entitled_gpus > 0 else None


def over_entitlement(b: float | None) -> bool:
    """Whether a burn forecasts exceeding the entitlement: kept at this rate, the allocation uses more than
    it is entitled to (the UI marks it; a manager may be told, issue 24)."""
    return b is not None and b > 1.0


def credited_gpu_s(delivered_gpu_s: float, owed_gpu_s_: float) -> float:
    """The part of a delivery that counts towards what was owed (at most the owed amount)."""
    return min(delivered_gpu_s, owed_gpu_s_)


def delivered_of_owed(rows: Iterable[tuple[float, float]]) -> float | None:
    """The headline fairness figure over several allocations ((owed, delivered) each): Σ credited ÷ Σ owed,
    each allocation credited at most its owed amount (None when nothing was owed)."""
    owed = got = 0.0
    for o, d in rows:
        owed += o
        got += credited_gpu_s(d, o)
    return got / owed if owed > 0 else None


def credited_fraction(delivered_gpu_s: float, owed_gpu_s_: float) -> float | None:
    """One allocation's `delivered_of_owed` (its ratio capped at 1): the simulator's fairness score per
    allocation and period (`owed_delivered_mean`/`_min` average these, so over-delivery earns no credit)."""
    return delivered_of_owed([(owed_gpu_s_, delivered_gpu_s)])


# -- the window and the period -----------------------------------------------------------------------------


def window_bounds(now: float, window_s: float = DEFAULT_WINDOW_S) -> tuple[float, float]:
    """DESIGN.md "Usage window": the sliding window [now - window, now)."""
    return now - window_s, now


def counted_before(at: float, end: float) -> bool:
    """DESIGN.md "Usage window": figures over [start, end) count the events recorded before `end`; one recorded at
    `end` belongs to the next window. The batch computation (`period_figures`) and the streaming fold of the API
    (`steward.api.figures.OverviewFold`, ADR 0075) both cut the log here."""
    return at < end


def period_bounds(at: float, period_s: float) -> tuple[float, float]:
    """The last whole period that ended at or before `at` (periods are aligned to multiples of
    `period_s` from the epoch, so every closer agrees on them)."""
    end = math.floor(at / period_s) * period_s
    return end - period_s, end


def current_period(now: float, period_s: float) -> tuple[float, float]:
    """The period `now` is in, up to `now`: [the last boundary, now)."""
    return math.floor(now / period_s) * period_s, now


def period_id(start: float, end: float) -> str:
    """A readable, unique name: `20261130T000000Z-20261201T000000Z`."""
    fmt = "%Y%m%dT%H%M%SZ"
    return f"{datetime.fromtimestamp(start, UTC).strftime(fmt)}-{datetime.fromtimestamp(end, UTC).strftime(fmt)}"


def describe_interval(start: float, end: float, now: float | None = None) -> str:
    """The words a surface prints next to a figure: "last 7 days" for a window ending now, otherwise the
    dates, e.g. "1 Dec 00:00 – 2 Dec 00:00 UTC"."""
    length = end - start
    if now is not None and abs(end - now) < 1.0:
        if length % DAY_S == 0:
            n = int(length // DAY_S)
            return "last day" if n == 1 else f"last {n} days"
        if length % HOUR_S == 0:
            n = int(length // HOUR_S)
            return "last hour" if n == 1 else f"last {n} hours"
    def fmt(t: float) -> str:
        d = datetime.fromtimestamp(t, UTC)
        return f"{d.day} {d.strftime('%b %H:%M')}"
    return f"{fmt(start)} – {fmt(end)} UTC"


# -- entitlement down the tree and the figures of an interval --------------------------------------------


Place = tuple[str, str]
"""Where GPU-seconds were delivered or are valued: (cluster, GPU model). `NOWHERE` is demand while no
registered node could take the job (no node yet, or none of the models and clusters it accepts)."""
NOWHERE: Place = ("", "")
Placement = tuple[tuple[str, str, int], ...]
"""The GPUs of one run by where they are: (cluster, model, GPUs) per distinct place, sorted."""
Level = tuple[float, float, float, Place, bool]
"""A job's weighted GPUs over [start, end) at a place; `moved` levels come in pairs that cancel in a total
(demand moved from where it was valued to where it ran, at the same weight) and count only in the split."""


@dataclass(slots=True)
class Prices:
    """The weights in force over time and where each node is (DESIGN.md "Clusters and GPU models"): fed
    `NodeRegistered`, `NodeRetired` and `PolicySet` in log order (`see`), it says what a GPU-second costs at any
    moment. `epochs` are (from, weights, places with registered capacity), a new one at each weight change, each
    first node of a (cluster, model) and each retirement of a place's last node (ADR 0078); before the first, no
    weight is set and no place is registered. `nodes` keeps where every node ever registered was (a past
    placement on a retired node is still priced)."""

    nodes: dict[str, Place] = field(default_factory=dict)
    epochs: list[tuple[float, dict[str, float], frozenset[Place]]] = field(default_factory=list)
    retired: set[str] = field(default_factory=set)  # the nodes retired and not registered again

    def see(self, kind: str, p: Mapping[str, Any], at: float) -> None:
        """Take one event (others are ignored)."""
        weights, places = self.epochs[-1][1:] if self.epochs else ({}, frozenset[Place]())
        if kind == "NodeRegistered":
            place = (cluster_name(str(p.get("cluster") or "")), str(p.get("gpu_model") or ""))
            self.nodes[str(p["node_id"])] = place
            self.retired.discard(str(p["node_id"]))
            if place not in places:
                self._push(at, weights, places | {place})
        elif kind == "NodeRetired" and (gone := self.nodes.get(str(p["node_id"]))) is not None:
            self.retired.add(str(p["node_id"]))
            if gone in places and all(place != gone for n, place in self.nodes.items() if n not in self.retired):
                self._push(at, weights, places - {gone})
        elif kind == "PolicySet":
            changed = p.get("changed")
            if isinstance(changed, Mapping) and isinstance(changed.get(WEIGHTS_SETTING), Mapping):
                self._push(at, {str(k): float(v) for k, v in changed[WEIGHTS_SETTING].items()}, places)

    def _push(self, at: float, weights: dict[str, float], places: frozenset[Place]) -> None:
        if self.epochs and self.epochs[-1][0] >= at:
            self.epochs[-1] = (self.epochs[-1][0], weights, places)
        else:
            self.epochs.append((at, weights, places))

    def segments(self, a: float, b: float) -> Iterable[tuple[float, float, dict[str, float], frozenset[Place]]]:
        """[a, b) cut where the prices change: (lo, hi, weights, places) in time order."""
        k = 0
        while k < len(self.epochs) and self.epochs[k][0] <= a:
            k += 1
        weights, places = self.epochs[k - 1][1:] if k else ({}, frozenset[Place]())
        lo = a
        while lo < b:
            hi = min(b, self.epochs[k][0]) if k < len(self.epochs) else b
            if hi > lo:
                yield lo, hi, weights, places
            if k < len(self.epochs):
                weights, places = self.epochs[k][1:]
                k += 1
            lo = hi

    def placement(self, assignments: Mapping[str, Sequence[int]]) -> Placement:
        """Where a placement's GPUs are (`JobPlaced.assignments`: node -> GPU indices)."""
        where: dict[Place, int] = {}
        for node, idx in assignments.items():
            place = self.nodes.get(str(node), (DEFAULT_CLUSTER, ""))
            where[place] = where.get(place, 0) + len(idx)
        return tuple(sorted((c, m, g) for (c, m), g in where.items()))


def weight(weights: Mapping[str, float], model: str) -> float:
    """DESIGN.md "Clusters and GPU models": budget units per GPU-hour of `model` at these weights
    (`policy_settings.model_weight`, the rule the scheduler's usage reads too)."""
    return model_weight(weights, model)


def cheapest(weights: Mapping[str, float], places: Iterable[Place], gpu_models: Sequence[str],
             clusters: Sequence[str]) -> tuple[float, Place]:
    """DESIGN.md "Owed when demand can run only on some models" (ADR 0057, 0062): waiting demand is valued at
    the lowest weight among the places with registered capacity the job accepts (the cheapest service that
    would satisfy it; ties: the first cluster, then model, by name); weight 1 and `NOWHERE` when none."""
    best = min(((weight(weights, m), (c, m)) for c, m in places if admits(gpu_models, clusters, m, c)),
               default=None)
    return best if best is not None else (1.0, NOWHERE)


Pins = Sequence[tuple[float, str]]
"""A tree node's effective pin over time (ADR 0067): (from, cluster or "" for none) at each change, in time
order (`pin_history`); before the first, none."""


def pin_history(events: Iterable[tuple[str, Mapping[str, Any], float]]) -> dict[str, list[tuple[float, str]]]:
    """ADR 0067: each tree node's effective pin (its own, or its nearest pinned ancestor's:
    `clusters.effective_pin`) at each change, from the log's `AllocationsSet` events in log order. Only the
    nodes ever pinned are in it (a log without pins gives {})."""
    parents: dict[str, str] = {}
    own: dict[str, str] = {}
    out: dict[str, list[tuple[float, str]]] = {}
    for kind, p, at in events:
        if kind != "AllocationsSet":
            continue
        for child in p["shares"]:
            parents[str(child)] = str(p["parent"])
        pins: Mapping[str, Any] = p.get("pins") or {}
        for child, pin in pins.items():
            if pin:
                own[str(child)] = str(pin)
            else:
                own.pop(str(child), None)
        if not own and not out:
            continue
        for node in parents:
            now = effective_pin(node, parents, own)
            spans = out.get(node)
            if (spans[-1][1] if spans else "") != now:
                out.setdefault(node, []).append((at, now))
    return out


def pin_cuts(pins: Pins, a: float, b: float) -> Iterable[tuple[float, float, str]]:
    """[a, b) cut where the pin changes: (lo, hi, pin) in time order."""
    pin = ""
    k = 0
    while k < len(pins) and pins[k][0] <= a:
        pin = pins[k][1]
        k += 1
    lo = a
    while lo < b:
        hi = min(b, pins[k][0]) if k < len(pins) else b
        if hi > lo:
            yield lo, hi, pin
        if k < len(pins):
            pin = pins[k][1]
            k += 1
        lo = hi


def _priced(prices: Prices, a: float, b: float,
            pins: Pins) -> Iterable[tuple[float, float, dict[str, float], frozenset[Place], str]]:
    for lo, hi, weights, places in prices.segments(a, b):
        if not pins:
            yield lo, hi, weights, places, ""
            continue
        for plo, phi, pin in pin_cuts(pins, lo, hi):
            yield plo, phi, weights, places, pin


def job_levels(gpus: int, request: tuple[Sequence[str], Sequence[str]], demand: Iterable[tuple[float, float]],
               runs: Iterable[tuple[float, float, Placement]], prices: Prices,
               pins: Pins = ()) -> tuple[list[Level], list[Level]]:
    """One job's weighted demand and delivery as levels (start, end, weighted GPUs, place, moved): the one home
    of "usage charged at the model's weight" for the books. `request` is (gpu_models, clusters) it accepts;
    `demand` its intervals waiting or running, `runs` its runs with where they ran (within its demand).
    Demand is valued at `cheapest` over each demand interval; over a run it is moved to where the run is and
    re-valued at the run's weight, so a running job's demand equals its delivery. `pins`: its allocation's pin
    over time (ADR 0067): while pinned, the job accepts the pin's cluster only (`pinned_clusters`)."""
    models, asked = request
    wanted: list[Level] = []
    ran: list[Level] = []
    for a, b in demand:
        for lo, hi, weights, places, pin in _priced(prices, a, b, pins):
            w, place = cheapest(weights, places, models, pinned_clusters(asked, pin))
            last = wanted[-1] if wanted else None
            if last is not None and last[1] == lo and last[2:] == (gpus * w, place, False):
                wanted[-1] = (last[0], hi, *last[2:])  # the same price on both sides of an epoch: one level
            else:
                wanted.append((lo, hi, gpus * w, place, False))
    for a, b, placement in runs:
        for lo, hi, weights, places, pin in _priced(prices, a, b, pins):
            w_min, valued = cheapest(weights, places, models, pinned_clusters(asked, pin))
            for c, m, g in placement or ((*NOWHERE, gpus),):  # a run with no placement seen: weight 1
                w = weight(weights, m)
                ran.append((lo, hi, g * w, (c, m), False))
                if w != w_min:  # the run's demand at the run's weight instead of the cheapest one
                    wanted.append((lo, hi, g * (w - w_min), (c, m), False))
                    wanted.append((lo, hi, g * w_min, (c, m), True))
                    wanted.append((lo, hi, -g * w_min, valued, True))
                elif (c, m) != valued:
                    wanted.append((lo, hi, g * w, (c, m), True))
                    wanted.append((lo, hi, -g * w, valued, True))
    return wanted, ran


def tree_changes(events: Iterable[tuple[str, Mapping[str, Any], float]],
                 end: float) -> list[tuple[float, str, float, str]]:
    """The changes `entitled_gpu_s` applies, from the log's `TREE_EVENTS` before `end`: (at, "share", share,
    "parent\\x00child"), (at, "node", weighted GPUs (0 once retired),
    "cluster\\x00node id") or, once any node is pinned (ADR 0067), (at, "pin", 0, "tree node\\x00cluster or ''") at
    each change of a tree node's effective pin; a weight change re-weighs every node of the models it changes,
    from its event time."""
    changes: list[tuple[float, str, float, str]] = []
    nodes: dict[str, tuple[int, str]] = {}
    keys: dict[str, str] = {}
    weights: dict[str, float] = {}
    parents: dict[str, str] = {}
    own: dict[str, str] = {}
    pinned: dict[str, str] = {}
    for kind, p, at in events:
        if at >= end:
            break
        if kind == "AllocationsSet":
            for child, share in p["shares"].items():
                changes.append((at, "share", float(share), f"{p['parent']}\x00{child}"))
                parents[str(child)] = str(p["parent"])
            for child, pin in (p.get("pins") or {}).items():
                if pin:
                    own[str(child)] = str(pin)
                else:
                    own.pop(str(child), None)
            if own or pinned:
                for node in parents:
                    now = effective_pin(node, parents, own)
                    if pinned.get(node, "") != now:
                        pinned[node] = now
                        changes.append((at, "pin", 0.0, f"{node}\x00{now}"))
        elif kind == "NodeRegistered":
            node, gpus, model = str(p["node_id"]), int(p["gpus"]), str(p.get("gpu_model") or "")
            key = f"{cluster_name(str(p.get('cluster') or ''))}\x00{node}"
            if keys.get(node, key) != key:  # registered again in another cluster: its GPUs move there
                changes.append((at, "node", 0.0, keys[node]))
            nodes[node] = (gpus, model)
            keys[node] = key
            changes.append((at, "node", gpus * weight(weights, model), key))
        elif kind == "NodeRetired" and str(p["node_id"]) in nodes:  # its GPUs leave the capacity (ADR 0078)
            node = str(p["node_id"])
            changes.append((at, "node", 0.0, keys.pop(node)))
            nodes.pop(node)
        elif kind == "PolicySet":
            changed = p.get("changed")
            if isinstance(changed, Mapping) and isinstance(changed.get(WEIGHTS_SETTING), Mapping):
                before = weights
                weights = {str(k): float(v) for k, v in changed[WEIGHTS_SETTING].items()}
                for node, (gpus, model) in sorted(nodes.items()):
                    if weight(before, model) != weight(weights, model):
                        changes.append((at, "node", gpus * weight(weights, model), keys[node]))
    return changes


@dataclass(slots=True)
class _JobLife:
    project: str
    gpus: int
    request: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    placement: Placement = ()
    demand: list[tuple[float, float]] = field(default_factory=list)
    runs: list[tuple[float, float, Placement]] = field(default_factory=list)
    wanting_since: float | None = None
    running_since: float | None = None


def _overlap(intervals: Iterable[tuple[float, float]], lo: float, hi: float) -> float:
    return sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in intervals)


def entitlements(shares: Mapping[str, tuple[str, float]], root: str = ROOT) -> dict[str, float]:
    """DESIGN.md "Org tree and allocations": a node's entitlement is the product of the shares on its
    path (`shares`: node -> (parent, share); the root and unknown parents count as 1). The ledger's, the
    API's and the scheduler's trees (`steward.policy.tree`, whose root is `root`) all take it from here."""
    memo: dict[str, float] = {}

    def ent(name: str, depth: int = 0) -> float:
        if name == root or name not in shares or depth > 16:
            return 1.0
        if name not in memo:
            parent, share = shares[name]
            memo[name] = share * ent(parent, depth + 1)
        return memo[name]

    return {n: ent(n) for n in shares}


def entitled_gpu_s(lo: float, hi: float, changes: Sequence[tuple[float, str, float, str]], i: int,
                   shares: dict[str, tuple[str, float]], nodes: dict[str, float],
                   pins: dict[str, str] | None = None,
                   caps: dict[str, float] | None = None) -> tuple[dict[str, float], float, int]:
    """DESIGN.md "Owed vs delivered" (entitlement × capacity) over [lo, hi): the GPU-seconds each tree node
    is entitled to, summed over the stretches between changes. `changes` are (at, kind, value, name) in
    time order (`tree_changes`), kind "share" (name "parent\\x00child") or a node's weighted GPUs;
    those due from index `i` are applied to `shares`, `nodes` and `pins` (tree node -> effective pin) in place.
    With `caps`, ADR 0067: each tree node pinned at some moment of [lo, hi) gets what its pin's cluster could
    deliver (its weighted capacity; the whole capacity while unpinned), the ceiling of its owed (`add_owed`).
    Returns (entitled per node, capacity GPU-s, next index)."""
    entitled: dict[str, float] = {}
    capacity = 0.0
    seg = lo
    pins = {} if pins is None else pins
    spans: list[tuple[float, float, dict[str, float], dict[str, str]]] = []  # stretches with a pin
    while seg < hi:
        while i < len(changes) and changes[i][0] <= seg:
            _at, kind, value, name = changes[i]
            if kind == "share":
                parent, child = name.split("\x00", 1)
                shares[child] = (parent, float(value))
            elif kind == "pin":
                node, pin = name.split("\x00", 1)
                pins[node] = pin
            else:
                nodes[name] = value
            i += 1
        seg_end = min(hi, changes[i][0]) if i < len(changes) else hi
        total = sum(nodes.values())
        gpu_s = total * (seg_end - seg)
        capacity += gpu_s
        for name, ent in entitlements(shares).items():
            entitled[name] = entitled.get(name, 0.0) + ent * gpu_s
        if caps is not None and any(pins.values()):
            per_cluster: dict[str, float] = {}
            for key, value in nodes.items():
                cluster = key.split("\x00", 1)[0]
                per_cluster[cluster] = per_cluster.get(cluster, 0.0) + value
            spans.append((seg_end - seg, total, per_cluster, dict(pins)))
        seg = seg_end
    if caps is not None and spans:
        for name in {n for _l, _t, _c, p in spans for n, pin in p.items() if pin}:
            caps[name] = sum(length * (per.get(p[name], 0.0) if p.get(name) else total)
                             for length, total, per, p in spans)
    return entitled, capacity, i


Split = dict[str, dict[Place, list[float]]]
"""Per tree node and place: [owed, delivered, demand] weighted GPU-seconds (the split of ADR 0062)."""


def add_owed(out: dict[str, dict[str, float]], entitled: Mapping[str, float], demand: dict[str, float],
             delivered: dict[str, float], shares: Mapping[str, tuple[str, float]],
             split: Split | None = None, demand_at: Mapping[str, Mapping[Place, float]] | None = None,
             delivered_at: Mapping[str, Mapping[Place, float]] | None = None,
             caps: Mapping[str, float] | None = None) -> None:
    """DESIGN.md "Owed vs delivered" for one stretch: owed = min(entitled, demand) per tree node, where an
    inner node's demand and delivery are the sums of its subtree's projects (`demand`/`delivered` name the
    projects and are extended in place); the stretch's figures are added to `out`'s rows (FIGURES).
    With `split`, the same by place (cluster, model) from the projects' `demand_at` and `delivered_at`: a
    node's owed is split as its demand is (ADR 0062), its delivery where it ran. `caps`: the ceiling of a pinned
    node's owed in the stretch (ADR 0067: what its pin's cluster could deliver, `entitled_gpu_s`)."""
    caps = caps or {}
    for project in list(demand):  # inner nodes: the sums of their subtree's projects
        node = project
        while node in shares:
            node = shares[node][0]
            if node in shares:
                demand[node] = demand.get(node, 0.0) + demand[project]
                delivered[node] = delivered.get(node, 0.0) + delivered[project]
    for name, ent_gpu_s in entitled.items():
        row = out.setdefault(name, dict.fromkeys(FIGURES, 0.0))
        d = demand.get(name, 0.0)
        owed = capped_owed(ent_gpu_s, d, caps.get(name))
        row["owed_gpu_s"] += owed
        row["delivered_gpu_s"] += delivered.get(name, 0.0)
        row["demand_gpu_s"] += d
        row["entitled_gpu_s"] += ent_gpu_s
    if split is None or demand_at is None or delivered_at is None:
        return
    for project in set(demand_at) | set(delivered_at):
        wanted, ran = demand_at.get(project, {}), delivered_at.get(project, {})
        node = project
        while True:
            if node in entitled:
                d = demand.get(node, 0.0)
                owed = capped_owed(entitled[node], d, caps.get(node))
                rows = split.setdefault(node, {})
                for place, v in wanted.items():
                    r = rows.setdefault(place, [0.0, 0.0, 0.0])
                    r[0] += owed * v / d if d > 0 else 0.0
                    r[2] += v
                for place, v in ran.items():
                    rows.setdefault(place, [0.0, 0.0, 0.0])[1] += v
            if node not in shares:
                break
            node = shares[node][0]


def level_sum(levels: Iterable[Level], lo: float, hi: float) -> float:
    """The weighted GPU-seconds of levels inside [lo, hi) (moved levels cancel: left out). Levels of one
    value are summed as value × their overlap, so with every weight 1.0 the figure is the plain one."""
    by_value: dict[float, list[tuple[float, float]]] = {}
    for a, b, v, _place, moved in levels:
        if not moved:
            by_value.setdefault(v, []).append((a, b))
    return sum(v * _overlap(spans, lo, hi) for v, spans in by_value.items())


def level_split(levels: Iterable[Level], lo: float, hi: float, into: dict[Place, float]) -> None:
    """Add the weighted GPU-seconds of levels inside [lo, hi) to `into` by place (moved levels included)."""
    for a, b, v, place, _moved in levels:
        o = max(0.0, min(b, hi) - max(a, lo))
        if o > 0:
            into[place] = into.get(place, 0.0) + v * o


def period_figures(
    history: Iterable[tuple[str, Mapping[str, Any], float]], start: float, end: float, hour_s: float = HOUR_S,
    split: Split | None = None,
) -> tuple[dict[str, dict[str, float]], float]:
    """Owed, delivered, demand and entitled weighted GPU-seconds per allocation over [start, end), hour by
    hour, from `history` ((event type, payload, recorded_at) in log order). Returns (figures, capacity).
    With `split`, each tree node's owed, delivered and demand by (cluster, model) are added to it."""
    tree: list[tuple[str, Mapping[str, Any], float]] = []
    prices = Prices()
    jobs: dict[str, _JobLife] = {}
    for kind, p, at in history:
        if not counted_before(at, end):
            break
        if kind in TREE_EVENTS:
            tree.append((kind, p, at))
            prices.see(kind, p, at)
        elif kind == "JobSubmitted":
            jobs[p["job_id"]] = _JobLife(p["project"], int(p["gpus"]), request_of(p), wanting_since=at)
        elif (life := jobs.get(p.get("job_id", ""))) is not None:
            if kind == "JobPlaced":
                life.placement = prices.placement(p.get("assignments") or {})
            if kind == "JobStarted":
                life.running_since = run_start(p, at)
            if kind == "JobRequeued" and life.wanting_since is None:
                life.wanting_since = at
            if kind in RUN_ENDS and life.running_since is not None:
                life.runs.append((life.running_since, run_end(kind, p, at, life.running_since), life.placement))
                life.running_since = None
            if (kind in DEMAND_ENDS or (kind == "JobPreempted" and not p.get("requeue", True))) \
                    and life.wanting_since is not None:
                life.demand.append((life.wanting_since, at))
                life.wanting_since = None
    for life in jobs.values():
        if life.running_since is not None:
            life.runs.append((life.running_since, end, life.placement))
        if life.wanting_since is not None:
            life.demand.append((life.wanting_since, end))
    changes = tree_changes(tree, end)
    pinned = pin_history(tree)

    shares: dict[str, tuple[str, float]] = {}
    nodes: dict[str, float] = {}
    pins: dict[str, str] = {}
    levels: dict[str, tuple[list[Level], list[Level]]] = {}
    for life in jobs.values():
        wanted, ran = job_levels(life.gpus, life.request, life.demand, life.runs, prices,
                                 pinned.get(life.project, ()))
        mine = levels.setdefault(life.project, ([], []))
        mine[0].extend(wanted)
        mine[1].extend(ran)
    out: dict[str, dict[str, float]] = {}
    capacity_total = 0.0
    i = 0
    lo = start
    while lo < end:
        hi = min(lo + hour_s, end)
        # DESIGN.md "Allocation changes ... take effect from their event time": within the hour, entitled
        # GPU-seconds are summed over the stretches between changes
        caps: dict[str, float] = {}
        entitled, capacity, i = entitled_gpu_s(lo, hi, changes, i, shares, nodes, pins, caps)
        capacity_total += capacity
        demand = {project: level_sum(w, lo, hi) for project, (w, _r) in levels.items()}
        delivered = {project: level_sum(r, lo, hi) for project, (_w, r) in levels.items()}
        demand_at: dict[str, dict[Place, float]] = {}
        delivered_at: dict[str, dict[Place, float]] = {}
        if split is not None:
            for project, (w, r) in levels.items():
                level_split(w, lo, hi, demand_at.setdefault(project, {}))
                level_split(r, lo, hi, delivered_at.setdefault(project, {}))
        add_owed(out, entitled, demand, delivered, shares, split, demand_at, delivered_at, caps)
        lo = hi
    return out, capacity_total


def request_of(p: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The (gpu_models, clusters) a `JobSubmitted` accepts (empty: any)."""
    return tuple(str(m) for m in p.get("gpu_models") or ()), tuple(str(c) for c in p.get("clusters") or ())
