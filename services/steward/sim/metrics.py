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

Figures research reports (issue 18; docs/results.md "Figures research reports"), the same for every policy:
- `preemptions_per_1k_gpu_h` = preemptions ÷ (delivered GPU-hours ÷ 1,000); delivered GPU-hours are
  every GPU held by a job, funded or not (the denominator of `lost_gpu_hours_fraction`).
- `flaps`: preemptions requested at most `restart_overhead_s` after the victim's current run started
  (its first start or a restart); `flaps_fraction` = flaps ÷ preemptions (0 without preemptions).
- Job completion time (JCT) of a job = the moment it is done (its work complete, or a session stopped
  at its cap) − its submit time; `jct_mean_s`, `jct_p99_s` over the jobs done by the end of the run.
  `makespan_s` = last done − first submit (of every job submitted).
- Finish-time fairness ρ (Themis, Mahajan et al., NSDI'20: ρ = T_shared ÷ T_independent, where
  T_independent is the finish time running alone on 1/N of the cluster with N contending apps). Here a
  job is the app, T_shared is its JCT, N is the number of tenants with at least one job present (waiting
  or running) when it is submitted, itself and jobs submitted earlier at the same instant included, and
  T_independent = duration × max(1, gpus ÷ (capacity ÷ N)): the job alone on capacity/N GPUs runs for
  its duration when its gang fits in them, and is slowed in proportion when it does not (the fluid
  idealisation: its work spread over the GPUs it would have). No restart overhead, no wait. Reported:
  `rho_mean`, `rho_p50`, `rho_p90`, `rho_p99`, `rho_max` and `rho_gt1_fraction` (jobs with ρ > 1), over
  the jobs done.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from steward.domain import budget

HOUR_S = budget.HOUR_S
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
    cut_off_at_cycle: int | None = None
    """Set when the engine stopped the run at its storm cut-off (`sim.max_cycles_per_job`)."""
    restart_overhead_s: float = 0.0
    flaps: int = 0
    done: list[tuple[float, float, float]] = field(init=False)
    """(submit, done, T_independent) of every job done, in the order they were done."""
    present: dict[str, int] = field(init=False)
    """Jobs between submit and done, per tenant (tenants with none are absent)."""
    first_submit: float = math.inf
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
        self.done = []
        self.present = {}

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

    def job_arrived(self, tenant: str, submit: float) -> int:
        """A job of `tenant` is submitted; returns N, the tenants with a job present (itself included)."""
        self.first_submit = min(self.first_submit, submit)
        self.present[tenant] = self.present.get(tenant, 0) + 1
        return len(self.present)

    def job_done(self, tenant: str, submit: float, now: float, duration: float, gpus: int, contenders: int) -> None:
        """A job submitted at `submit` is done at `now`; `contenders` is what `job_arrived` returned."""
        left = self.present[tenant] - 1
        if left:
            self.present[tenant] = left
        else:
            del self.present[tenant]
        self.done.append((submit, now, independent_time(duration, gpus, self.capacity, contenders)))

    def preempted(self, ran_s: float) -> None:
        """A preemption was requested `ran_s` seconds after the victim's current run started: count
        it among the flaps when that is within the restart overhead (`preemptions` is counted apart)."""
        if ran_s <= self.restart_overhead_s:
            self.flaps += 1

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
        """Rows (allocation, period, owed_gpu_h, delivered_gpu_h, ratio) for every allocation: the arithmetic of
        `steward.domain.budget` (owed per hour, the ratio as it is, and `credited`, the ratio capped at 1 that
        `owed_delivered_mean`/`_min` average)."""
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
                owed = budget.owed_over_hours(cap_h, d[lo:hi])
                got = sum(r[lo:hi])
                rows.append({
                    "allocation": alloc, "project": alloc in self.projects, "period": k,
                    "start_day": lo / 24.0, "end_day": hi / 24.0,
                    "entitlement": ent, "owed_gpu_h": owed / HOUR_S, "delivered_gpu_h": got / HOUR_S,
                    "demand_gpu_h": sum(d[lo:hi]) / HOUR_S, "ratio": budget.ratio(got, owed),
                    "credited": budget.credited_fraction(got, owed),
                })
        return rows

    def fragmentation_mean(self) -> float:
        hours = self.hours
        waiting = self.gang_wait.hourly.padded(hours)
        frag = self.frag.hourly.padded(hours)
        vals = [frag[h] / waiting[h] for h in range(hours) if waiting[h] > 0]
        return sum(vals) / len(vals) if vals else 0.0

    def figures(self, policy: str, scenario: str, jobs: int, wall_s: float) -> dict[str, Any]:
        rows = [r for r in self.owed_delivered_table() if r["project"] and r["credited"] is not None]
        ratios = [float(r["credited"]) for r in rows]
        delivered = sum(self.busy_funded.hourly.buckets) + sum(self.busy_unfunded.hourly.buckets)
        figs: dict[str, Any] = {
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
        figs.update(self.churn_figures(delivered))
        figs.update(self.completion_figures())
        if self.cut_off_at_cycle is not None:  # only then: the figures stop at that instant
            figs["cut_off"] = {"at_cycle": self.cut_off_at_cycle, "at_s": _round(self.end),
                               "unfinished_jobs": self.unfinished}
        return figs

    def churn_figures(self, delivered_gpu_s: float) -> dict[str, Any]:
        """`preemptions_per_1k_gpu_h`, `flaps`, `flaps_fraction` (module docstring)."""
        gpu_h = delivered_gpu_s / HOUR_S
        return {
            "preemptions_per_1k_gpu_h": _round(self.preemptions * 1000.0 / gpu_h) if gpu_h > 0 else 0.0,
            "flaps": self.flaps,
            "flaps_fraction": _round(self.flaps / self.preemptions) if self.preemptions else 0.0,
        }

    def completion_figures(self) -> dict[str, Any]:
        """JCT, makespan and finish-time fairness ρ over the jobs done (module docstring)."""
        jct = [d - s for s, d, _ in self.done]
        rho = [(d - s) / t for s, d, t in self.done if t > 0]
        makespan = max(d for _, d, _ in self.done) - self.first_submit if self.done else None
        return {
            "jct_mean_s": _round(sum(jct) / len(jct)) if jct else None,
            "jct_p99_s": _round(percentile(jct, 99)),
            "makespan_s": _round(makespan),
            "rho_mean": _round(sum(rho) / len(rho)) if rho else None,
            "rho_p50": _round(percentile(rho, 50)),
            "rho_p90": _round(percentile(rho, 90)),
            "rho_p99": _round(percentile(rho, 99)),
            "rho_max": _round(max(rho)) if rho else None,
            "rho_gt1_fraction": _round(sum(1 for r in rho if r > 1.0) / len(rho)) if rho else None,
        }


def independent_time(duration: float, gpus: int, capacity: int, contenders: int) -> float:
    """Themis' T_independent for one job (module docstring): its duration alone on capacity/N GPUs,
    stretched by gpus ÷ (capacity/N) when its gang is larger than that share."""
    share = capacity / max(1, contenders)
    return duration * max(1.0, gpus / share) if share > 0 else math.inf


def _round(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(x, digits)


def cdf_points(values: Iterable[float]) -> tuple[list[float], list[float]]:
    xs = sorted(values)
    n = len(xs)
    return xs, [(i + 1) / n for i in range(n)]
