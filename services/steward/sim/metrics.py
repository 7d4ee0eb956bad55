"""The figures every run reports, with the definitions of ../shared/data/scenarios/README.md.

Levels (GPUs demanded, busy, delivered) are piecewise constant between simulator events; `Level`
integrates each one into hourly buckets as it changes, so the hour-by-hour definitions (owed =
min(entitlement × capacity, demand) per hour; occupancy's min(capacity, demand) per hour) are exact.

Owed and delivered are the books' (ADR 0066): each funded-asking job's demand interval and runs (with
where they ran) are priced by `steward.domain.budget.job_levels` at the run's GPU model weights, and owed is
summed hour by hour by `budget.add_owed`, in weighted GPU-seconds (plain ones when no weight is set). With
several clusters the figures add occupancy and owed/delivered per cluster and the share of jobs routed where
they could start earliest (`cluster_figures`, `routing_figures`; definitions in ADR 0066).

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
from steward.domain.clusters import WEIGHTS_SETTING, admits, cluster_name
from steward.domain.commands import ROOT

HOUR_S = budget.HOUR_S
WAIT_CLASSES = ("debug", "batch", "large")
DEBUG_CLASSES = ("debug_qualified", "debug_over_quota")
"""ADR 0029: debug jobs qualified at submit (inside their allocation's debug quota; every debug job
for a policy without a lane), and those over the quota. Debug jobs that cannot qualify (no
allocation, no protection asked, not small or short) are in neither, only in `debug`."""


class Hourly:
    """Hourly buckets of an integral (GPU-seconds per hour): bucket i is the hour `origin + i` since time 0
    (hours stay aligned to time 0; `origin` only skips the hours before a trace's first period, `Recorder`)."""

    __slots__ = ("buckets", "origin")

    def __init__(self, origin: int = 0) -> None:
        self.buckets: list[float] = []
        self.origin = origin

    def add(self, t0: float, t1: float, level: float) -> None:
        """Add `level` over [t0, t1) split at hour boundaries."""
        if t1 <= t0 or level == 0.0:
            return
        b = self.buckets
        h0 = int(t0 // HOUR_S)
        h1 = int(t1 // HOUR_S)
        if h1 * HOUR_S == t1:  # [t0, t1) ends on a boundary: nothing falls in hour h1
            h1 -= 1
        o = self.origin
        if h1 - o >= len(b):
            b.extend([0.0] * (h1 - o + 1 - len(b)))
        if h0 == h1:
            b[h0 - o] += level * (t1 - t0)
            return
        b[h0 - o] += level * ((h0 + 1) * HOUR_S - t0)
        for h in range(h0 + 1 - o, h1 - o):
            b[h] += level * HOUR_S
        b[h1 - o] += level * (t1 - h1 * HOUR_S)

    def padded(self, hours: int) -> list[float]:
        return self.buckets + [0.0] * (hours - len(self.buckets))


class Level:
    """A piecewise-constant quantity (GPUs) integrated hour by hour as it changes."""

    __slots__ = ("hourly", "since", "value")

    def __init__(self, start: float = 0.0, origin: int = 0) -> None:
        self.value = 0.0
        self.since = start
        self.hourly = Hourly(origin)

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
    """The run's first instant (the engine's: its first submit). The hourly figures begin at the start of the owed
    period holding it (`first_hour`; 0 for every trace that starts within its first period), so a trace written
    in epoch seconds or milliseconds costs its own span, not every hour since 1970 (it ran out of memory)."""
    nodes: Sequence[tuple[str, int, str, str]] = ()
    """(id, GPUs, model, cluster) of every node: where a run is and what it costs (`budget.Prices`)."""
    weights: Mapping[str, float] = field(default_factory=dict)
    """The GPU model weights in force for the whole run (the setting `gpu_model_weights`)."""
    pins: Mapping[str, str] = field(default_factory=dict)
    """Each pinned allocation's cluster, its own pin or an ancestor's (ADR 0067; `scenario.scenario_pins`)."""
    demand: Level = field(init=False)
    busy_funded: Level = field(init=False)
    busy_unfunded: Level = field(init=False)
    alloc_demand: dict[str, Level] = field(init=False)
    """Each project's funded-asking GPUs present now (plain GPUs): the scheduler's demand input (ADR 0016),
    not the books (those are `books`, priced by `steward.domain.budget`)."""
    books: dict[int, JobBook] = field(init=False)
    prices: budget.Prices = field(init=False)
    weighted_capacity: float = field(init=False)
    """Σ GPUs × weight of their model (`capacity` when every weight is 1): what entitlement is a share of."""
    cluster_capacity: dict[str, int] = field(init=False)
    cluster_weighted: dict[str, float] = field(init=False)
    """Per cluster, Σ GPUs × weight: what a pinned allocation could be delivered there (`owed_ceiling_hourly`)."""
    cluster_busy: dict[str, Level] = field(init=False)
    cluster_want: dict[str, Level] = field(init=False)
    """Per cluster (several clusters only): GPUs busy there, and GPUs of the jobs that run there or wait and
    may run there (`cluster_occupancy`)."""
    routed_jobs: int = 0
    routed_earliest: int = 0
    _hourly: HourlyBooks | None = field(init=False, default=None)
    _rows: list[tuple[dict[str, Any], dict[str, list[float]]]] | None = field(init=False, default=None)
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
    first_hour: int = field(init=False)
    """The hour (since time 0) of the first hourly bucket: a whole number of owed periods (`start`)."""

    def __post_init__(self) -> None:
        per = self.period_hours
        self.first_hour = int(self.start // (per * HOUR_S)) * per if self.start > 0 else 0
        self.demand = self._level()
        self.busy_funded = self._level()
        self.busy_unfunded = self._level()
        self.alloc_demand = {p: self._level() for p in self.projects}
        self.books = {}
        self.prices = budget.Prices()
        for node, gpus, model, cluster in self.nodes:
            self.prices.see("NodeRegistered", {"node_id": node, "gpus": gpus, "gpu_model": model,
                                               "cluster": cluster}, self.start)
        if self.weights:
            self.prices.see("PolicySet", {"changed": {WEIGHTS_SETTING: dict(self.weights)}}, self.start)
        self.weighted_capacity = (
            math.fsum(g * budget.weight(self.weights, m) for _, g, m, _ in self.nodes) if self.nodes
            else float(self.capacity))
        if all(budget.weight(self.weights, m) == 1.0 for _, _, m, _ in self.nodes):
            self.weighted_capacity = float(self.capacity)  # the plain sum, to the bit
        self.cluster_capacity = {}
        self.cluster_weighted = {}
        for _, g, m, c in self.nodes:
            name = cluster_name(c)
            self.cluster_capacity[name] = self.cluster_capacity.get(name, 0) + g
            self.cluster_weighted[name] = self.cluster_weighted.get(name, 0.0) + g * budget.weight(self.weights, m)
        multi = len(self.cluster_capacity) > 1
        self.cluster_busy = {c: self._level() for c in self.cluster_capacity} if multi else {}
        self.cluster_want = {c: self._level() for c in self.cluster_capacity} if multi else {}
        self.gang_wait = self._level()
        self.frag = self._level()
        self.waits = {c: [] for c in (*WAIT_CLASSES, *DEBUG_CLASSES)}
        self.done = []
        self.present = {}

    def _level(self) -> Level:
        return Level(self.start, self.first_hour)

    @property
    def period_hours(self) -> int:
        """Hours of one owed period (`owed_period_days`)."""
        return max(1, round(self.owed_period_days * 24))

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

    # --- the books: owed and delivered, priced by steward.domain.budget ---------------------------------

    def book_submit(self, key: int, project: str, gpus: int, request: tuple[tuple[str, ...], tuple[str, ...]],
                    now: float) -> None:
        """A funded-asking job (module docstring) is submitted: its demand starts."""
        self.books[key] = JobBook(project, gpus, request, since=now)

    def book_start(self, key: int, now: float, assignments: Sequence[tuple[str, int]]) -> None:
        """A run of the job starts on `assignments` ((node, GPUs) each)."""
        book = self.books[key]
        book.placement = self.prices.placement({n: range(g) for n, g in assignments})
        book.run_since = now

    def book_stop(self, key: int, now: float, done: bool) -> None:
        """Its run ends; `done`: the job leaves for good (its demand ends), else it waits again."""
        book = self.books[key]
        if book.run_since is not None:
            book.runs.append((book.run_since, now, book.placement))
            book.run_since = None
        if done and book.since is not None:
            book.demand.append((book.since, now))
            book.since = None

    def close(self, now: float) -> None:
        self.end = now
        levels: list[Level] = [self.demand, self.busy_funded, self.busy_unfunded, self.gang_wait, self.frag]
        levels += list(self.alloc_demand.values())
        levels += list(self.cluster_busy.values()) + list(self.cluster_want.values())
        for lvl in levels:
            lvl.close(now)
        for book in self.books.values():
            if book.run_since is not None:
                book.runs.append((book.run_since, now, book.placement))
                book.run_since = None
            if book.since is not None:
                book.demand.append((book.since, now))
                book.since = None
        self._hourly = self._rows = None

    # --- figures -------------------------------------------------------------------------------

    @property
    def hours(self) -> int:
        """Hourly buckets of the run, from `first_hour`."""
        return max(1, math.ceil(self.end / HOUR_S) - self.first_hour)

    def occupancy(self) -> float:
        hours = self.hours
        demand = self.demand.hourly.padded(hours)
        busy_f = self.busy_funded.hourly.padded(hours)
        busy_u = self.busy_unfunded.hourly.padded(hours)
        cap_h = self.capacity * HOUR_S
        denom = sum(min(cap_h, d) for d in demand)
        busy = sum(busy_f) + sum(busy_u)
        return busy / denom if denom > 0 else 1.0

    def project_hourly(self) -> HourlyBooks:
        """Each project's hourly weighted demand and delivered GPU-seconds, and (several clusters) the same
        by place (cluster, model): `budget.job_levels` of every funded-asking job (the books' one home of
        "usage charged at the model's weight", ADR 0062), integrated hour by hour. With every weight 1 the
        levels are the plain GPUs at the same instants, so the figures are the plain ones to the bit."""
        if self._hourly is not None:
            return self._hourly
        end = self.end
        changes: dict[str, tuple[list[tuple[float, float]], list[tuple[float, float]]]] = {
            p: ([], []) for p in self.projects}
        at: dict[tuple[str, budget.Place], tuple[list[tuple[float, float]], list[tuple[float, float]]]] = {}
        split = len(self.cluster_capacity) > 1
        for book in self.books.values():
            wanted, ran = budget.job_levels(book.gpus, book.request, book.demand, book.runs, self.prices)
            mine = changes.setdefault(book.project, ([], []))
            for side, levels in ((0, wanted), (1, ran)):
                for a, b, v, place, moved in levels:
                    if b <= a or v == 0.0:
                        continue
                    if not moved:
                        mine[side].append((a, v))
                        mine[side].append((b, -v))
                    if split:
                        there = at.setdefault((book.project, place), ([], []))[side]
                        there.append((a, v))
                        there.append((b, -v))
        hours = self.hours
        out = HourlyBooks({}, {}, {})
        for project, (d, r) in changes.items():
            out.demand[project] = _integrate(d, self._level(), end, hours)
            out.delivered[project] = _integrate(r, self._level(), end, hours)
        for key, (d, r) in at.items():
            out.at[key] = (_integrate(d, self._level(), end, hours), _integrate(r, self._level(), end, hours))
        self._hourly = out
        return out

    def alloc_hourly(self) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
        """Hourly weighted demand and delivered GPU-seconds for every allocation (inner ones summed)."""
        hours = self.hours
        books = self.project_hourly()
        demand: dict[str, list[float]] = {a: [0.0] * hours for a in self.entitlement}
        delivered: dict[str, list[float]] = {a: [0.0] * hours for a in self.entitlement}
        for p in self.projects:
            d, r = books.demand[p], books.delivered[p]
            node: str | None = p
            while node is not None:
                dd, rr = demand[node], delivered[node]
                for h in range(hours):
                    dd[h] += d[h]
                    rr[h] += r[h]
                node = self.parents.get(node)
        return demand, delivered

    def entitled_hourly(self, allocation: str) -> float:
        """An allocation's entitled weighted GPU-seconds in one hour: entitlement × weighted capacity."""
        return self.entitlement[allocation] * self.weighted_capacity * HOUR_S

    def owed_ceiling_hourly(self, allocation: str) -> float | None:
        """ADR 0067: the most a pinned allocation is owed in one hour, what its pin's cluster could deliver
        (its weighted GPU-seconds; `budget.capped_owed`); None when it is not pinned."""
        pin = self.pins.get(allocation)
        return self.cluster_weighted.get(pin, 0.0) * HOUR_S if pin else None

    def owed_delivered_table(self) -> list[dict[str, Any]]:
        """Rows (allocation, period, owed_gpu_h, delivered_gpu_h, ratio) for every allocation, in weighted
        GPU-hours: hour by hour `steward.domain.budget.add_owed` (owed = min(entitled, demand), inner nodes the
        sums of their projects), the ratio as it is, and `credited`, the ratio capped at 1 that
        `owed_delivered_mean`/`_min` average. Several clusters: also each row's `by_cluster` (owed split as
        demand is, delivered where it ran: the split of ADR 0062)."""
        return [row for row, _split in self._period_rows()]

    def _period_rows(self) -> list[tuple[dict[str, Any], dict[str, list[float]]]]:
        if self._rows is not None:
            return self._rows
        books = self.project_hourly()
        hours = self.hours
        per = self.period_hours
        periods = math.ceil(hours / per)
        shares = {a: (p if p is not None else ROOT, 0.0) for a, p in self.parents.items()}
        entitled = {a: self.entitled_hourly(a) for a in self.entitlement}
        caps = {a: cap for a in self.entitlement if (cap := self.owed_ceiling_hourly(a)) is not None}
        split_on = len(self.cluster_capacity) > 1
        by_project_at: dict[str, list[tuple[budget.Place, list[float], list[float]]]] = {}
        for (project, place), (d, r) in books.at.items():
            by_project_at.setdefault(project, []).append((place, d, r))
        rows: list[tuple[dict[str, Any], dict[str, list[float]]]] = []
        figures: list[tuple[dict[str, dict[str, float]], budget.Split]] = []
        for k in range(periods):
            out: dict[str, dict[str, float]] = {}
            split: budget.Split | None = {} if split_on else None
            for h in range(k * per, min(hours, (k + 1) * per)):
                demand = {p: books.demand[p][h] for p in self.projects}
                delivered = {p: books.delivered[p][h] for p in self.projects}
                demand_at: dict[str, dict[budget.Place, float]] = {}
                delivered_at: dict[str, dict[budget.Place, float]] = {}
                if split is not None:
                    for project, places in by_project_at.items():
                        demand_at[project] = {pl: d[h] for pl, d, _ in places if d[h]}
                        delivered_at[project] = {pl: r[h] for pl, _, r in places if r[h]}
                budget.add_owed(out, entitled, demand, delivered, shares, split, demand_at, delivered_at, caps)
            figures.append((out, split or {}))
        for alloc, ent in self.entitlement.items():
            for k, (out, split) in enumerate(figures):
                lo, hi = k * per, min(hours, (k + 1) * per)
                f = out.get(alloc, dict.fromkeys(budget.FIGURES, 0.0))
                owed, got = f["owed_gpu_s"], f["delivered_gpu_s"]
                row: dict[str, Any] = {
                    "allocation": alloc, "project": alloc in self.projects, "period": k,
                    "start_day": (self.first_hour + lo) / 24.0, "end_day": (self.first_hour + hi) / 24.0,
                    "entitlement": ent, "owed_gpu_h": owed / HOUR_S, "delivered_gpu_h": got / HOUR_S,
                    "demand_gpu_h": f["demand_gpu_s"] / HOUR_S, "ratio": budget.ratio(got, owed),
                    "credited": budget.credited_fraction(got, owed),
                }
                per_cluster: dict[str, list[float]] = {}
                for (cluster, _model), (o, dl, _dm) in split.get(alloc, {}).items():
                    c = per_cluster.setdefault(cluster, [0.0, 0.0])
                    c[0] += o
                    c[1] += dl
                rows.append((row, per_cluster))
        self._rows = rows
        return rows

    def cluster_figures(self) -> dict[str, dict[str, Any]]:
        """Several clusters: per cluster, occupancy (busy ÷ Σ hours min(its capacity, the GPUs of jobs running
        there or waiting that may run there)) and owed/delivered mean and min over projects × periods owed
        something there (owed split as demand is, ADR 0062). Empty with one cluster."""
        if len(self.cluster_capacity) < 2:
            return {}
        hours = self.hours
        out: dict[str, dict[str, Any]] = {}
        credited: dict[str, list[float]] = {c: [] for c in self.cluster_capacity}
        for row, per_cluster in self._period_rows():
            if not row["project"]:
                continue
            for cluster, (owed, got) in per_cluster.items():
                c = budget.credited_fraction(got, owed)
                if c is not None and cluster in credited:
                    credited[cluster].append(c)
        for cluster, cap in sorted(self.cluster_capacity.items()):
            busy = sum(self.cluster_busy[cluster].hourly.buckets)
            want = self.cluster_want[cluster].hourly.padded(hours)
            denom = sum(min(cap * HOUR_S, w) for w in want)
            ratios = credited[cluster]
            out[cluster] = {
                "gpus": cap,
                "occupancy": _round(busy / denom if denom > 0 else 1.0),
                "owed_delivered_mean": _round(sum(ratios) / len(ratios)) if ratios else None,
                "owed_delivered_min": _round(min(ratios)) if ratios else None,
            }
        return out

    def routing_figures(self) -> dict[str, Any]:
        """Several clusters: `routed_jobs`, the started jobs that could run on more than one cluster, and
        `routed_earliest_fraction`, the share of them that ran on a cluster where they could have started
        earliest (module docstring)."""
        if len(self.cluster_capacity) < 2:
            return {}
        return {"routed_jobs": self.routed_jobs,
                "routed_earliest_fraction": _round(self.routed_earliest / self.routed_jobs)
                if self.routed_jobs else None}

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
        clusters = self.cluster_figures()
        if clusters:  # several clusters only (ADR 0066)
            figs["by_cluster"] = clusters
            figs.update(self.routing_figures())
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


@dataclass(slots=True)
class JobBook:
    """One funded-asking job as the books see it: what `budget.job_levels` takes."""

    project: str
    gpus: int
    request: tuple[tuple[str, ...], tuple[str, ...]]
    since: float | None = None  # waiting or running since (its demand), None once done
    run_since: float | None = None
    placement: budget.Placement = ()
    demand: list[tuple[float, float]] = field(default_factory=list)
    runs: list[tuple[float, float, budget.Placement]] = field(default_factory=list)


@dataclass(slots=True)
class HourlyBooks:
    """Hourly weighted GPU-seconds per project (demand, delivered) and per (project, place) (several clusters)."""

    demand: dict[str, list[float]]
    delivered: dict[str, list[float]]
    at: dict[tuple[str, budget.Place], tuple[list[float], list[float]]]


def _integrate(changes: list[tuple[float, float]], lvl: Level, end: float, hours: int) -> list[float]:
    """Hourly integral of a level given as (instant, change) pairs (sorted here, stable at one instant), into
    `lvl` (a new one, the recorder's `_level`)."""
    for t, dv in sorted(changes, key=lambda c: c[0]):
        lvl.add(t, dv)
    lvl.close(end)
    return lvl.hourly.padded(hours)


def admissible_clusters(nodes: Sequence[tuple[str, int, str, str]], gpu_models: Sequence[str],
                        clusters: Sequence[str], gpus: int) -> tuple[str, ...]:
    """The clusters where a job with this request could ever run: its admissible nodes there hold `gpus`
    together (`domain.clusters.admits`; gangs never span clusters)."""
    per: dict[str, int] = {}
    for _, g, model, cluster in nodes:
        if admits(gpu_models, clusters, model, cluster):
            name = cluster_name(cluster)
            per[name] = per.get(name, 0) + g
    return tuple(sorted(c for c, total in per.items() if total >= gpus))


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
