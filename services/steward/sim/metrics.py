"""The figures every run reports, with the definitions of ../shared/data/scenarios/README.md.

Levels (GPUs demanded, busy, delivered) are piecewise constant between simulator events; `Level`
integrates each one into hourly buckets as it changes, so the hour-by-hour definitions (owed =
min(entitlement × capacity, demand) per hour; occupancy's min(capacity, demand) per hour) are exact.

Conventions this module fixes (the README leaves them open; the same for every policy):
- An allocation's demand and delivery count its *funded-asking* jobs: tenant in the tree and
  `min_runtime_s > 0` (or class interactive). Jobs that ask for no protection opted out of the
  allocation (they run on idle capacity), so nothing is owed for them. A funded-asking job that the
  policy runs unfunded (its allocation had no entitlement left) still counts as delivered.
- `owed_delivered_mean`/`_min` are over projects (the leaves that submit jobs) × periods with owed > 0;
  inner allocations are in the per-allocation CSV.
- Demand is every job between submit and completion, whatever it is doing (waiting, running, in
  grace); busy counts every GPU held by a job (including grace and restart overhead).
- Waits are submit to *first* start; percentiles interpolate linearly between order statistics.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

HOUR_S = 3600.0
WAIT_CLASSES = ("debug", "batch", "large")
DEBUG_CLASSES = ("debug_qualified", "debug_over_quota")
"""ADR 0029: debug jobs qualified at submit (inside their allocation's debug quota; every debug job
for a policy without a lane), and those over the quota. Debug jobs that cannot qualify (no
allocation, no protection asked, not small or short) are in neither, only in `debug`."""


class Hourly:
    """Hourly buckets of an integral (GPU-seconds per hour)."""

    __slots__ = ("buckets",)

    def __init__(self) -> None:
        self.buckets: list[float] = []

    def add(self, t0: float, t1: float, level: float) -> None:
        """Add `level` over [t0, t1) split at hour boundaries."""
        if t1 <= t0 or level == 0.0:
            return
        b = self.buckets
        h0 = int(t0 // HOUR_S)
        h1 = int(t1 // HOUR_S)
        if h1 * HOUR_S == t1:  # [t0, t1) ends on a boundary: nothing falls in hour h1
            h1 -= 1
        if h1 >= len(b):
            b.extend([0.0] * (h1 + 1 - len(b)))
        if h0 == h1:
            b[h0] += level * (t1 - t0)
            return
        b[h0] += level * ((h0 + 1) * HOUR_S - t0)
        for h in range(h0 + 1, h1):
            b[h] += level * HOUR_S
        b[h1] += level * (t1 - h1 * HOUR_S)

    def padded(self, hours: int) -> list[float]:
        return self.buckets + [0.0] * (hours - len(self.buckets))


class Level:
    """A piecewise-constant quantity (GPUs) integrated hour by hour as it changes."""

    __slots__ = ("hourly", "since", "value")

    def __init__(self, start: float = 0.0) -> None:
        self.value = 0.0
        self.since = start
        self.hourly = Hourly()

    def add(self, now: float, delta: float) -> None:
        if delta == 0.0:
            return
        if now > self.since:
            self.hourly.add(self.since, now, self.value)
            self.since = now
        self.value += delta

    def set(self, now: float, value: float) -> None:
        self.add(now, value - self.value)

    def close(self, now: float) -> None:
        if now > self.since:
            self.hourly.add(self.since, now, self.value)
            self.since = now


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between order statistics (numpy's default); None when empty."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    frac = pos - lo
    return xs[lo] + (xs[hi] - xs[lo]) * frac


@dataclass
class Recorder:
    """What the engine feeds while it runs; `figures()` turns it into the reported numbers."""

    capacity: int
    entitlement: Mapping[str, float]  # every allocation (inner nodes included)
    parents: Mapping[str, str | None]
    projects: tuple[str, ...]
    large_job_gpus: int
    owed_period_days: float
    start: float = 0.0
    demand: Level = field(init=False)
    busy_funded: Level = field(init=False)
    busy_unfunded: Level = field(init=False)
    alloc_demand: dict[str, Level] = field(init=False)
    alloc_delivered: dict[str, Level] = field(init=False)
    gang_wait: Level = field(init=False)
    frag: Level = field(init=False)
    waits: dict[str, list[float]] = field(init=False)
    preemptions: int = 0
    protection_violations: int = 0
    lost_gpu_s: float = 0.0
    end: float = 0.0
    cycles: int = 0
    skipped_cycles: int = 0
    unfinished: int = 0
    debug_jobs: int = 0
    debug_qualified: int = 0

    def __post_init__(self) -> None:
        self.demand = Level(self.start)
        self.busy_funded = Level(self.start)
        self.busy_unfunded = Level(self.start)
        self.alloc_demand = {p: Level(self.start) for p in self.projects}
        self.alloc_delivered = {p: Level(self.start) for p in self.projects}
        self.gang_wait = Level(self.start)
        self.frag = Level(self.start)
        self.waits = {c: [] for c in (*WAIT_CLASSES, *DEBUG_CLASSES)}

    # --- feeding -------------------------------------------------------------------------------

    def record_debug_class(self, qualified: bool, reason: str) -> str | None:
        """A debug job's class at submit (ADR 0029); returns its wait class (None: neither)."""
        self.debug_jobs += 1
        if qualified:
            self.debug_qualified += 1
            return "debug_qualified"
        return "debug_over_quota" if reason == "over_quota" else None

    def record_wait(self, job_class: str, gpus: int, wait_s: float, debug_class: str | None = None) -> None:
        if job_class in ("debug", "batch"):
            self.waits[job_class].append(wait_s)
        if debug_class is not None:
            self.waits[debug_class].append(wait_s)
        if gpus >= self.large_job_gpus:
            self.waits["large"].append(wait_s)

    def close(self, now: float) -> None:
        self.end = now
        levels: list[Level] = [self.demand, self.busy_funded, self.busy_unfunded, self.gang_wait, self.frag]
        levels += list(self.alloc_demand.values()) + list(self.alloc_delivered.values())
        for lvl in levels:
            lvl.close(now)

    # --- figures -------------------------------------------------------------------------------

    @property
    def hours(self) -> int:
        return max(1, math.ceil(self.end / HOUR_S))

    def occupancy(self) -> float:
        hours = self.hours
        demand = self.demand.hourly.padded(hours)
        busy_f = self.busy_funded.hourly.padded(hours)
        busy_u = self.busy_unfunded.hourly.padded(hours)
        cap_h = self.capacity * HOUR_S
        denom = sum(min(cap_h, d) for d in demand)
        busy = sum(busy_f) + sum(busy_u)
        return busy / denom if denom > 0 else 1.0

    def alloc_hourly(self) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
        """Hourly demand and delivered GPU-seconds for every allocation (inner ones summed)."""
        hours = self.hours
        demand: dict[str, list[float]] = {a: [0.0] * hours for a in self.entitlement}
        delivered: dict[str, list[float]] = {a: [0.0] * hours for a in self.entitlement}
        for p in self.projects:
            d = self.alloc_demand[p].hourly.padded(hours)
            r = self.alloc_delivered[p].hourly.padded(hours)
            node: str | None = p
            while node is not None:
                dd, rr = demand[node], delivered[node]
                for h in range(hours):
                    dd[h] += d[h]
                    rr[h] += r[h]
                node = self.parents.get(node)
        return demand, delivered

    def owed_delivered_table(self) -> list[dict[str, Any]]:
        """Rows (allocation, period, owed_gpu_h, delivered_gpu_h, ratio) for every allocation."""
        demand, delivered = self.alloc_hourly()
        hours = self.hours
        per = max(1, round(self.owed_period_days * 24))
        periods = math.ceil(hours / per)
        rows: list[dict[str, Any]] = []
        for alloc, ent in self.entitlement.items():
            cap_h = ent * self.capacity * HOUR_S
            d, r = demand[alloc], delivered[alloc]
            for k in range(periods):
                lo, hi = k * per, min(hours, (k + 1) * per)
                owed = sum(min(cap_h, d[h]) for h in range(lo, hi))
                got = sum(r[lo:hi])
                ratio = min(1.0, got / owed) if owed > 0 else None
                rows.append({
                    "allocation": alloc, "project": alloc in self.projects, "period": k,
                    "start_day": lo / 24.0, "end_day": hi / 24.0,
                    "entitlement": ent, "owed_gpu_h": owed / HOUR_S, "delivered_gpu_h": got / HOUR_S,
                    "demand_gpu_h": sum(d[lo:hi]) / HOUR_S, "ratio": ratio,
                })
        return rows

    def fragmentation_mean(self) -> float:
        hours = self.hours
        waiting = self.gang_wait.hourly.padded(hours)
        frag = self.frag.hourly.padded(hours)
        vals = [frag[h] / waiting[h] for h in range(hours) if waiting[h] > 0]
        return sum(vals) / len(vals) if vals else 0.0

    def figures(self, policy: str, scenario: str, jobs: int, wall_s: float) -> dict[str, Any]:
        rows = [r for r in self.owed_delivered_table() if r["project"] and r["ratio"] is not None]
        ratios = [float(r["ratio"]) for r in rows]
        delivered = sum(self.busy_funded.hourly.buckets) + sum(self.busy_unfunded.hourly.buckets)
        return {
            "policy": policy,
            "scenario": scenario,
            "jobs": jobs,
            "occupancy": _round(self.occupancy()),
            "owed_delivered_mean": _round(sum(ratios) / len(ratios)) if ratios else None,
            "owed_delivered_min": _round(min(ratios)) if ratios else None,
            "wait_p50_s": {c: _round(percentile(self.waits[c], 50)) for c in (*WAIT_CLASSES, *DEBUG_CLASSES)},
            "wait_p90_s": {c: _round(percentile(self.waits[c], 90)) for c in (*WAIT_CLASSES, *DEBUG_CLASSES)},
            "debug_qualified_fraction": _round(self.debug_qualified / self.debug_jobs) if self.debug_jobs else None,
            "preemptions": self.preemptions,
            "lost_gpu_hours_fraction": _round(self.lost_gpu_s / delivered) if delivered > 0 else 0.0,
            "protection_violations": self.protection_violations,
            "fragmentation_mean": _round(self.fragmentation_mean()),
            "wall_s": round(wall_s, 3),
        }


def _round(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(x, digits)


def cdf_points(values: Iterable[float]) -> tuple[list[float], list[float]]:
    xs = sorted(values)
    n = len(xs)
    return xs, [(i + 1) / n for i in range(n)]
