"""The figures the API serves: the allocation tree's headline figures, and the overview's figures folded
from the log (DESIGN.md "Owed vs delivered", "Usage window"). Everything is pure except the last section,
which reads the store and serves the overview over GraphQL.

For each allocation, over the window [now - window, now]:
- entitled  = entitlement × capacity × window (GPU-seconds)
- delivered = GPU-seconds its jobs ran (usage in the window)
- demand    = GPU-seconds its jobs waited or ran
- owed      = Σ over hours of min(entitlement × capacity × hour, demand in that hour)
- burn      = GPUs it runs on now ÷ GPUs it is entitled to now (1.0 = exactly its share)

The read model keeps one run interval per job (its latest start), so a job requeued after preemption
counts from its latest start only; the event-accurate figures come with the store's usage projection.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import strawberry
from sqlalchemy import select

from steward.api.scalars import BigInt
from steward.domain.periods import add_owed, entitled_gpu_s
from steward.domain.periods import entitlements as tree_entitlements
from steward.store import schema as tables

if TYPE_CHECKING:
    from steward.api.context import Context
    from steward.store.eventstore import EventStore

ROOT = "cluster"
HOUR = 3600.0
DEFAULT_WINDOW_S = 7 * 24 * HOUR
WAITING = ("QUEUED", "PREEMPTED")
RUNNING = ("PLACED", "RUNNING")


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


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def _add_hourly(buckets: list[float], start: float, end: float, w0: float, gpus: int) -> None:
    if end <= start:
        return
    first = max(0, int((start - w0) // HOUR))
    last = min(len(buckets) - 1, math.ceil((end - w0) / HOUR) - 1)
    for h in range(first, last + 1):
        b0 = w0 + h * HOUR
        buckets[h] += gpus * _overlap(start, end, b0, b0 + HOUR)


def compute(
    allocations: Sequence[Mapping[str, Any]],
    jobs: Iterable[Mapping[str, Any]],
    capacity: int,
    now: float,
    window_s: float = DEFAULT_WINDOW_S,
) -> list[AllocationFigures]:
    """Figures for every allocation, depth-first. `jobs` are projection rows with at least project,
    state, gpus, submitted_at, started_at, ended_at."""
    parents = {r["name"]: r["parent"] for r in allocations}
    shares = {r["name"]: float(r["share"]) for r in allocations}
    ents = entitlements(parents, shares)
    has_children = set(parents.values())
    w0 = now - window_s
    hours = max(1, math.ceil(window_s / HOUR))
    demand: dict[str, list[float]] = {}
    delivered: dict[str, float] = {}
    running_gpus: dict[str, int] = {}
    running_jobs: dict[str, int] = {}
    waiting_jobs: dict[str, int] = {}
    waiting_gpus: dict[str, int] = {}
    for j in jobs:
        p = j["project"]
        if p not in parents:
            continue
        gpus = int(j["gpus"])
        end = j["ended_at"] if j["ended_at"] is not None else now
        s0 = max(float(j["submitted_at"]), w0)
        if end > s0:
            _add_hourly(demand.setdefault(p, [0.0] * hours), s0, min(end, now), w0, gpus)
        if j["started_at"] is not None:
            delivered[p] = delivered.get(p, 0.0) + gpus * _overlap(float(j["started_at"]), end, w0, now)
        if j["state"] in RUNNING:
            running_gpus[p] = running_gpus.get(p, 0) + gpus
            running_jobs[p] = running_jobs.get(p, 0) + 1
        elif j["state"] in WAITING:
            waiting_jobs[p] = waiting_jobs.get(p, 0) + 1
            waiting_gpus[p] = waiting_gpus.get(p, 0) + gpus
    order = depth_first(parents)
    # roll the per-project figures up the tree, deepest first
    sub_demand: dict[str, list[float]] = {n: list(demand.get(n, [0.0] * hours)) for n in parents}
    sums: dict[str, list[float]] = {n: [delivered.get(n, 0.0), running_gpus.get(n, 0), running_jobs.get(n, 0),
                                       waiting_jobs.get(n, 0), waiting_gpus.get(n, 0)] for n in parents}
    for name, _depth in reversed(order):
        parent = parents[name]
        if parent in parents:
            pd = sub_demand[parent]
            for h, v in enumerate(sub_demand[name]):
                pd[h] += v
            ps = sums[parent]
            for i, v in enumerate(sums[name]):
                ps[i] += v
    out: list[AllocationFigures] = []
    for name, depth in order:
        ent = ents[name]
        per_hour = ent * capacity * HOUR
        owed = 0.0
        for h, d in enumerate(sub_demand[name]):
            span = min(HOUR, max(0.0, window_s - h * HOUR))
            owed += min(ent * capacity * span, d) if span < HOUR else min(per_hour, d)
        dlv, rg, rj, wj, wg = sums[name]
        entitled_gpus = ent * capacity
        out.append(AllocationFigures(
            name=name, parent=parents[name], depth=depth, share=shares[name], entitlement=ent,
            is_project=name not in has_children, entitled_in_window=ent * capacity * window_s,
            usage_in_window=dlv, demand_in_window=sum(sub_demand[name]), owed=owed, delivered=dlv,
            delivered_over_owed=(dlv / owed) if owed > 0 else None,
            burn=(rg / entitled_gpus) if entitled_gpus > 0 else None,
            running_gpus=int(rg), running_jobs=int(rj), waiting_jobs=int(wj), waiting_gpus=int(wg),
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
RUN_ENDS = ("JobCompleted", "JobFailed", "JobCancelled", "JobPreempted", "JobLost")
DEMAND_ENDS = ("JobCompleted", "JobFailed", "JobCancelled", "SessionRestored")
OVERVIEW_TYPES = ("AllocationsSet", "NodeRegistered", "JobSubmitted", "JobPlaced", "JobStarted", "JobRequeued",
                  *RUN_ENDS, "SessionRestored", "PeriodClosed")
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

    def over_before(self, t: float) -> bool:
        """Neither waiting nor running since before `t`: it adds nothing to a period starting at `t`."""
        return self.wanting_since is None and self.running_since is None and self.last_at < t


_KEEP = {"AllocationsSet": ("parent", "shares"), "NodeRegistered": ("node_id", "gpus"),
         "JobSubmitted": ("job_id", "project", "gpus"), "JobPreempted": ("job_id", "requeue")}


def _slim(kind: str, p: Mapping[str, Any]) -> Mapping[str, Any]:
    """The fields of an event that the period arithmetic reads (the fold keeps every event it needs in
    memory, so evidence and commands stay out)."""
    keep = _KEEP.get(kind, ("job_id",))
    return {k: p[k] for k in keep if k in p}


class OverviewFold:
    """The events the overview needs, folded as they come (`apply` in log order)."""

    def __init__(self) -> None:
        self.position = 0
        self.first_at: float | None = None
        self.jobs: dict[str, JobLife] = {}
        self.capacity: list[tuple[float, int]] = []  # (at, registered GPUs from then on)
        self._nodes: dict[str, int] = {}
        self.preemptions: list[float] = []
        self.periods: list[dict[str, Any]] = []  # PeriodClosed payloads, in log order
        self.history: list[tuple[str, Mapping[str, Any], float]] = []  # what steward.domain.periods reads
        self.tree_events: list[int] = []  # indices of the AllocationsSet and NodeRegistered events
        self.past: dict[tuple[float, float], dict[str, dict[str, float]]] = {}  # computed past periods

    def apply(self, position: int, kind: str, p: Mapping[str, Any], at: float) -> None:
        self.position = max(self.position, position)
        if self.first_at is None:
            self.first_at = at
        if kind == "PeriodClosed":
            self.periods.append(dict(p))
            return
        if kind != "JobPlaced":  # the period arithmetic does not read placements (nor their evidence)
            self.history.append((kind, _slim(kind, p), at))
        if kind in ("AllocationsSet", "NodeRegistered"):
            self.tree_events.append(len(self.history) - 1)
        if kind == "NodeRegistered":
            self._nodes[str(p["node_id"])] = int(p["gpus"])
            self.capacity.append((at, sum(self._nodes.values())))
            return
        if kind == "JobSubmitted":
            self.jobs[str(p["job_id"])] = JobLife(str(p["project"]), str(p.get("job_class", "batch")), int(p["gpus"]),
                                                  float(p.get("submitted_at", at)), wanting_since=at, last_at=at)
            return
        life = self.jobs.get(str(p.get("job_id", "")))
        if life is None:
            return
        life.last_at = at
        if kind == "JobPlaced":
            life.funded = bool(p.get("funded", True))
        elif kind == "JobStarted":
            life.running_since = at
            if life.first_start is None:
                life.first_start = at
        elif kind == "JobRequeued" and life.wanting_since is None:
            life.wanting_since = at
        if kind in RUN_ENDS and life.running_since is not None:
            life.runs.append((life.running_since, at, life.funded))
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
        if end <= now and (start, end) in self.past:
            return self.past[(start, end)]
        figs = period_figures_folded(self, start, end)
        if end <= now:
            self.past[(start, end)] = figs
        return figs

    def capacity_at(self, t: float) -> int:
        cap = 0
        for at, gpus in self.capacity:
            if at > t:
                break
            cap = gpus
        return cap


def period_figures_folded(fold: OverviewFold, start: float, end: float,
                          hour_s: float = HOUR) -> dict[str, dict[str, float]]:
    """`steward.domain.periods.period_figures` over [start, end) from the fold: the same hour-by-hour
    arithmetic (owed = min(entitled, demand) per hour, share and node changes taking effect from their
    event time, inner nodes summing their projects), with each project's hourly demand and delivery
    integrated once instead of rescanning every job every hour (tests hold the two equal)."""
    n = max(1, math.ceil((end - start) / hour_s))
    demand_b: dict[str, Buckets] = {}
    delivered_b: dict[str, Buckets] = {}
    for life in fold.jobs.values():
        if life.submitted_at >= end or life.over_before(start):
            continue
        wanted = demand_b.setdefault(life.project, Buckets(start, hour_s, n))
        ran = delivered_b.setdefault(life.project, Buckets(start, hour_s, n))
        for a, b in life.demand:
            wanted.add(a, min(b, end), life.gpus)
        if life.wanting_since is not None:
            wanted.add(life.wanting_since, end, life.gpus)
        for a, b, _f in life.runs:
            ran.add(a, min(b, end), life.gpus)
        if life.running_since is not None:
            ran.add(life.running_since, end, life.gpus)
    demand_h = {p: b.totals() for p, b in demand_b.items()}
    delivered_h = {p: b.totals() for p, b in delivered_b.items()}
    changes: list[tuple[float, str, float, str]] = []
    for i in fold.tree_events:
        kind, p, at = fold.history[i]
        if at >= end:
            break
        if kind == "AllocationsSet":
            for child, share in p["shares"].items():
                changes.append((at, "share", float(share), f"{p['parent']}\x00{child}"))
        else:
            changes.append((at, "node", int(p["gpus"]), str(p["node_id"])))
    shares: dict[str, tuple[str, float]] = {}
    nodes: dict[str, int] = {}
    out: dict[str, dict[str, float]] = {}
    i = 0
    lo = start
    h = 0
    while lo < end:
        hi = min(lo + hour_s, end)
        entitled, _capacity, i = entitled_gpu_s(lo, hi, changes, i, shares, nodes)
        demand: dict[str, float] = {p: v[h] for p, v in demand_h.items()}
        delivered: dict[str, float] = {p: v[h] for p, v in delivered_h.items()}
        add_owed(out, entitled, demand, delivered, shares)
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
        return min(1.0, self.delivered / self.owed) if self.owed > 0 else None


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
    owed = sum(r.owed for r in rows if r.name in projects)
    got = sum(min(r.delivered, r.owed) for r in rows if r.name in projects)
    return PeriodOwed(pid, start, end, current, recorded, (got / owed) if owed > 0 else None, rows)


def owed_delivered_periods(fold: OverviewFold, now: float, period_s: float, past: int,
                           projects: set[str]) -> list[PeriodOwed]:
    """The current period (from the last boundary to now, computed from the log with the same arithmetic the
    period close uses, steward.domain.periods) and up to `past` closed ones, newest first: from their
    PeriodClosed events, or computed when a period was not closed (yet)."""
    from steward.domain.periods import period_bounds, period_id

    start = math.floor(now / period_s) * period_s
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


class OverviewSource:
    """One fold per store, caught up from the log on each read (only the new events of the types above), and
    the answers cached per arguments and clock (rounded to `clock_s`): an answer is computed again when the
    log has moved and it is at least `min_age_s` old, so a busy log costs one computation per `min_age_s`."""

    def __init__(self, clock_s: float = 5.0, min_age_s: float = 2.0) -> None:
        self.fold = OverviewFold()
        self.lock = threading.Lock()
        self.clock_s = clock_s
        self.min_age_s = min_age_s
        self.cache: dict[tuple[Any, ...], tuple[int, float, OverviewData]] = {}
        self.computed = 0

    def catch_up(self, store: EventStore, batch: int = 20_000) -> int:
        """Fold the events recorded since the last read; returns how many were read."""
        t = tables.events
        read = 0
        while True:
            q = (select(t.c.position, t.c.type, t.c.payload, t.c.recorded_at)
                 .where(t.c.position > self.fold.position, t.c.type.in_(OVERVIEW_TYPES))
                 .order_by(t.c.position).limit(batch))
            with store.engine.connect() as conn:
                rows = conn.execute(q).all()
                conn.rollback()
            for row in rows:
                self.fold.apply(int(row.position), str(row.type), row.payload, float(row.recorded_at))
            read += len(rows)
            if len(rows) < batch:
                head = store.head()
                self.fold.position = max(self.fold.position, head)
                return read

    def overview(self, store: EventStore, args: OverviewArgs, now: float) -> OverviewData:
        with self.lock:
            self.catch_up(store)
            until = now if args.until is None else min(args.until, now)
            key = (args, round(until / self.clock_s))
            hit = self.cache.get(key)
            tick = time.monotonic()
            if hit is not None and (hit[0] == self.fold.position or tick - hit[1] < self.min_age_s):
                return hit[2]
            data = compute_overview(self.fold, args, until, self.fold.position)
            self.computed += 1
            if len(self.cache) >= RESULT_CACHE:
                self.cache.clear()
            self.cache[key] = (self.fold.position, tick, data)
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
    parents: dict[str, str] = {}
    for kind, p, _at in fold.history:
        if kind == "AllocationsSet":
            for child in p["shares"]:
                parents[str(child)] = str(p["parent"])
    projects = frozenset(set(parents) - set(parents.values()))
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


@strawberry.type(description="Mean GPUs over one step of the occupancy series.")
class OccupancyPoint:
    t: float = strawberry.field(description="The step's start (epoch seconds).")
    funded: float
    unfunded: float
    idle: float
    capacity: float = strawberry.field(description="Mean registered GPUs over the step.")


@strawberry.type(description="Waits from submission to first start, per job class, of the jobs submitted in the "
                             "range; jobs still waiting count with their wait so far.")
class ClassWait:
    job_class: str
    jobs: BigInt
    started: BigInt
    waiting: BigInt
    p50_s: float | None
    p90_s: float | None
    max_s: float | None


@strawberry.type
class DayCount:
    day: str = strawberry.field(description="YYYY-MM-DD in the requested UTC offset.")
    count: BigInt


@strawberry.type(description="Owed vs delivered of one allocation in one period (GPU-seconds).")
class OwedAllocation:
    name: str
    is_project: bool
    owed: float
    delivered: float
    demand: float
    entitled: float
    ratio: float | None = strawberry.field(description="delivered / owed, capped at 1 (null: nothing owed).")


@strawberry.type(description="One budget period: the current one (computed now) or a past one (from its "
                             "PeriodClosed event when it was closed).")
class OwedPeriod:
    period_id: str
    start: float
    end: float
    current: bool
    recorded: bool = strawberry.field(description="From a PeriodClosed event (false: computed from the log).")
    delivered_of_owed: float | None = strawberry.field(description="Over all projects (cluster-wide).")
    allocations: list[OwedAllocation]


@strawberry.type(description="The overview's figures, computed on the server from the log.")
class Overview:
    position: BigInt = strawberry.field(description="The log position the figures include.")
    since: float
    until: float
    step_s: float
    capacity_gpus: BigInt
    occupancy: list[OccupancyPoint]
    demand_by_hour_of_week: list[list[float]] = strawberry.field(
        description="Mean GPUs demanded (waiting or running), [Monday..Sunday][hour 0..23] in the UTC offset.")
    waits: list[ClassWait]
    preemptions_per_day: list[DayCount]
    owed_delivered: list[OwedPeriod] = strawberry.field(
        description="The current period first, then past ones, newest first; allocations you may see.")


async def overview(ctx: Context, since_s: float | None, until_s: float | None, points: int, utc_offset_s: int,
                   period_s: float, past_periods: int, now: float | None = None) -> Overview:
    """The `overview` query: every role sees the cluster-wide series; owed vs delivered lists the
    allocations the principal may see."""
    from steward.api.context import BadInput  # context imports the read model, which imports this module

    access = await ctx.access("overview")
    if not 10 <= points <= MAX_POINTS:
        raise BadInput(f"'points' must be between 10 and {MAX_POINTS}, got {points}")
    if not -14 * 3600 <= utc_offset_s <= 14 * 3600:
        raise BadInput(f"'utcOffsetS' must be between -50400 and 50400 seconds, got {utc_offset_s}")
    if not HOUR <= period_s <= 90 * DAY:
        raise BadInput(f"'periodS' must be between 3600 and {90 * DAY:.0f} seconds, got {period_s:g}")
    if not 0 <= past_periods <= MAX_PAST_PERIODS:
        raise BadInput(f"'pastPeriods' must be between 0 and {MAX_PAST_PERIODS}, got {past_periods}")
    for name, v in (("sinceS", since_s), ("untilS", until_s)):
        if v is not None and not math.isfinite(v):
            raise BadInput(f"'{name}' must be a finite time in epoch seconds")
    if since_s is not None and until_s is not None and since_s >= until_s:
        raise BadInput("'sinceS' must be before 'untilS'")
    args = OverviewArgs(since_s, until_s, points, utc_offset_s, period_s, past_periods)
    clock = time.time() if now is None else now
    d = await asyncio.to_thread(source_for(ctx.services.store).overview, ctx.services.store, args, clock)
    return Overview(
        position=d.position, since=d.since, until=d.until, step_s=d.step, capacity_gpus=d.capacity,
        occupancy=[OccupancyPoint(t=o.t, funded=o.funded, unfunded=o.unfunded, idle=o.idle, capacity=o.capacity)
                   for o in d.occupancy],
        demand_by_hour_of_week=d.demand,
        waits=[ClassWait(job_class=w.job_class, jobs=w.jobs, started=w.started, waiting=w.waiting, p50_s=w.p50_s,
                         p90_s=w.p90_s, max_s=w.max_s) for w in d.waits],
        preemptions_per_day=[DayCount(day=day, count=n) for day, n in d.preemptions],
        owed_delivered=[OwedPeriod(
            period_id=p.period_id, start=p.start, end=p.end, current=p.current, recorded=p.recorded,
            delivered_of_owed=p.delivered_of_owed,
            allocations=[OwedAllocation(name=r.name, is_project=r.name in d.projects, owed=r.owed,
                                        delivered=r.delivered, demand=r.demand, entitled=r.entitled, ratio=r.ratio)
                         for r in p.rows if access.sees(r.name)]) for p in d.periods])
