"""The what-if preview of an allocation change (DESIGN.md "Owed vs delivered"; issue 8, "before saving, a
what-if preview from the simulator on recent history").

The recent history (the jobs submitted in the last `window_s`, newest `max_jobs` at most) is turned into a
simulator scenario with every cluster's nodes (their clusters and GPU models), each job's request (the models
and clusters it accepts, its allocation's pin applied), the current allocation tree and the policy settings in
force
(`PolicySet`), and replayed twice through the simulator (`steward.sim.simulate`, the live policy cycle):
once with the current tree and once with the proposed shares. The answer is owed vs delivered per
allocation and p50/p90 waits per class for both runs.

Owed vs delivered are summed hour by hour over the window (owed = min(entitlement × capacity, demand)); the
replay itself runs on until the last job ends, and waits count every replayed job.

How the history becomes a trace. The projections choose the jobs (submitted in the window, newest
`max_jobs`) and give their requests; their run time is measured on the event log, because the
projection keeps only a job's latest run and a requeued job (preempted, lost with its node) would count
its last run only:
- a job that ran is replayed with the sum of its runs, each from `JobStarted` (its `started_at`) to the
  event that ended it (the simulator's `--from-events` rule: `steward.sim.history.RUN_ENDS`), a run
  still open counting up to now;
- a job waiting again after running is replayed with what it ran plus its protection time (what is left
  is not known yet); a job still waiting that never ran with its protection time, at least one minute; a
  job cancelled before it ever ran is left out (it asked for no work);
- submit times are kept (relative to the window's start), so the arrival pattern is the real one.

Cost is bounded: at most `max_jobs` jobs (default 2000, at most 5000), simulations run one at a time on a
dedicated thread, each run is cached by a digest of its inputs (the store head moves them) so the run
without the change is shared by every proposal, and a request waits at most `timeout_s`; a run that is
still going keeps going and its result is served to the next request.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Annotated, Any

import strawberry
from sqlalchemy import desc, select

from steward.api.context import Context, UserError
from steward.api.payloads import InvalidInput, NotAuthorised, ShareInput
from steward.api.scalars import BigInt
from steward.auth.access import ROOT, Capability, subtree
from steward.domain import budget
from steward.domain.budget import entitlements
from steward.domain.clusters import cluster_name, effective_pin, largest_gang, pinned_clusters
from steward.domain.decide import (
    require_children_sum_at_most_one,
    require_known_parent,
    require_no_cycle_and_depth,
    require_shares_in_unit_interval,
)
from steward.domain.errors import DomainError
from steward.domain.state import AllocationNode, LedgerState
from steward.sim.errors import SimError
from steward.sim.history import RUN_ENDS
from steward.sim.run import simulate as sim_run
from steward.sim.scenario import (
    AllocationSpec,
    MetricsSpec,
    NodeSpec,
    Scenario,
    ScenarioPolicy,
    SimOptions,
    TraceJob,
)
from steward.store import schema as tables
from steward.store.eventstore import EventStore

DAY_S = 86400.0
HOUR_S = 3600.0
DEFAULT_WINDOW_S = 7 * DAY_S
MIN_WINDOW_S = 3600.0
MAX_WINDOW_S = 30 * DAY_S
DEFAULT_MAX_JOBS = 2000
MAX_JOBS = 5000
DEFAULT_TIMEOUT_S = 20.0
TIME_BUCKET_S = 60.0  # "now" is rounded up to the minute, so repeated previews share their runs
POLICY = "steward"
WAIT_CLASSES = ("debug", "batch", "large")
SIM_CLASSES = ("debug", "batch", "interactive")
CACHE_SIZE = 32


class WhatIfRefused(Exception):
    """A proposal the preview cannot run: the message names the problem (shown to the user)."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# -- inputs: the recent history as plain values --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistoryJob:
    job_id: str
    project: str
    job_class: str
    gpus: int
    min_runtime_s: float
    resumable: bool
    priority: int
    submitted_at: float
    duration_s: float
    # the GPU models and clusters it accepts (empty: any), its allocation's pin applied (ADR 0057, 0067)
    gpu_models: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class History:
    since: float
    until: float
    nodes: tuple[tuple[str, int, str, tuple[str, ...], str], ...]  # (name, gpus, model, path, cluster)
    shares: Mapping[str, tuple[str, float]]  # child -> (parent, share)
    policy: Mapping[str, Any]  # the PolicySet overrides of the steward preset
    jobs: tuple[HistoryJob, ...]
    capped: bool  # more jobs were submitted in the window than were kept
    pins: Mapping[str, str] = field(default_factory=dict)  # tree node -> its own pin (ADR 0067)

    def digest(self, shares: Mapping[str, tuple[str, float]] | None = None) -> str:
        body = json.dumps([self.since, self.until, self.nodes, sorted((shares or self.shares).items()),
                           sorted(self.pins.items()),
                           sorted(self.policy.items()), [list(_job_key(j)) for j in self.jobs]],
                          default=str, separators=(",", ":"))
        return hashlib.sha256(body.encode()).hexdigest()


def _job_key(j: HistoryJob) -> tuple[Any, ...]:
    return (j.job_id, j.project, j.job_class, j.gpus, j.min_runtime_s, j.resumable, j.priority, j.submitted_at,
            round(j.duration_s, 3), j.gpu_models, j.clusters)


def history_job(row: Mapping[str, Any], until: float, ran_s: float | None = None,
                request: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())) -> HistoryJob | None:
    """One projection row as a replayable job (None: it asked for no work). `ran_s`: the job's run time
    measured on the log (`run_times`); None: the projection's latest run alone. `request`: the GPU models and
    clusters it accepts (`job_requests`, its allocation's pin applied)."""
    started, ended = row["started_at"], row["ended_at"]
    waiting = row["state"] in ("QUEUED", "PREEMPTED")
    if ran_s is not None and ran_s > 0:
        duration = ran_s + (max(60.0, float(row["min_runtime_s"])) if waiting else 0.0)
    elif started is not None:
        duration = max(1.0, (float(ended) if ended is not None else until) - float(started))
    elif waiting:
        duration = max(60.0, float(row["min_runtime_s"]))
    else:
        return None
    cls = str(row["job_class"])
    return HistoryJob(job_id=str(row["job_id"]), project=str(row["project"]),
                      job_class=cls if cls in SIM_CLASSES else "batch", gpus=int(row["gpus"]),
                      min_runtime_s=float(row["min_runtime_s"]), resumable=bool(row["resumable"]),
                      priority=int(row["priority"]), submitted_at=float(row["submitted_at"]), duration_s=duration,
                      gpu_models=request[0], clusters=request[1])


RUN_EVENTS_CHUNK = 500  # job streams per query


def _job_events(store: EventStore, job_ids: Sequence[str], kinds: Sequence[str]) -> list[Any]:
    """The events of these kinds on these jobs' streams, in log order (a query per `RUN_EVENTS_CHUNK` jobs)."""
    t = tables.events
    rows: list[Any] = []
    with store.engine.connect() as conn:
        for i in range(0, len(job_ids), RUN_EVENTS_CHUNK):
            streams = [f"job-{j}" for j in job_ids[i:i + RUN_EVENTS_CHUNK]]
            q = (select(t.c.stream_id, t.c.type, t.c.payload, t.c.recorded_at)
                 .where(t.c.stream_id.in_(streams), t.c.type.in_(kinds)).order_by(t.c.position))
            rows.extend(conn.execute(q))
        conn.rollback()
    return rows


def run_times(store: EventStore, job_ids: Sequence[str], until: float) -> dict[str, float]:
    """Each job's run time on the log: the sum of its runs, each from `JobStarted` (`started_at`, else
    when it was recorded) to the event that ended it (`RUN_ENDS`, when it was recorded); a run still open
    counts up to `until`. Jobs that never started are absent. Synchronous: call it in a thread."""
    ran: dict[str, float] = {}
    open_at: dict[str, float] = {}
    for row in _job_events(store, job_ids, ("JobStarted", *sorted(RUN_ENDS))):
        job, at = str(row.stream_id).removeprefix("job-"), float(row.recorded_at)
        if row.type == "JobStarted":
            started = row.payload.get("started_at") if isinstance(row.payload, dict) else None
            real = isinstance(started, int | float) and not isinstance(started, bool) and started > 0
            open_at[job] = float(started) if real and started is not None else at
            ran.setdefault(job, 0.0)
        elif job in open_at:
            ran[job] += max(0.0, at - open_at.pop(job))
    for job, start in open_at.items():
        ran[job] += max(0.0, until - start)
    return ran


def job_requests(store: EventStore, job_ids: Sequence[str]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """The GPU models and clusters each job accepts, as its `JobSubmitted` recorded them (absent: any; the
    projection keeps no request). Synchronous: call it in a thread."""
    out: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for row in _job_events(store, job_ids, ("JobSubmitted",)):
        p = row.payload if isinstance(row.payload, dict) else {}
        out[str(row.stream_id).removeprefix("job-")] = (tuple(str(m) for m in p.get("gpu_models") or ()),
                                                        tuple(str(c) for c in p.get("clusters") or ()))
    return out


def load_history(store: EventStore, now: float, window_s: float, max_jobs: int) -> History:
    """Read the projections and the latest `PolicySet` (synchronous: call it in a thread)."""
    until = math.ceil(now / TIME_BUCKET_S) * TIME_BUCKET_S
    since = until - window_s
    j = tables.proj_jobs
    with store.engine.connect() as conn:
        n = tables.proj_nodes
        nodes = [dict(r._mapping) for r in conn.execute(select(n).order_by(n.c.node_id))]
        allocs = [dict(r._mapping) for r in conn.execute(select(tables.proj_allocations))]
        rows = [dict(r._mapping) for r in conn.execute(
            select(j).where(j.c.submitted_at >= since, j.c.submitted_at < until)
            .order_by(desc(j.c.submitted_at), desc(j.c.job_id)).limit(max_jobs + 1))]
        e = tables.events
        pol = conn.execute(select(e.c.payload).where(e.c.type == "PolicySet").order_by(desc(e.c.position))
                           .limit(1)).first()
        conn.rollback()
    capped = len(rows) > max_jobs
    kept = rows[:max_jobs]
    ids = [str(r["job_id"]) for r in kept]
    ran, requests = run_times(store, ids, until), job_requests(store, ids)
    parents = {str(a["name"]): str(a["parent"]) for a in allocs}
    pins = {str(a["name"]): str(a["pin"]) for a in allocs if a.get("pin")}

    def request(row: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        models, clusters = requests.get(str(row["job_id"]), ((), ()))
        return models, pinned_clusters(clusters, effective_pin(str(row["project"]), parents, pins))

    jobs = [h for r in reversed(kept)
            if (h := history_job(r, until, ran.get(str(r["job_id"])), request(r))) is not None]
    policy = dict(pol[0].get("settings", {})) if pol is not None and isinstance(pol[0], dict) else {}
    return History(
        since=since, until=until,
        nodes=tuple((str(n["node_id"]), int(n["gpus"]), str(n["gpu_model"]), tuple(str(p) for p in n["path"]),
                     cluster_name(str(n["cluster"] or ""))) for n in nodes if n["state"] != "unhealthy"),
        shares={str(a["name"]): (str(a["parent"]), float(a["share"])) for a in allocs},
        policy=policy, jobs=tuple(jobs), capped=capped, pins=pins)


# -- the proposal ---------------------------------------------------------------------------------------


def proposed_shares(current: Mapping[str, tuple[str, float]], parent: str,
                    shares: Sequence[tuple[str, float]]) -> dict[str, tuple[str, float]]:
    """The tree with the change applied, after the same checks the ledger makes on `SetAllocations`
    (DESIGN.md "Org tree and allocations"); raises WhatIfRefused naming the problem."""
    if not shares:
        raise WhatIfRefused("shares", "give at least one child and its proposed share")
    names = [c for c, _ in shares]
    if len(set(names)) != len(names):
        raise WhatIfRefused("shares", "a child appears more than once")
    for child, share in shares:
        if not math.isfinite(share):
            raise WhatIfRefused("shares", f"share of '{child}' must be a finite number, got {share}")
    state = LedgerState(allocations={n: AllocationNode(n, p, s) for n, (p, s) in current.items()})
    change = dict(shares)
    try:
        require_known_parent(state, parent)
        require_shares_in_unit_interval(change)
        require_no_cycle_and_depth(state, parent, change)
        require_children_sum_at_most_one(state, parent, change)
    except DomainError as err:
        raise WhatIfRefused("shares", err.message) from None
    unknown = [c for c in names if c not in current]
    if unknown:
        raise WhatIfRefused("shares", f"'{unknown[0]}' is not a child of '{parent}' yet: the preview replays "
                                      "recorded jobs, and a new node has none (save it, then preview its share)")
    return {**current, **{c: (parent, s) for c, s in shares}}


# -- the simulation -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AllocationRun:
    owed_gpu_s: float
    delivered_gpu_s: float


@dataclass(frozen=True, slots=True)
class RunFigures:
    allocations: Mapping[str, AllocationRun]
    waits: Mapping[str, tuple[float | None, float | None, int]]  # class -> (p50, p90, jobs)
    occupancy: float | None
    preemptions: int
    simulated_s: float
    wall_s: float


def scenario_of(history: History, shares: Mapping[str, tuple[str, float]]) -> Any:
    """The history as a simulator `Scenario` (the sim's public dataclasses)."""
    children: dict[str, list[str]] = {}
    for name, (parent, _s) in shares.items():
        children.setdefault(parent, []).append(name)
    specs: dict[str, AllocationSpec] = {}

    ents = entitlements(shares)

    def walk(parent: str, depth: int) -> None:
        for name in sorted(children.get(parent, [])):
            share = shares[name][1]
            specs[name] = AllocationSpec(name=name, parent=None if parent == ROOT else parent, share=share,
                                         entitlement=ents[name], depth=depth,
                                         children=tuple(sorted(children.get(name, []))),
                                         pin=history.pins.get(name, ""))
            walk(name, depth + 1)

    walk(ROOT, 1)
    nodes = tuple(NodeSpec(name=n, gpus=g, gpu_model=m, path=p if p and p[-1] == n else (*p, n), cluster=c)
                  for n, g, m, p, c in history.nodes)
    offered = [(n.gpus, n.gpu_model, n.cluster) for n in nodes]
    leaves = {n for n, s in specs.items() if s.is_project}
    jobs = []
    for i, j in enumerate(history.jobs):
        if largest_gang(offered, j.gpu_models, j.clusters)[0] < j.gpus:
            continue  # it could never run here: no cluster has enough of the GPUs it accepts
        if j.project in specs and j.project not in leaves:
            continue  # submitted to a node that has since gained children
        jobs.append(TraceJob(job_id=j.job_id, submit_s=j.submitted_at - history.since, duration_s=j.duration_s,
                             gpus=j.gpus, tenant=j.project, job_class=j.job_class, min_runtime_s=j.min_runtime_s,
                             resumable=j.resumable, priority=j.priority, line=i + 2, gpu_models=j.gpu_models,
                             clusters=j.clusters))
    pol = history.policy
    policy = ScenarioPolicy(
        window_days=float(pol.get("window_s", 7 * DAY_S)) / DAY_S,
        max_min_runtime_s=float(pol.get("max_min_runtime_s", 8 * 3600.0)),
        session_cap_s=float(pol.get("session_cap_s", 8 * 3600.0)),
        checkpoint_interval_s=float(pol.get("checkpoint_interval_s", 1800.0)),
        restart_overhead_s=float(pol.get("restart_overhead_s", 60.0)),
        preemption_grace_s=float(pol.get("preemption_grace_s", 120.0)),
    )
    return Scenario(
        name="what-if", source="event store", trace_path="(projections)", nodes=nodes, allocations=specs,
        policy=policy, metrics=MetricsSpec(large_job_gpus=32, owed_period_days=3650.0),
        sim=SimOptions(), jobs=tuple(jobs), settings_overrides=dict(pol))


def simulate(history: History, shares: Mapping[str, tuple[str, float]]) -> RunFigures:
    """Replay the history under `shares` through the simulator (synchronous, CPU-bound)."""
    scenario = scenario_of(history, shares)
    t0 = time.perf_counter()
    if not scenario.nodes:
        raise WhatIfRefused(None, "the cluster has no nodes to replay the history on")
    if not scenario.jobs:
        return RunFigures({}, {c: (None, None, 0) for c in WAIT_CLASSES}, None, 0, 0.0, 0.0)
    try:
        result = sim_run(scenario, POLICY)
    except SimError as err:
        raise WhatIfRefused(None, f"the simulator refused the history: {err}") from None
    rec = result.recorder
    # owed vs delivered over the window itself (the replay runs on until the last job ends, and over that
    # whole horizon every allocation gets all its work delivered whatever the shares)
    hours = max(1, math.ceil((history.until - history.since) / HOUR_S))
    demand, delivered = rec.alloc_hourly()
    allocs: dict[str, AllocationRun] = {}
    for alloc in rec.entitlement:
        cap_h = rec.entitled_hourly(alloc)  # weighted GPU-seconds, as the books (ADR 0066)
        d, r = demand.get(alloc, []), delivered.get(alloc, [])
        owed = budget.owed_over_hours(cap_h, d[:hours], rec.owed_ceiling_hourly(alloc))  # pinned: ADR 0067
        allocs[alloc] = AllocationRun(owed, sum(r[:hours]))
    figs = result.figures
    waits = {c: (figs["wait_p50_s"].get(c), figs["wait_p90_s"].get(c), len(rec.waits.get(c, ())))
             for c in WAIT_CLASSES}
    return RunFigures(allocs, waits, figs.get("occupancy"), int(figs.get("preemptions", 0)), rec.end,
                      time.perf_counter() - t0)


class Runner:
    """One simulation at a time, results cached by the digest of their inputs (the store head and the
    change move them); a request that waits too long leaves its run going for the next request."""

    def __init__(self, cache_size: int = CACHE_SIZE) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="whatif")
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, Future[RunFigures]] = OrderedDict()
        self.cache_size = cache_size
        self.runs = 0

    def submit(self, history: History, shares: Mapping[str, tuple[str, float]]) -> tuple[Future[RunFigures], bool]:
        key = history.digest(shares)
        with self._lock:
            fut = self._cache.get(key)
            if fut is not None and not (fut.done() and fut.exception() is not None):
                self._cache.move_to_end(key)
                return fut, True
            self.runs += 1
            fut = self._pool.submit(simulate, history, shares)
            self._cache[key] = fut
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
            return fut, False


RUNNERS: weakref.WeakKeyDictionary[EventStore, Runner] = weakref.WeakKeyDictionary()
_RUNNERS_LOCK = threading.Lock()


def runner_for(store: EventStore) -> Runner:
    with _RUNNERS_LOCK:
        runner = RUNNERS.get(store)
        if runner is None:
            runner = RUNNERS[store] = Runner()
        return runner


# -- GraphQL --------------------------------------------------------------------------------------------


@strawberry.type(description="One allocation in the what-if: its share, and owed vs delivered in the "
                             "replay without and with the change (GPU-seconds).")
class WhatIfAllocation:
    name: str
    parent: str
    depth: int
    is_project: bool
    changed: bool
    share_before: float
    share_after: float
    entitlement_before: float
    entitlement_after: float
    owed_before: float
    delivered_before: float
    ratio_before: float | None = strawberry.field(description="delivered / owed, as it is: above 1 is over-delivery "
                                                              "(null: nothing owed).")
    owed_after: float
    delivered_after: float
    ratio_after: float | None


@strawberry.type(description="Waits from submission to first start in the replay, by class ('large': jobs of "
                             "32 GPUs or more).")
class WhatIfWaits:
    job_class: str
    jobs: int
    p50_before_s: float | None
    p90_before_s: float | None
    p50_after_s: float | None
    p90_after_s: float | None


@strawberry.type(description="The simulator's replay of recent history without and with a proposed change.")
class WhatIfPreview:
    parent: str
    since: float
    until: float
    window_s: float
    jobs: int = strawberry.field(description="Jobs replayed.")
    jobs_capped: bool = strawberry.field(description="True when the window held more jobs than the cap "
                                                     "(the newest were kept).")
    capacity_gpus: BigInt
    policy: str
    cached: bool = strawberry.field(description="Both runs came from the cache.")
    wall_s: float = strawberry.field(description="Simulation time of the runs made for this request.")
    occupancy_before: float | None
    occupancy_after: float | None
    preemptions_before: int
    preemptions_after: int
    allocations: list[WhatIfAllocation]
    waits: list[WhatIfWaits]
    summary: str


WhatIfResult = Annotated[WhatIfPreview | InvalidInput | NotAuthorised, strawberry.union("WhatIfResult")]


def _ratio(owed: float, delivered: float) -> float | None:
    return budget.ratio(delivered, owed)


def preview_of(history: History, parent: str, after: Mapping[str, tuple[str, float]], before: RunFigures,
               with_change: RunFigures, visible: set[str] | None, cached: bool, wall_s: float) -> WhatIfPreview:
    """The answer: the parent's subtree (what the principal may see of it), with and without."""
    ent_b, ent_a = entitlements(history.shares), entitlements(after)
    under = subtree({n: p for n, (p, _s) in history.shares.items()}, [parent])
    depth = {n: 1 for n in after}
    for n in after:
        d, p = 1, after[n][0]
        while p in after and d < 16:
            d, p = d + 1, after[p][0]
        depth[n] = d
    has_children = {p for p, _s in after.values()}
    zero = AllocationRun(0.0, 0.0)
    rows: list[WhatIfAllocation] = []
    for name in sorted((n for n in under if n in after), key=lambda n: (depth[n], n)):
        if visible is not None and name not in visible:
            continue
        b, a = before.allocations.get(name, zero), with_change.allocations.get(name, zero)
        rows.append(WhatIfAllocation(
            name=name, parent=after[name][0], depth=depth[name], is_project=name not in has_children,
            changed=abs(after[name][1] - history.shares[name][1]) > 1e-12,
            share_before=history.shares[name][1], share_after=after[name][1],
            entitlement_before=ent_b.get(name, 0.0), entitlement_after=ent_a.get(name, 0.0),
            owed_before=b.owed_gpu_s, delivered_before=b.delivered_gpu_s, ratio_before=_ratio(b.owed_gpu_s,
                                                                                               b.delivered_gpu_s),
            owed_after=a.owed_gpu_s, delivered_after=a.delivered_gpu_s, ratio_after=_ratio(a.owed_gpu_s,
                                                                                          a.delivered_gpu_s)))
    waits = [WhatIfWaits(job_class=c, jobs=before.waits[c][2], p50_before_s=before.waits[c][0],
                         p90_before_s=before.waits[c][1], p50_after_s=with_change.waits[c][0],
                         p90_after_s=with_change.waits[c][1]) for c in WAIT_CLASSES]
    return WhatIfPreview(
        parent=parent, since=history.since, until=history.until, window_s=history.until - history.since,
        jobs=len(history.jobs), jobs_capped=history.capped, capacity_gpus=sum(n[1] for n in history.nodes),
        policy=POLICY, cached=cached, wall_s=round(wall_s, 3), occupancy_before=before.occupancy,
        occupancy_after=with_change.occupancy, preemptions_before=before.preemptions,
        preemptions_after=with_change.preemptions, allocations=rows, waits=waits,
        summary=summary(rows, waits, len(history.jobs), history.until - history.since))


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def _gpu_h(gpu_s: float) -> str:
    h = gpu_s / 3600.0
    return f"{h:.0f}" if h >= 100 else f"{h:.1f}" if h >= 10 else f"{h:.2f}"


def summary(rows: Sequence[WhatIfAllocation], waits: Sequence[WhatIfWaits], jobs: int, window_s: float) -> str:
    """One sentence a manager reads first: for each changed allocation, owed and delivered/owed without →
    with the change, then the p90 waits that moved."""
    days = window_s / DAY_S
    span = f"{days:.0f} day{'s' if round(days) != 1 else ''}" if days >= 1 else f"{window_s / 3600:.0f} h"
    if jobs == 0:
        return f"No jobs were submitted in the last {span}: there is no history to replay."
    parts = []
    for r in [r for r in rows if r.changed][:4]:
        if r.owed_before == 0 and r.owed_after == 0 and r.delivered_before == 0 and r.delivered_after == 0:
            parts.append(f"{r.name} had no demand in the window, so nothing changes for it")
        else:
            parts.append(f"{r.name} owed {_gpu_h(r.owed_before)} → {_gpu_h(r.owed_after)} GPU·h, delivered/owed "
                         f"{_pct(r.ratio_before)} → {_pct(r.ratio_after)}")
    text = f"Replaying {jobs} job{'s' if jobs != 1 else ''} of the last {span}: "
    text += "; ".join(parts) if parts else "no allocation of yours changes"
    moved = [w for w in waits if w.p90_before_s is not None and w.p90_after_s is not None
             and abs(w.p90_after_s - w.p90_before_s) >= 1.0]
    if moved:
        text += "; p90 wait " + ", ".join(f"{w.job_class} {w.p90_before_s:.0f} s → {w.p90_after_s:.0f} s"
                                          for w in moved)
    return text + "."


async def what_if(ctx: Context, parent: str, shares: Sequence[ShareInput], window_s: float, max_jobs: int,
                  now: float | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> WhatIfPreview | InvalidInput | \
        NotAuthorised:
    """The `whatIf` query: authorised like `setAllocations` (a manager for their own subtree only)."""
    access = await ctx.access("whatIf")
    if not access.can(Capability.set_allocations):
        await ctx.deny("whatIf", "*", f"role {access.role.value} lacks {Capability.set_allocations.value}")
        return NotAuthorised(message=f"your role ({access.role.value}) may not use 'whatIf'")
    if not access.manages(parent):
        await ctx.deny("whatIf", f"allocation:{parent}", "outside the principal's scopes")
        return NotAuthorised(message=f"no node '{parent}' that you may allocate under")
    if not MIN_WINDOW_S <= window_s <= MAX_WINDOW_S:
        return InvalidInput(field="windowS", message=f"the history window is between {MIN_WINDOW_S:.0f} and "
                                                     f"{MAX_WINDOW_S:.0f} seconds, got {window_s:g}")
    if not 1 <= max_jobs <= MAX_JOBS:
        return InvalidInput(field="maxJobs", message=f"maxJobs is between 1 and {MAX_JOBS}, got {max_jobs}")
    store = ctx.services.store
    history = await asyncio.to_thread(load_history, store, time.time() if now is None else now, window_s, max_jobs)
    try:
        after = proposed_shares(history.shares, parent, [(s.child, s.share) for s in shares])
    except WhatIfRefused as err:
        return InvalidInput(field=err.field, message=err.message)
    runner = runner_for(store)
    fb, hit_b = runner.submit(history, history.shares)
    fa, hit_a = runner.submit(history, after)
    try:
        before, with_change = await asyncio.wait_for(
            asyncio.shield(asyncio.gather(asyncio.wrap_future(fb), asyncio.wrap_future(fa))), timeout_s)
    except TimeoutError:
        ctx.no_cache()
        raise UserError(f"the what-if is still replaying {len(history.jobs)} jobs (more than {timeout_s:.0f} s); "
                        "ask again in a moment: the run continues and its result is kept", "WHATIF_TIMEOUT") from None
    except WhatIfRefused as err:
        return InvalidInput(field=err.field, message=err.message)
    visible = None if access.nodes is None else set(access.nodes)
    wall = (0.0 if hit_b else before.wall_s) + (0.0 if hit_a else with_change.wall_s)
    return preview_of(history, parent, after, before, with_change, visible, hit_a and hit_b, wall)
