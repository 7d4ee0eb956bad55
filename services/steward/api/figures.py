"""The figures the API serves: the allocation tree's headline figures, the overview's figures and the budget
report, folded from the log. The arithmetic is `steward.domain.budget`'s (the one home of entitlement, owed,
delivered, the ratio, the window and the period); this module is the read model that feeds it the log's
events. Everything is pure except the section "Reading the store", which reads the store; the GraphQL types and
resolvers of the overview and the budget report are `steward.api.overview`'s.

For each allocation, over the window [now - window, now) (`budget.window_bounds`), from every run of every job:
- entitled  = entitlement × capacity, integrated over the window (GPU-seconds)
- delivered = GPU-seconds its jobs ran in the window (`usage_in_window` is the same figure)
- demand    = GPU-seconds its jobs waited or ran
- owed      = Σ over hours of min(entitled in that hour, demand in that hour)
- ratio     = delivered ÷ owed, as it is (above 1: over-delivery)
- burn      = GPUs it runs on now ÷ GPUs it is entitled to now (1.0 = exactly its share)
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from steward.domain import budget
from steward.domain.budget import add_owed, entitled_gpu_s, period_bounds, period_id
from steward.domain.budget import entitlements as tree_entitlements
from steward.domain.clusters import WEIGHTS_SETTING, effective_pin
from steward.store import schema as tables

if TYPE_CHECKING:
    from steward.store.eventstore import EventStore

ROOT = "cluster"
HOUR = budget.HOUR_S
DEFAULT_WINDOW_S = budget.DEFAULT_WINDOW_S
WAITING = ("QUEUED", "PREEMPTED")
RUNNING = ("PLACED", "RUNNING")


@dataclass(frozen=True, slots=True)
class PlaceFigures:
    """One allocation's figures in one (cluster, GPU model), weighted GPU-seconds (ADR 0062): owed is split as
    its demand is (waiting demand where it is valued, the cheapest place it accepts; running where it runs)."""

    cluster: str
    gpu_model: str
    owed: float
    delivered: float
    demand: float


def place_figures(split: Mapping[budget.Place, Sequence[float]]) -> tuple[PlaceFigures, ...]:
    """The split of one allocation (`budget.Split`'s row), by cluster then model, leaving out empty places."""
    return tuple(PlaceFigures(c, m, float(r[0]), float(r[1]), float(r[2])) for (c, m), r in sorted(split.items())
                 if any(abs(v) > 1e-9 for v in r))


@dataclass(frozen=True, slots=True)
class AllocationFigures:
    name: str
    parent: str
    depth: int
    share: float
    entitlement: float
    is_project: bool
    entitled_in_window: float
    usage_in_window: float
    demand_in_window: float
    owed: float
    delivered: float
    delivered_over_owed: float | None
    burn: float | None
    running_gpus: int
    running_jobs: int
    waiting_jobs: int
    waiting_gpus: int
    window_start: float = 0.0
    window_end: float = 0.0
    display_name: str = ""  # what people call it (ADR 0055); its id when none is recorded
    split: tuple[PlaceFigures, ...] = ()  # owed, delivered and demand by (cluster, model) (ADR 0062)
    pin: str | None = None  # the cluster its parent's manager pinned it to (ADR 0067); None: not pinned itself
    pinned_to: str | None = None  # the cluster its jobs run on: its pin or its nearest pinned ancestor's

    @property
    def over_delivered(self) -> bool:
        return budget.over_delivered(self.delivered_over_owed)


def entitlements(parents: Mapping[str, str], shares: Mapping[str, float]) -> dict[str, float]:
    """A node's entitlement is the product of the shares on its path (DESIGN.md "Org tree"): the
    domain's rule, over the read model's separate parent and share maps."""
    return tree_entitlements({n: (parents[n], shares[n]) for n in parents})


def depth_first(parents: Mapping[str, str]) -> list[tuple[str, int]]:
    """(name, depth) in depth-first order, children by name; depth 1 = a child of the root."""
    children: dict[str, list[str]] = {}
    for child, parent in parents.items():
        children.setdefault(parent if parent in parents else ROOT, []).append(child)
    out: list[tuple[str, int]] = []
    stack = [(c, 1) for c in sorted(children.get(ROOT, []), reverse=True)]
    seen: set[str] = set()
    while stack:
        name, depth = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        out.append((name, depth))
        stack.extend((c, depth + 1) for c in sorted(children.get(name, []), reverse=True))
    return out


def compute(
    allocations: Sequence[Mapping[str, Any]],
    jobs: Iterable[Mapping[str, Any]],
    capacity: int,
    now: float,
    window_s: float,
    books: Mapping[str, Mapping[str, float]],
    split: budget.Split | None = None,
) -> list[AllocationFigures]:
    """Figures for every allocation, depth-first. `books` are the budget figures of the window per allocation
    (`budget.FIGURES`, from `OverviewFold.period_figures` over `budget.window_bounds(now, window_s)`); `jobs`
    are the active jobs' projection rows (project, state, gpus) for what runs and waits now; `split` the same
    figures by (cluster, model) (`OverviewFold.period_figures_split`)."""
    parents = {r["name"]: r["parent"] for r in allocations}
    shares = {r["name"]: float(r["share"]) for r in allocations}
    names = {r["name"]: r.get("display_name") or r["name"] for r in allocations}
    pins = {r["name"]: str(r["pin"]) for r in allocations if r.get("pin")}
    ents = entitlements(parents, shares)
    has_children = set(parents.values())
    w0, w1 = budget.window_bounds(now, window_s)
    counts: dict[str, list[int]] = {n: [0, 0, 0, 0] for n in parents}  # running gpus, jobs; waiting jobs, gpus
    for j in jobs:
        p = j["project"]
        if p not in parents:
            continue
        gpus = int(j["gpus"])
        c = counts[p]
        if j["state"] in RUNNING:
            c[0] += gpus
            c[1] += 1
        elif j["state"] in WAITING:
            c[2] += 1
            c[3] += gpus
    order = depth_first(parents)
    for name, _depth in reversed(order):  # roll the counts up the tree, deepest first
        parent = parents[name]
        if parent in parents:
            pc = counts[parent]
            for i, v in enumerate(counts[name]):
                pc[i] += v
    out: list[AllocationFigures] = []
    empty = dict.fromkeys(budget.FIGURES, 0.0)
    for name, depth in order:
        ent = ents[name]
        row = books.get(name, empty)
        owed, dlv = float(row["owed_gpu_s"]), float(row["delivered_gpu_s"])
        rg, rj, wj, wg = counts[name]
        entitled_gpus = ent * capacity
        out.append(AllocationFigures(
            name=name, parent=parents[name], depth=depth, share=shares[name], entitlement=ent,
            is_project=name not in has_children, entitled_in_window=float(row["entitled_gpu_s"]),
            usage_in_window=dlv, demand_in_window=float(row["demand_gpu_s"]), owed=owed, delivered=dlv,
            delivered_over_owed=budget.ratio(dlv, owed),
            burn=budget.burn(rg, entitled_gpus),
            running_gpus=rg, running_jobs=rj, waiting_jobs=wj, waiting_gpus=wg, window_start=w0, window_end=w1,
            display_name=names[name], split=place_figures((split or {}).get(name, {})),
            pin=pins.get(name), pinned_to=effective_pin(name, parents, pins) or None,
        ))
    return out


# == The overview's figures, folded from the log ======================================================
#
# The overview (issue 8) shows occupancy over time (funded, unfunded, idle), owed vs delivered per
# allocation for the current and past periods, demand by hour of week, waits by class and preemptions per
# day. They come from the events (every run of every job, not the projections' latest run): `OverviewFold`
# folds the events it needs, incrementally, and the functions below read it. Pure; `OverviewSource` below
# does the reading of the store.

DAY = 86400.0
WEEK_HOURS = 7 * 24
RUN_ENDS = budget.RUN_ENDS
DEMAND_ENDS = budget.DEMAND_ENDS
OVERVIEW_TYPES = (*budget.TREE_EVENTS, "JobSubmitted", "JobPlaced", "JobStarted",
                  "JobRequeued", *RUN_ENDS, "SessionRestored", "PeriodClosed")
JOB_CLASSES = ("debug", "batch", "interactive")


@dataclass(slots=True)
class JobLife:
    project: str
    job_class: str
    gpus: int
    submitted_at: float
    first_start: float | None = None
    funded: bool = True
    running_since: float | None = None
    wanting_since: float | None = None
    runs: list[tuple[float, float, bool]] = field(default_factory=list)  # (start, end, funded)
    demand: list[tuple[float, float]] = field(default_factory=list)
    last_at: float = 0.0
    request: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # the (gpu_models, clusters) it accepts
    placement: budget.Placement = ()  # where its last placement's GPUs are
    run_places: list[budget.Placement] = field(default_factory=list)  # where each of `runs` was

    def over_before(self, t: float) -> bool:
        """Neither waiting nor running since before `t`: it adds nothing to a period starting at `t`."""
        return self.wanting_since is None and self.running_since is None and self.last_at < t


_KEEP = {"AllocationsSet": ("parent", "shares", "pins"), "NodeRegistered": ("node_id", "gpus", "gpu_model", "cluster"),
         "NodeRetired": ("node_id",)}


def _slim(kind: str, p: Mapping[str, Any]) -> Mapping[str, Any]:
    """The fields of a tree event (`budget.TREE_EVENTS`) that the period arithmetic reads (the fold keeps them
    in memory, so commands and evidence stay out; of a `PolicySet`, only the GPU model weights)."""
    if kind == "PolicySet":
        changed = p.get("changed")
        weights = changed.get(WEIGHTS_SETTING) if isinstance(changed, Mapping) else None
        return {"changed": {WEIGHTS_SETTING: weights}} if isinstance(weights, Mapping) else {}
    return {k: p[k] for k in _KEEP[kind] if k in p}


class OverviewFold:
    """The events the overview needs, folded as they come (`apply` in log order)."""

    def __init__(self) -> None:
        self.position = 0
        # the time the fold is complete to (ADR 0075): it holds every event the budget counts before `as_of`
        # (None: nothing read yet); events read but recorded at or after it wait in `_held`, in log order
        self.as_of: float | None = None
        self._held: deque[tuple[int, str, Mapping[str, Any], float]] = deque()
        self.first_at: float | None = None
        self.jobs: dict[str, JobLife] = {}
        self.capacity: list[tuple[float, int]] = []  # (at, registered GPUs from then on)
        self._nodes: dict[str, int] = {}
        self.preemptions: list[float] = []
        self.periods: list[dict[str, Any]] = []  # PeriodClosed payloads, in log order
        # the events that shape the tree, capacity and prices (budget.TREE_EVENTS), slimmed, in log order: the
        # period arithmetic reads them as the budget module does; the jobs' events live on as `jobs`
        self.tree_history: list[tuple[str, Mapping[str, Any], float]] = []
        self.past: dict[tuple[float, float], tuple[dict[str, dict[str, float]], budget.Split]] = {}
        self.prices = budget.Prices()  # the weights in force over time and where each node is

    def see(self, position: int, kind: str, p: Mapping[str, Any], at: float) -> None:
        """One event read from the log, in log order: folded by the next `advance` whose time is past it (a
        `PeriodClosed` at once: it is what a closer recorded, read as it is, never part of the arithmetic)."""
        if kind == "PeriodClosed":
            self.apply(position, kind, p, at)
            return
        self._held.append((position, kind, p, at))

    def advance(self, position: int, until: float) -> None:
        """The log has been read up to `position`, and every event recorded before `until` is at or before it
        (`until`: the time `position` was recorded, or a pinned time after it). Folds the events seen that
        `budget.period_figures(history, start, until)` counts: those before the first one recorded at or after
        `until` (recorded times do not go back along the log, ADR 0075; the budget module stops at that event).
        The rest are held until a later `advance`. The figures of the fold are then exact as of `until`."""
        held = self._held
        while held and budget.counted_before(held[0][3], until):
            self.apply(*held.popleft())
        self.position = max(self.position, position)
        self.as_of = until

    def apply(self, position: int, kind: str, p: Mapping[str, Any], at: float) -> None:
        """Fold one event now (`see` and `advance` are the reading of a log that may be mid-batch)."""
        self.position = max(self.position, position)
        if self.first_at is None:
            self.first_at = at
        if kind == "PeriodClosed":
            self.periods.append(dict(p))
            return
        if kind in budget.TREE_EVENTS:
            self.tree_history.append((kind, _slim(kind, p), at))
            self.prices.see(kind, p, at)
        if kind == "PolicySet":
            return
        if kind in ("NodeRegistered", "NodeRetired"):  # a retired node's GPUs leave the capacity (ADR 0078)
            if kind == "NodeRegistered":
                self._nodes[str(p["node_id"])] = int(p["gpus"])
            else:
                self._nodes.pop(str(p["node_id"]), None)
            self.capacity.append((at, sum(self._nodes.values())))
            return
        if kind == "JobSubmitted":
            self.jobs[str(p["job_id"])] = JobLife(str(p["project"]), str(p.get("job_class", "batch")), int(p["gpus"]),
                                                  float(p.get("submitted_at", at)), wanting_since=at, last_at=at,
                                                  request=budget.request_of(p))
            return
        life = self.jobs.get(str(p.get("job_id", "")))
        if life is None:
            return
        life.last_at = at
        if kind == "JobPlaced":
            life.funded = bool(p.get("funded", True))
            life.placement = self.prices.placement(p.get("assignments") or {})
        elif kind == "JobStarted":
            life.running_since = budget.run_start(p, at)
            if life.first_start is None:
                life.first_start = at
        elif kind == "JobRequeued" and life.wanting_since is None:
            life.wanting_since = at
        if kind in RUN_ENDS and life.running_since is not None:
            life.runs.append((life.running_since, budget.run_end(kind, p, at, life.running_since), life.funded))
            life.run_places.append(life.placement)
            life.running_since = None
        if kind == "JobPreempted":
            self.preemptions.append(at)
        if (kind in DEMAND_ENDS or (kind == "JobPreempted" and not p.get("requeue", True))) \
                and life.wanting_since is not None:
            life.demand.append((life.wanting_since, at))
            life.wanting_since = None

    def period_figures(self, start: float, end: float, now: float) -> dict[str, dict[str, float]]:
        """Owed, delivered, demand, entitled per allocation over [start, end); a period that ended before
        `now` is computed once (the log only grows at its head)."""
        return self.period_figures_split(start, end, now)[0]

    def period_figures_split(self, start: float, end: float,
                             now: float) -> tuple[dict[str, dict[str, float]], budget.Split]:
        """`period_figures` and their split by (cluster, model) (`budget.Split`, ADR 0062)."""
        if end < now and (start, end) in self.past:
            return self.past[(start, end)]
        split: budget.Split = {}
        figs = period_figures_folded(self, start, end, split=split)
        if end < now:  # a window or period ending now is computed on each read (and not kept)
            self.past[(start, end)] = (figs, split)
        return figs, split

    def projects(self) -> frozenset[str]:
        """The leaves of the tree as the log set it (the allocations that own jobs)."""
        parents: dict[str, str] = {}
        for kind, p, _at in self.tree_history:
            if kind == "AllocationsSet":
                for child in p["shares"]:
                    parents[str(child)] = str(p["parent"])
        return frozenset(set(parents) - set(parents.values()))

    def capacity_at(self, t: float) -> int:
        cap = 0
        for at, gpus in self.capacity:
            if at > t:
                break
            cap = gpus
        return cap


def period_figures_folded(fold: OverviewFold, start: float, end: float, hour_s: float = HOUR,
                          split: budget.Split | None = None) -> dict[str, dict[str, float]]:
    """`steward.domain.budget.period_figures` over [start, end) from the fold: the same hour-by-hour
    arithmetic (owed = min(entitled, demand) per hour, share, node and weight changes taking effect from their
    event time, inner nodes summing their projects, `budget.job_levels` pricing each job), with each project's
    hourly demand and delivery integrated once instead of rescanning every job every hour (tests hold the two
    equal). With `split`, the figures by (cluster, model) are added to it."""
    n = max(1, math.ceil((end - start) / hour_s))
    pinned = budget.pin_history(fold.tree_history)  # ADR 0067
    demand_b: dict[str, Buckets] = {}
    delivered_b: dict[str, Buckets] = {}
    demand_at_b: dict[str, dict[budget.Place, Buckets]] = {}
    delivered_at_b: dict[str, dict[budget.Place, Buckets]] = {}
    for life in fold.jobs.values():
        if life.submitted_at >= end or life.over_before(start):
            continue
        wanted = demand_b.setdefault(life.project, Buckets(start, hour_s, n))
        ran = delivered_b.setdefault(life.project, Buckets(start, hour_s, n))
        demand = [(a, min(b, end)) for a, b in life.demand]
        if life.wanting_since is not None:
            demand.append((life.wanting_since, end))
        runs = [(a, min(b, end), where) for (a, b, _f), where in zip(life.runs, life.run_places, strict=True)]
        if life.running_since is not None:
            runs.append((life.running_since, end, life.placement))
        want_levels, ran_levels = budget.job_levels(life.gpus, life.request, demand, runs, fold.prices,
                                                    pinned.get(life.project, ()))
        for buckets, levels, at_b in ((wanted, want_levels, demand_at_b), (ran, ran_levels, delivered_at_b)):
            for a, b, v, place, moved in levels:
                if not moved:
                    buckets.add(a, b, v)
                if split is not None:
                    at_b.setdefault(life.project, {}).setdefault(place, Buckets(start, hour_s, n)).add(a, b, v)
    demand_h = {p: b.totals() for p, b in demand_b.items()}
    delivered_h = {p: b.totals() for p, b in delivered_b.items()}
    demand_at_h = {p: {w: b.totals() for w, b in by.items()} for p, by in demand_at_b.items()}
    delivered_at_h = {p: {w: b.totals() for w, b in by.items()} for p, by in delivered_at_b.items()}
    changes = budget.tree_changes(fold.tree_history, end)
    shares: dict[str, tuple[str, float]] = {}
    nodes: dict[str, float] = {}
    pins: dict[str, str] = {}
    out: dict[str, dict[str, float]] = {}
    i = 0
    lo = start
    h = 0
    while lo < end:
        hi = min(lo + hour_s, end)
        caps: dict[str, float] = {}
        entitled, _capacity, i = entitled_gpu_s(lo, hi, changes, i, shares, nodes, pins, caps)
        demand_now: dict[str, float] = {p: v[h] for p, v in demand_h.items()}
        delivered_now: dict[str, float] = {p: v[h] for p, v in delivered_h.items()}
        add_owed(out, entitled, demand_now, delivered_now, shares, split,
                 {p: {w: v[h] for w, v in by.items()} for p, by in demand_at_h.items()},
                 {p: {w: v[h] for w, v in by.items()} for p, by in delivered_at_h.items()}, caps)
        lo = hi
        h += 1
    return out


class Buckets:
    """Integrals of piecewise-constant levels in equal buckets over [start, start + step × n): a level added
    over an interval costs O(1) for the buckets it covers whole (a difference array) plus its two ends."""

    def __init__(self, start: float, step: float, n: int) -> None:
        self.start, self.step, self.n = start, step, n
        self.partial = [0.0] * n
        self.diff = [0.0] * (n + 1)

    def add(self, t0: float, t1: float, level: float) -> None:
        end = self.start + self.step * self.n
        t0, t1 = max(t0, self.start), min(t1, end)
        if t1 <= t0 or level == 0:
            return
        i0 = min(self.n - 1, int((t0 - self.start) // self.step))
        i1 = min(self.n - 1, int((t1 - self.start) // self.step))
        if i0 == i1:
            self.partial[i0] += level * (t1 - t0)
            return
        self.partial[i0] += level * (self.start + (i0 + 1) * self.step - t0)
        self.partial[i1] += level * (t1 - (self.start + i1 * self.step))
        if i1 > i0 + 1:  # whole buckets i0+1 .. i1-1
            self.diff[i0 + 1] += level * self.step
            self.diff[i1] -= level * self.step

    def totals(self) -> list[float]:
        out, run = [], 0.0
        for i in range(self.n):
            run += self.diff[i]
            out.append(self.partial[i] + run)
        return out


@dataclass(frozen=True, slots=True)
class OccupancyAt:
    t: float  # the bucket's start
    funded: float  # mean GPUs over the bucket
    unfunded: float
    idle: float
    capacity: float  # mean registered GPUs over the bucket


def occupancy_series(fold: OverviewFold, since: float, until: float, step: float) -> list[OccupancyAt]:
    """Mean GPUs busy funded / unfunded per step, and idle = mean registered capacity − busy
    (DESIGN.md "The time-slicing contract": funded and unfunded occupancy)."""
    n = max(1, math.ceil((until - since) / step))
    funded, unfunded = Buckets(since, step, n), Buckets(since, step, n)
    for life in fold.jobs.values():
        for s, e, f in life.runs:
            (funded if f else unfunded).add(s, e, life.gpus)
        if life.running_since is not None:
            (funded if life.funded else unfunded).add(life.running_since, until, life.gpus)
    capacity = Buckets(since, step, n)
    for k, (at, gpus) in enumerate(fold.capacity):
        capacity.add(at, fold.capacity[k + 1][0] if k + 1 < len(fold.capacity) else until, gpus)
    fs, us, cs = funded.totals(), unfunded.totals(), capacity.totals()
    out = []
    for i in range(n):
        b0 = since + i * step
        span = min(step, until - b0)
        fg, ug, cap = fs[i] / span, us[i] / span, cs[i] / span
        out.append(OccupancyAt(b0, round(fg, 4), round(ug, 4), round(max(0.0, cap - fg - ug), 4), round(cap, 4)))
    return out


def demand_by_hour_of_week(fold: OverviewFold, since: float, until: float, utc_offset_s: int = 0) -> list[list[float]]:
    """Mean GPUs demanded (waiting or running) at each hour of the week, [Monday..Sunday][0..23] in the
    local time `utc_offset_s` ahead of UTC, over the hours of [since, until] (DESIGN.md "Owed vs delivered":
    demand is every job between its submission and its end)."""
    h0 = math.floor((since + utc_offset_s) / HOUR) * HOUR - utc_offset_s  # local hour boundary
    n = max(1, math.ceil((until - h0) / HOUR))
    hourly = Buckets(h0, HOUR, n)
    for life in fold.jobs.values():
        for a, b in life.demand:
            hourly.add(a, b, life.gpus)
        if life.wanting_since is not None:
            hourly.add(life.wanting_since, until, life.gpus)
    sums = [[0.0] * 24 for _ in range(7)]
    seen = [[0.0] * 24 for _ in range(7)]
    for i, gpu_s in enumerate(hourly.totals()):
        b0 = max(since, h0 + i * HOUR)
        b1 = min(until, h0 + (i + 1) * HOUR)
        if b1 <= b0:
            continue
        local = h0 + i * HOUR + utc_offset_s
        # 1970-01-01 was a Thursday: day 3 when Monday is 0
        day = (int(local // DAY) + 3) % 7
        hour = int((local % DAY) // HOUR)
        sums[day][hour] += gpu_s
        seen[day][hour] += b1 - b0
    return [[round(sums[d][h] / seen[d][h], 4) if seen[d][h] > 0 else 0.0 for h in range(24)] for d in range(7)]


@dataclass(frozen=True, slots=True)
class ClassWaits:
    job_class: str
    jobs: int  # submitted in the range
    started: int
    waiting: int  # still waiting at the end of the range (counted with their wait so far)
    p50_s: float | None
    p90_s: float | None
    max_s: float | None


def _percentile(xs: Sequence[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def waits_by_class(fold: OverviewFold, since: float, until: float) -> list[ClassWaits]:
    """Submission to first start of the jobs submitted in [since, until], per class; a job still waiting at
    `until` counts with its wait so far (a lower bound), one that ended without starting does not count."""
    waits: dict[str, list[float]] = {c: [] for c in JOB_CLASSES}
    counts: dict[str, list[int]] = {c: [0, 0, 0] for c in JOB_CLASSES}
    for life in fold.jobs.values():
        if not since <= life.submitted_at <= until:
            continue
        c = counts.setdefault(life.job_class, [0, 0, 0])
        w = waits.setdefault(life.job_class, [])
        c[0] += 1
        if life.first_start is not None and life.first_start <= until:
            c[1] += 1
            w.append(max(0.0, life.first_start - life.submitted_at))
        elif life.wanting_since is not None:
            c[2] += 1
            w.append(max(0.0, until - life.submitted_at))
    return [ClassWaits(k, counts[k][0], counts[k][1], counts[k][2], _percentile(w, 0.5), _percentile(w, 0.9),
                       max(w) if w else None) for k, w in waits.items()]


def preemptions_per_day(fold: OverviewFold, since: float, until: float, utc_offset_s: int = 0) -> list[tuple[str, int]]:
    """JobPreempted events per local day (every day of the range, zeros included), oldest first."""
    from datetime import UTC, datetime

    def day(t: float) -> int:
        return int((t + utc_offset_s) // DAY)

    first, last = day(since), day(until)
    counts = dict.fromkeys(range(first, last + 1), 0)
    for at in fold.preemptions:
        if since <= at <= until:
            counts[day(at)] = counts.get(day(at), 0) + 1
    return [(datetime.fromtimestamp(d * DAY, UTC).strftime("%Y-%m-%d"), n) for d, n in sorted(counts.items())]


@dataclass(frozen=True, slots=True)
class PeriodRow:
    name: str
    owed: float
    delivered: float
    demand: float
    entitled: float

    @property
    def ratio(self) -> float | None:
        return budget.ratio(self.delivered, self.owed)


@dataclass(frozen=True, slots=True)
class PeriodOwed:
    period_id: str
    start: float
    end: float
    current: bool
    recorded: bool  # from a PeriodClosed event (False: computed from the log now)
    delivered_of_owed: float | None
    rows: list[PeriodRow]


def _period(pid: str, start: float, end: float, figures: Mapping[str, Mapping[str, float]], current: bool,
            recorded: bool, projects: set[str]) -> PeriodOwed:
    rows = [PeriodRow(n, float(f.get("owed_gpu_s", 0.0)), float(f.get("delivered_gpu_s", 0.0)),
                      float(f.get("demand_gpu_s", 0.0)), float(f.get("entitled_gpu_s", 0.0)))
            for n, f in sorted(figures.items())]
    cluster = budget.delivered_of_owed((r.owed, r.delivered) for r in rows if r.name in projects)
    return PeriodOwed(pid, start, end, current, recorded, cluster, rows)


def owed_delivered_periods(fold: OverviewFold, now: float, period_s: float, past: int,
                           projects: set[str]) -> list[PeriodOwed]:
    """The current period (from the last boundary to now, computed from the log with the same arithmetic the
    period close uses, steward.domain.periods) and up to `past` closed ones, newest first: from their
    PeriodClosed events, or computed when a period was not closed (yet)."""
    start, _now = budget.current_period(now, period_s)
    figs = fold.period_figures(start, now, now)
    out = [_period(period_id(start, now), start, now, figs, True, False, projects)]
    closed = {(float(p["start"]), float(p["end"])): p for p in fold.periods}
    recorded_by_end = sorted(closed.values(), key=lambda p: float(p["end"]), reverse=True)
    # the periods just before the current one, of this length, and any other recorded ones after them
    at = start
    for _ in range(past):
        lo, hi = period_bounds(at, period_s)
        if fold.first_at is None or hi <= fold.first_at:
            break
        rec = closed.get((lo, hi))
        if rec is not None:
            out.append(_period(str(rec["period_id"]), lo, hi, rec["allocations"], False, True, projects))
        else:
            figs = fold.period_figures(lo, hi, now)
            out.append(_period(period_id(lo, hi), lo, hi, figs, False, False, projects))
        at = lo
    shown = {(p.start, p.end) for p in out}
    for rec in recorded_by_end:
        if len(out) >= past + 1:
            break
        key = (float(rec["start"]), float(rec["end"]))
        if key not in shown:
            out.append(_period(str(rec["period_id"]), key[0], key[1], rec["allocations"], False, True, projects))
    return out


# == Reading the store, serving GraphQL ==================================================================

MAX_RANGE_S = 90 * DAY
MAX_POINTS = 1000
MAX_PAST_PERIODS = 24
RESULT_CACHE = 16
PINNED_FOLDS = 4


def recorded_at(store: EventStore, position: int | None = None) -> tuple[int, float] | None:
    """(position, the time it was recorded) of `position`, or of the log's head when None; None when there is
    no such event (an empty log)."""
    t = tables.events
    q = select(t.c.position, t.c.recorded_at)
    q = q.where(t.c.position == position) if position is not None else q.order_by(t.c.position.desc()).limit(1)
    with store.engine.connect() as conn:
        row = conn.execute(q).first()
        conn.rollback()
    return None if row is None else (int(row.position), float(row.recorded_at))


@dataclass(frozen=True, slots=True)
class WindowFigures:
    """The budget figures of one window as of one log position (ADR 0075): over [as_of - window, as_of), where
    `as_of` is the time `position` was recorded, from the events recorded before it (all of them are at or
    before `position`), so the same whenever and wherever they are computed."""

    position: int
    as_of: float
    books: dict[str, dict[str, float]]
    split: budget.Split


class OverviewSource:
    """One fold per store, caught up from the log on each read (only the new events of the types above) to a
    position and the time it was recorded (ADR 0075: the figures are as of that position, never of a clock that
    may be past an event not read yet), and the overview's answers cached per arguments and that time (rounded
    to `clock_s`): an answer is computed again when the log has moved and it is at least `min_age_s` old, so a
    busy log costs one computation per `min_age_s`."""

    def __init__(self, clock_s: float = 5.0, min_age_s: float = 2.0) -> None:
        self.fold = OverviewFold()
        self.lock = threading.Lock()
        self.clock_s = clock_s
        self.min_age_s = min_age_s
        self.cache: dict[tuple[Any, ...], tuple[int, float, OverviewData]] = {}
        self.computed = 0
        self.pins: dict[tuple[int, float], OverviewFold] = {}  # folds up to a pinned position (time travel)
        self.pin_lock = threading.Lock()

    def catch_up(self, store: EventStore, upto: tuple[int, float] | None = None, batch: int = 20_000) -> int:
        """Fold the events recorded since the last read, up to `upto` (a position and the time it was recorded:
        the API's read model's; default the store's head, read first: positions are taken under the head lock
        and committed in order, so every position up to a committed head is committed). A fold already past
        `upto` stays where it is (as exact, and newer). Returns how many events were read."""
        if upto is None:
            upto = recorded_at(store)
            if upto is None:
                return 0
        target, until = upto
        fold = self.fold
        if target <= fold.position:
            return 0
        t = tables.events
        read = 0
        after = fold.position
        while True:
            q = (select(t.c.position, t.c.type, t.c.payload, t.c.recorded_at)
                 .where(t.c.position > after, t.c.position <= target, t.c.type.in_(OVERVIEW_TYPES))
                 .order_by(t.c.position).limit(batch))
            with store.engine.connect() as conn:
                rows = conn.execute(q).all()
                conn.rollback()
            for row in rows:
                fold.see(int(row.position), str(row.type), row.payload, float(row.recorded_at))
            read += len(rows)
            if len(rows) < batch:
                fold.advance(target, until)
                return read
            after = int(rows[-1].position)

    def pinned(self, store: EventStore, position: int, until: float | None = None,
               batch: int = 20_000) -> tuple[OverviewFold, float]:
        """A fold of the events up to `position` (time travel), exact as of `until` (default: the time that
        position was recorded; a pinned time after it, for a report pinned to a time), and the time `position`
        was recorded: the figures as of a position are a function of the log alone (the fold stops there, and
        counts what the budget module counts before `until`), so two surfaces asked for the same position give
        the same answer at any time. The last `PINNED_FOLDS` asked are kept."""
        found = recorded_at(store, position)
        if found is None:
            raise LookupError(f"no event at position {position}")
        at = found[1]
        cutoff = at if until is None else until
        with self.pin_lock:
            hit = self.pins.get((position, cutoff))
            if hit is not None:
                return hit, at
            t = tables.events
            fold = OverviewFold()
            with store.engine.connect() as conn:
                after = 0
                while True:
                    rows = conn.execute(
                        select(t.c.position, t.c.type, t.c.payload, t.c.recorded_at)
                        .where(t.c.position > after, t.c.position <= position, t.c.type.in_(OVERVIEW_TYPES))
                        .order_by(t.c.position).limit(batch)).all()
                    for row in rows:
                        fold.see(int(row.position), str(row.type), row.payload, float(row.recorded_at))
                    if len(rows) < batch:
                        break
                    after = int(rows[-1].position)
                conn.rollback()
            fold.advance(position, cutoff)
            if len(self.pins) >= PINNED_FOLDS:
                self.pins.pop(next(iter(self.pins)))
            self.pins[(position, cutoff)] = fold
            return fold, at

    def window(self, store: EventStore, window_s: float, upto: tuple[int, float] | None = None,
               empty_at: float | None = None) -> WindowFigures:
        """The budget figures per allocation over the window ending when the fold's position was recorded
        (`budget.window_bounds`), with their split by (cluster, model), caught up to `upto` first (default: the
        store's head). An empty log has no time of its own: its (zero) figures end at `empty_at` (the clock)."""
        with self.lock:
            self.catch_up(store, upto)
            as_of = self.fold.as_of
            if as_of is None:
                as_of = time.time() if empty_at is None else empty_at
            w0, w1 = budget.window_bounds(as_of, window_s)
            books, split = self.fold.period_figures_split(w0, w1, as_of)
            return WindowFigures(self.fold.position, as_of, books, split)

    def live(self, store: EventStore, upto: tuple[int, float] | None = None) -> tuple[OverviewFold, float]:
        """The fold caught up (to `upto`, default the store's head) and the time it is exact to (the clock for
        an empty log). Call with `lock` held: the fold is read in place."""
        self.catch_up(store, upto)
        return self.fold, (self.fold.as_of if self.fold.as_of is not None else time.time())

    def overview(self, store: EventStore, args: OverviewArgs) -> OverviewData:
        """The overview up to the time the log's head was recorded (or `args.until` when earlier)."""
        with self.lock:
            fold, as_of = self.live(store)
            until = as_of if args.until is None else min(args.until, as_of)
            key = (args, round(until / self.clock_s))
            hit = self.cache.get(key)
            tick = time.monotonic()
            if hit is not None and (hit[0] == fold.position or tick - hit[1] < self.min_age_s):
                return hit[2]
            data = compute_overview(fold, args, until, fold.position)
            self.computed += 1
            if len(self.cache) >= RESULT_CACHE:
                self.cache.clear()
            self.cache[key] = (fold.position, tick, data)
            return data


@dataclass(frozen=True, slots=True)
class OverviewArgs:
    since: float | None
    until: float | None
    points: int
    utc_offset_s: int
    period_s: float
    past_periods: int


@dataclass(frozen=True, slots=True)
class OverviewData:
    position: int
    since: float
    until: float
    step: float
    capacity: int
    occupancy: list[OccupancyAt]
    demand: list[list[float]]
    waits: list[ClassWaits]
    preemptions: list[tuple[str, int]]
    periods: list[PeriodOwed]
    projects: frozenset[str]


def compute_overview(fold: OverviewFold, args: OverviewArgs, until: float, position: int) -> OverviewData:
    first = fold.first_at if fold.first_at is not None else until - HOUR
    since = max(args.since if args.since is not None else until - 7 * DAY, first, until - MAX_RANGE_S)
    since = min(since, until - 60.0)
    step = max(1.0, math.ceil((until - since) / args.points))
    projects = fold.projects()
    return OverviewData(
        position=position, since=since, until=until, step=step, capacity=fold.capacity_at(until),
        occupancy=occupancy_series(fold, since, until, step),
        demand=demand_by_hour_of_week(fold, since, until, args.utc_offset_s),
        waits=waits_by_class(fold, since, until),
        preemptions=preemptions_per_day(fold, since, until, args.utc_offset_s),
        periods=owed_delivered_periods(fold, until, args.period_s, args.past_periods, set(projects)),
        projects=projects)


SOURCES: weakref.WeakKeyDictionary[EventStore, OverviewSource] = weakref.WeakKeyDictionary()
_SOURCES_LOCK = threading.Lock()


def source_for(store: EventStore) -> OverviewSource:
    """The fold of this store (a store that is gone takes its fold with it; an id could be reused)."""
    with _SOURCES_LOCK:
        src = SOURCES.get(store)
        if src is None:
            src = SOURCES[store] = OverviewSource()
        return src


