"""The virtual-time engine: replays a scenario's jobs through the policy's scheduling cycle.

Time jumps from one schedulable moment to the next (arrivals, completions, protection expiries,
grace ends, session caps, and instants a scheduler asked to be woken at: `CycleResult.evidence`
"wake_at", dropped once nothing waits); all events at the same instant are applied before one cycle runs. The
cycle is `steward.policy.cycle.schedule(snapshot)`, the same pure function the live scheduler calls;
the engine plays the part of the ledger and the executors: it applies the decisions, runs the jobs,
writes checkpoints, stops victims at the end of their grace, and requeues them with their original
submit time.

Work model (documented in docs/results.md):
- A job needs `duration_s` of work. A (re)start after a preemption first pays `restart_overhead_s`.
- A resumable job checkpoints every `checkpoint_interval_s` of work in a run; a preemption throws
  away the work since the last checkpoint. A non-resumable job restarts from zero.
- A preempted job keeps its GPUs until its grace ends (it may complete meanwhile), then stops.
- Lost GPU-seconds = GPUs × (work since the last checkpoint at the stop + restart overhead paid).

Figures (metrics.py): besides the levels, the engine tells the recorder each submit and each job done
(JCT, finish-time fairness) and how long each victim had run when its preemption was asked (flaps).
A scheduler that orders the whole queue its own way (the `tiresias` baseline) is also a
`QueueListener`: it hears every queue entry, placement and run end with the job's attained GPU-seconds,
and the engine then runs a cycle at every arrival and hands it the full twin-chain heads.

Speed (docs/results.md "Speed", docs/benchmarks.md "Simulator"):
- The snapshot is kept incrementally: immutable `PendingJob`/`RunningJob` values are built once per
  state change, usage is kept as running sums (usage.py), the queue as sorted twin chains (view.py).
- The cycle sees only the heads of the twin chains (`trim`), which gives the same decisions as the
  whole queue (checked by tests/unit/sim/test_philly_slice.py); first narrow heads, the full ones
  only when the cycle acted past the narrow ones (`narrow`, view.py).
- A cycle runs only at an instant where something it reads changed, and only when it can decide
  something: there is waiting work, and some waiting job fits the free GPUs or some running job is
  preemptible. With `skip` (the default) two kinds of instants do not count as changes: an arrival
  behind the head of its twin chain, and a protection expiry when the last cycle had no blocked
  funded job to search victims for. Those instants change only the clock, and the clock moves the
  fair-share ratios a little, so a cycle there can decide differently: `sim.exact: true` runs them.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from steward.domain.clusters import cluster_name, pinned_clusters
from steward.domain.policy_settings import PolicySettings
from steward.policy.contract import requeue
from steward.policy.debug_quota import cluster_quotas, debug_quota_gpus, qualify, qualify_clusters
from steward.policy.lane import lane_pending
from steward.policy.model import CycleResult, Node, PendingJob, RunningJob, Snapshot
from steward.policy.tree import AllocationTree
from steward.sim.metrics import Recorder, admissible_clusters
from steward.sim.scenario import Scenario, TraceJob, scenario_pins
from steward.sim.usage import SimUsage
from steward.sim.view import PendingView

Scheduler = Callable[[Snapshot], CycleResult]
Router = Callable[["Engine", TraceJob, tuple[str, ...]], tuple[str, ...]]
"""A routing baseline (sim/routing.py, ADR 0066): at a job's submit, given its admissible clusters, the
clusters it may use (one: the job waits for that cluster only). None: the policy's own routing."""


class QueueListener(Protocol):
    """Told of the queue and of every run as the engine applies them, for a scheduler that keeps its
    own order of the whole queue (the `tiresias` baseline, sim/tiresias.py). The trimmed view (view.py)
    is cut for the fair-share cycle's order and does not tell what such a scheduler would act on.
    Attained service is the engine's: GPUs × seconds held, summed over the job's runs."""

    def queued(self, job: PendingJob) -> None:
        """`job` waits (submitted, or requeued after a run)."""

    def left_queue(self, job_id: str) -> None:
        """`job_id` no longer waits (it was placed)."""

    def stopped(self, job_id: str, attained_gpu_s: float, run_s: float, now: float, done: bool) -> None:
        """A run of `job_id` ended after `run_s` seconds; `attained_gpu_s` over all its runs; `done`
        when the job left for good (otherwise `queued` follows)."""

# event kinds, in the order they are applied at one instant
FINISH, GRACE_END, PROTECT_END, SESSION_CAP, WAKE = 0, 1, 2, 3, 4

FUTURE, PENDING, RUNNING, DONE = 0, 1, 2, 3
ARRIVAL_BIT = 1 << 8
TRIGGER_NAMES = ((FINISH, "finish"), (GRACE_END, "grace_end"), (PROTECT_END, "protection_end"),
                 (SESSION_CAP, "session_cap"), (WAKE, "wake"))
MAX_CYCLES_PER_INSTANT = 64


def _trigger_name(bits: int) -> str:
    """The kinds of events that made an instant's first cycle run, e.g. "arrival+finish"."""
    names = ["arrival"] if bits & ARRIVAL_BIT else []
    names += [name for kind, name in TRIGGER_NAMES if bits & (1 << kind)]
    return "+".join(names) or "none"


class SimJob:
    """Mutable per-job state of the simulation (the trace row is `spec`)."""

    __slots__ = (
        "attained",
        "clusters",
        "contenders",
        "counts",
        "debug_class",
        "epoch",
        "first_start",
        "funded",
        "gpus",
        "grace_end",
        "idx",
        "overhead",
        "pending",
        "placement",
        "preemptible",
        "protected_until",
        "room",
        "run_start",
        "running",
        "saved",
        "spec",
        "state",
    )

    def __init__(self, idx: int, spec: TraceJob, counts: bool) -> None:
        self.idx = idx
        self.spec = spec
        self.gpus = spec.gpus
        self.counts = counts  # counts toward its allocation's demand (funded-asking, tenant in tree)
        self.debug_class: str | None = None  # a debug job's wait class, decided at submit (ADR 0029)
        self.state = FUTURE
        self.saved = 0.0  # work checkpointed before this run
        self.overhead = 0.0  # restart overhead paid at the start of this run
        self.run_start = 0.0
        self.epoch = 0
        self.first_start: float | None = None
        self.funded = False
        self.protected_until = 0.0
        self.placement: tuple[tuple[str, int], ...] = ()
        self.grace_end: float | None = None
        self.preemptible = False  # counted in Engine.n_preemptible (past protection or unfunded, no grace)
        self.pending: PendingJob | None = None
        self.running: RunningJob | None = None
        self.contenders = 0  # tenants with work present at its submit (metrics.py, finish-time fairness)
        self.attained = 0.0  # GPU-seconds held over all its runs (QueueListener)
        self.clusters: tuple[str, ...] = ()  # clusters its request admits (several clusters only; metrics)
        self.room: dict[str, float] | None = None  # before its first start: when each had room for it first


@dataclass
class EngineStats:
    cycles: int = 0
    skipped: int = 0
    cycle_s: float = 0.0
    snapshot_s: float = 0.0
    max_pending: int = 0
    max_view: int = 0
    view_total: int = 0
    reruns: int = 0
    widened: int = 0
    pending_total: int = 0
    events: int = 0
    trace: list[dict[str, Any]] = field(default_factory=list)
    by_trigger: Counter[tuple[str, bool]] = field(default_factory=Counter)
    """Cycles by what triggered them and whether they decided anything."""


MIN_CYCLE_LIMIT = 1000
"""The storm cut-off never stops a run before this many cycles (a tiny trace may need many per job)."""


class EngineError(Exception):
    """The policy returned a decision the cluster cannot carry out (a bug in the policy)."""


class Engine:
    def __init__(
        self,
        scenario: Scenario,
        settings: PolicySettings,
        tree: AllocationTree,
        scheduler: Scheduler,
        record_decisions: bool = False,
        listener: QueueListener | None = None,
        router: Router | None = None,
    ) -> None:
        self.scenario = scenario
        self.settings = settings
        self.tree = tree
        self.schedule = scheduler
        self.record_decisions = record_decisions
        sp = scenario.policy
        self.ckpt_interval = settings.checkpoint_interval_s or sp.checkpoint_interval_s
        self.restart_overhead = settings.restart_overhead_s
        self.nodes = tuple(
            Node(id=n.name, gpus=n.gpus, model=n.gpu_model, path=n.path[:-1], cluster=n.cluster) for n in scenario.nodes
        )
        self.node_model = {n.id: n.model for n in self.nodes}
        self.node_cluster = {n.id: cluster_name(n.cluster) for n in self.nodes}
        self.router = router
        self.free: dict[str, int] = {n.id: n.gpus for n in self.nodes}
        self.free_total = sum(self.free.values())
        self.capacity = self.free_total
        self.gpus_per_node = max(n.gpus for n in self.nodes)
        projects = set(tree.leaves())
        self.jobs = [
            SimJob(i, spec, spec.tenant in projects and (spec.min_runtime_s > 0 or spec.job_class == "interactive"))
            for i, spec in enumerate(scenario.jobs)
        ]
        self.by_id = {j.spec.job_id: j for j in self.jobs}
        may_preempt = settings.funding or (settings.fairness_preemption and settings.preemptible_after_protection)
        self.exact = scenario.sim.exact
        self.class_bonus = dict(scenario.sim.priority_by_class)
        self.trim = not self.exact  # hand the cycle the heads of the twin chains only (view.py)
        self.narrow = not self.exact  # first the narrow heads, the full ones when a cycle acts past them
        self.skip = not self.exact  # no cycle for arrivals behind their chain's head, nor for idle expiries
        # a scheduler with its own queue order (QueueListener) acts on any arrival and reads no narrow view
        self.listener = listener
        if listener is not None:
            self.narrow = self.skip = False
        self.wakes: set[float] = set()  # cycles a scheduler asked for (evidence "wake_at"), still ahead
        per_job = scenario.sim.max_cycles_per_job  # the storm cut-off (scenario.py)
        self.cycle_limit = None if per_job is None else max(MIN_CYCLE_LIMIT, math.ceil(per_job * len(self.jobs)))
        # ADR 0029: each project's debug quota (the tree and the capacity are fixed in a run)
        self.debug_quotas = {p: debug_quota_gpus(tree, p, self.capacity, settings) for p in projects}
        # ADR 0073: with several clusters, each quota's parts per cluster (each at most the quota, so the queue's
        # window, which bounds a lane chain's head by the quota, holds for every part: sim/view.py)
        by_cluster: dict[str, float] = {}
        for n in self.nodes:
            by_cluster[self.node_cluster[n.id]] = by_cluster.get(self.node_cluster[n.id], 0.0) + n.gpus
        pins = scenario_pins(scenario.allocations)
        self.debug_parts = ({p: cluster_quotas(q, by_cluster, settings, pins.get(p, ""))
                             for p, q in self.debug_quotas.items()} if len(by_cluster) > 1 else {})
        self.pending = PendingView(settings, settings.preemption_attempts_per_cycle if may_preempt else 0,
                                   debug_quotas=self.debug_quotas if settings.lane else None)
        self.session_gpus = 0
        self.running: dict[str, RunningJob] = {}
        self.pending_sizes: Counter[int] = Counter()
        self.events: list[tuple[float, int, int, int, int]] = []  # (time, kind, seq, job idx, epoch)
        self.seq = 0
        self.ckpt_heap: list[tuple[float, int, int]] = []  # (next checkpoint, job idx, epoch)
        self.usage = SimUsage(settings)
        # ADR 0076: with several clusters, the usage on each (a run is on one cluster: gangs never span two)
        self.cluster_usage = ({c: SimUsage(settings) for c in sorted(by_cluster)}
                              if len(by_cluster) > 1 and settings.cluster_fair_share else None)
        # preemptible running jobs, counted so that "can a cycle do anything?" is O(1)
        self.n_unfunded_running = 0
        self.n_unprotected_funded = 0
        self.fair_preemption = settings.fairness_preemption and settings.preemptible_after_protection
        self.n_sessions = 0
        self.now = scenario.jobs[0].submit_s if scenario.jobs else 0.0
        entitlement = {a: tree.entitlement(a) for a in tree.allocations}
        parents = {a: tree.parent(a) for a in tree.allocations}
        # ADR 0067: each pinned allocation's cluster (its own pin or an ancestor's); its jobs run only there
        self.pins = scenario_pins(scenario.allocations)
        self.rec = Recorder(
            capacity=self.capacity, entitlement=entitlement, parents=parents, projects=tuple(sorted(projects)),
            large_job_gpus=scenario.metrics.large_job_gpus,
            owed_period_days=scenario.metrics.owed_period_days, start=self.now,
            nodes=tuple((n.id, n.gpus, n.model, n.cluster) for n in self.nodes),
            weights=dict(settings.gpu_model_weights), pins=self.pins,
        )
        # several clusters (ADR 0066): per-cluster occupancy, where each waiting job had room first, and
        # what a routing baseline reads (free GPUs and GPUs waiting per cluster)
        self.multi = len(self.rec.cluster_capacity) > 1
        self.cluster_free: dict[str, int] = dict(self.rec.cluster_capacity)
        self.cluster_queued: Counter[str] = Counter()  # GPUs of waiting jobs pinned to one cluster
        self.watching: dict[str, SimJob] = {}  # waiting jobs before their first start, several clusters each
        self.room_dirty: set[str] = set()  # clusters where GPUs were freed since the last look
        self.room_new: list[SimJob] = []  # jobs new to the watch since the last look
        self.admissible_memo: dict[tuple[tuple[str, ...], tuple[str, ...], int], tuple[str, ...]] = {}
        self.rec.restart_overhead_s = self.restart_overhead  # what a flap is (metrics.py)
        # ADR 0016: the cycle ranks by each project's demand over the whole queue (the trimmed one
        # leaves jobs out); an arrival matters while its project's demand is below its entitlement
        self.by_demand = settings.active_entitlement and settings.ordering == "fair_share"
        self.entitled_gpus = {p: tree.entitlement(p) * self.capacity for p in projects}
        self.stats = EngineStats()
        # ADR 0028 (ADR 0021's lane hold folded in): every beneficiary, while its victims are in
        # their grace and `claim_hold_s` after
        self.hold = settings.claim_hold_s is not None
        self.hold_s = settings.claim_hold_s or 0.0
        self.held: dict[str, SimJob] = {}
        self.claims: dict[str, int] = {}  # beneficiary -> its victims still in their grace
        self.frag_dirty = True
        self.next_cycle_at = -math.inf
        self.last_searches: int | None = None
        self.productive = False

    # --- the loop --------------------------------------------------------------------------------

    def run(self) -> Recorder:
        jobs = self.jobs
        n = len(jobs)
        ai = 0
        events = self.events
        interval = self.scenario.sim.cycle_interval_s
        dirty = False
        trig = 0
        while True:
            t_arr = jobs[ai].spec.submit_s if ai < n else math.inf
            while events and events[0][1] == WAKE and not self.pending:
                self.wakes.discard(heapq.heappop(events)[0])  # nothing waits: nothing to wake a cycle for
            t_evt = events[0][0] if events else math.inf
            t = min(t_arr, t_evt)
            if dirty and interval > 0 and self.next_cycle_at < t:
                # debounced cycle between events
                t = max(self.next_cycle_at, self.now)
            if t == math.inf:
                break
            if t > self.now:
                self._update_frag()
                self.now = t
            now = self.now
            while ai < n and jobs[ai].spec.submit_s <= now:
                if self._arrive(jobs[ai]):
                    dirty = True
                    trig |= ARRIVAL_BIT
                ai += 1
            while events and events[0][0] <= now:
                _, kind, _, idx, epoch = heapq.heappop(events)
                self.stats.events += 1
                if self._handle(kind, jobs[idx], epoch):
                    dirty = True
                    trig |= 1 << kind
            if self.room_new or (self.room_dirty and self.watching):
                self._watch_room()
            if dirty:
                if interval > 0 and now < self.next_cycle_at:
                    continue
                dirty = False
                for i in range(MAX_CYCLES_PER_INSTANT):
                    if not self._cycle_useful():
                        self.stats.skipped += 1
                        break
                    again = self._cycle()
                    if i == 0:
                        self.stats.by_trigger[(_trigger_name(trig), self.productive)] += 1
                    if not again:
                        break
                if self.room_dirty and self.watching:
                    self._watch_room()
                trig = 0
                self.next_cycle_at = now + interval
                if self.cycle_limit is not None and self.stats.cycles >= self.cycle_limit:
                    self.rec.cut_off_at_cycle = self.stats.cycles  # a storm: stop here, say so
                    break
        self._update_frag()
        self.rec.unfinished = sum(1 for j in jobs if j.state != DONE)
        self.rec.cycles = self.stats.cycles
        self.rec.skipped_cycles = self.stats.skipped
        self.rec.close(self.now)
        return self.rec

    # --- events ----------------------------------------------------------------------------------

    def _push(self, t: float, kind: int, job: SimJob) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, kind, self.seq, job.idx, job.epoch))

    def _arrive(self, job: SimJob) -> bool:
        s = job.spec
        job.state = PENDING
        pin = self.pins.get(s.tenant, "")
        asked = pinned_clusters(s.clusters, pin) if pin else s.clusters  # the ledger's and routing's rule
        clusters = asked
        if self.multi:
            key = (s.gpu_models, asked, s.gpus)
            where = self.admissible_memo.get(key)
            if where is None:
                where = self.admissible_memo[key] = admissible_clusters(self.rec.nodes, *key)
            job.clusters = where
            if self.router is not None and where:
                clusters = self.router(self, s, where)
            if len(where) > 1:
                job.room = {}
                self.watching[s.job_id] = job
                self.room_new.append(job)
        job.pending = PendingJob(
            id=s.job_id, project=s.tenant, gpus=s.gpus, submitted_at=s.submit_s,
            min_runtime_s=s.min_runtime_s, resumable=s.resumable, klass=s.job_class,  # type: ignore[arg-type]
            priority=s.priority + self.class_bonus.get(s.job_class, 0),
            gpu_models=s.gpu_models, clusters=clusters, pin=pin,
        )
        if s.job_class == "debug":
            job.debug_class = self._debug_class(job.pending)
        pos = self._enqueue(job)
        rec = self.rec
        job.contenders = rec.job_arrived(s.tenant, s.submit_s)
        rec.demand.add(self.now, job.gpus)
        if job.counts:
            rec.book_submit(job.idx, s.tenant, s.gpus, (s.gpu_models, asked), self.now)
            level = rec.alloc_demand[s.tenant]
            below = level.value < self.entitled_gpus[s.tenant]
            level.add(self.now, job.gpus)
            if below and self.by_demand:
                return True  # its project's active entitlement grows (ADR 0016)
        # a job behind the head of its twin chain cannot change what a cycle decides (see view.py)
        lane = self.debug_quotas.get(s.tenant, 0) if lane_pending(job.pending, self.settings) else 0
        return not self.skip or pos < self.pending.window(job.gpus, self.free_total + self.session_gpus, lane)

    def _debug_class(self, pj: PendingJob) -> str | None:
        """ADR 0029: a debug job's wait class, decided at submit by `qualify` on the engine's state
        (its allocation's running and waiting debug work; the job is the last submitted). Without a
        lane (the baselines) every debug job counts as qualified."""
        if not self.settings.lane:
            qualified, reason = True, "within_quota"
        else:
            project = pj.project
            if self.debug_parts:  # ADR 0073: per cluster
                q = qualify_clusters(pj, self.debug_parts.get(project, {}), self._accepts(pj), self.running.values(),
                                     self.pending.lane_jobs(project), self.settings, self._cluster_of, self._accepts,
                                     allocated=project in self.debug_quotas)
            else:
                q = qualify(pj, self.debug_quotas.get(project, 0), self.running.values(),
                            self.pending.lane_jobs(project), self.settings, allocated=project in self.debug_quotas)
            qualified, reason = q.qualified, q.reason
        return self.rec.record_debug_class(qualified, reason)

    def _cluster_of(self, r: RunningJob) -> str | None:
        return self.node_cluster[r.placement[0][0]] if r.placement else None

    def _accepts(self, pj: PendingJob) -> tuple[str, ...]:
        """The clusters a waiting job may run on (ADR 0073's debug quota per cluster): those its admissible nodes
        hold it on (`metrics.admissible_clusters`, as at its arrival)."""
        key = (pj.gpu_models, pj.clusters, pj.gpus)
        where = self.admissible_memo.get(key)
        if where is None:
            where = self.admissible_memo[key] = admissible_clusters(self.rec.nodes, *key)
        return where

    def _enqueue(self, job: SimJob) -> int:
        assert job.pending is not None
        pos = self.pending.add(job.pending)
        self.pending_sizes[job.gpus] += 1
        self.frag_dirty = True
        if self.multi:
            for c in job.clusters:
                self.rec.cluster_want[c].add(self.now, job.gpus)
            if len(job.pending.clusters) == 1:
                self.cluster_queued[job.pending.clusters[0]] += job.gpus
        if self.listener is not None:
            self.listener.queued(job.pending)
        return pos

    def _dequeue(self, job: SimJob) -> None:
        assert job.pending is not None
        self.pending.remove(job.pending)
        if self.multi:
            for cl in job.clusters:
                self.rec.cluster_want[cl].add(self.now, -job.gpus)
            if len(job.pending.clusters) == 1:
                self.cluster_queued[job.pending.clusters[0]] -= job.gpus
        c = self.pending_sizes[job.gpus] - 1
        if c:
            self.pending_sizes[job.gpus] = c
        else:
            del self.pending_sizes[job.gpus]
        self.frag_dirty = True
        if self.listener is not None:
            self.listener.left_queue(job.spec.job_id)

    def _handle(self, kind: int, job: SimJob, epoch: int) -> bool:
        """Apply one timed event; True when it may change what a cycle decides."""
        if kind == WAKE:
            self.wakes.discard(self.now)
            return True
        if job.epoch != epoch or job.state != RUNNING:
            return False  # stale: the run it belonged to has ended
        if kind == FINISH:
            self._end_run(job, completed=True)
            return True
        if kind == GRACE_END:
            self._end_run(job, completed=False)
            return True
        if kind == PROTECT_END:
            if job.grace_end is None and not job.preemptible:
                job.preemptible = True
                self.n_unprotected_funded += 1
            # a new victim candidate matters only if the last cycle had blocked funded work to search
            # for (the cycle's `preemption_searches` counter; unknown counts as "yes")
            return bool(self.pending) and self.fair_preemption and (not self.skip or self.last_searches != 0)
        return kind == SESSION_CAP

    # --- runs ------------------------------------------------------------------------------------

    def _start(self, job: SimJob, assignments: tuple[tuple[str, int], ...], funded: bool,
               protected_until: float) -> None:
        now = self.now
        if job.state != PENDING:
            raise EngineError(f"policy placed job {job.spec.job_id} which is not waiting")
        total = 0
        for node_id, count in assignments:
            free = self.free.get(node_id)
            if free is None:
                raise EngineError(f"policy placed job {job.spec.job_id} on unknown node {node_id}")
            if count > free:
                raise EngineError(
                    f"policy placed job {job.spec.job_id} on {node_id} with {count} GPUs, {free} free")
            self.free[node_id] = free - count
            total += count
        if total != job.gpus:
            raise EngineError(f"policy placed job {job.spec.job_id} on {total} GPUs, it needs {job.gpus}")
        if self.multi:
            self._start_on_cluster(job, assignments)
        self.free_total -= total
        self._dequeue(job)
        job.state = RUNNING
        job.epoch += 1
        job.run_start = now
        job.funded = funded
        job.protected_until = protected_until
        job.placement = assignments
        job.grace_end = None
        s = job.spec
        pj = job.pending
        assert pj is not None
        job.running = RunningJob(
            id=s.job_id, project=s.tenant, gpus=s.gpus, placement=assignments, started_at=now,
            protected_until=protected_until, funded=funded, last_checkpoint_at=None,
            resumable=s.resumable, klass=pj.klass, submitted_at=s.submit_s, preemption_requested_at=None,
            min_runtime_s=s.min_runtime_s, priority=pj.priority, topology_depth=pj.topology_depth,
            gpu_models=pj.gpu_models, clusters=pj.clusters, pin=pj.pin,
        )
        self.running[s.job_id] = job.running
        if job.first_start is None:
            job.first_start = now
            self.rec.record_wait(s.job_class, s.gpus, now - s.submit_s, job.debug_class)
        remaining = max(0.0, s.duration_s - job.saved)
        self._push(now + job.overhead + remaining, FINISH, job)
        if funded:
            if protected_until > now:
                self._push(protected_until, PROTECT_END, job)
            else:
                job.preemptible = True
                self.n_unprotected_funded += 1
            self.usage.start(f"{s.job_id}#{job.epoch}", s.tenant, now, job.gpus, self._model(job))
            if self.cluster_usage is not None:
                self.cluster_usage[self.node_cluster[job.placement[0][0]]].start(
                    f"{s.job_id}#{job.epoch}", s.tenant, now, job.gpus, self._model(job))
        else:
            job.preemptible = True
            self.n_unfunded_running += 1
        if s.job_class == "interactive":
            self.n_sessions += 1
            self.session_gpus += job.gpus
            self._push(now + self.settings.session_cap_s, SESSION_CAP, job)
        if s.resumable and self.ckpt_interval > 0:
            heapq.heappush(self.ckpt_heap, (now + job.overhead + self.ckpt_interval, job.idx, job.epoch))
        rec = self.rec
        (rec.busy_funded if funded else rec.busy_unfunded).add(now, job.gpus)
        if job.counts:
            rec.book_start(job.idx, now, assignments)

    def _end_run(self, job: SimJob, completed: bool, checkpoint: bool = False, requeue_job: bool = True) -> None:
        """End the current run: completed, stopped by a preemption's grace end, or stopped by the
        policy (drain, session cap). Frees the GPUs, charges usage, counts lost work, requeues."""
        now = self.now
        s = job.spec
        rj = job.running
        assert rj is not None
        for node_id, count in job.placement:
            self.free[node_id] += count
        self.free_total += job.gpus
        del self.running[s.job_id]
        self._unmark_preemptible(job)
        if job.funded:
            self.usage.end(f"{s.job_id}#{job.epoch}", now)
            if self.cluster_usage is not None:
                self.cluster_usage[self.node_cluster[job.placement[0][0]]].end(f"{s.job_id}#{job.epoch}", now)
        if s.job_class == "interactive":
            self.n_sessions -= 1
            self.session_gpus -= job.gpus
        rec = self.rec
        (rec.busy_funded if job.funded else rec.busy_unfunded).add(now, -job.gpus)
        if job.counts:
            rec.book_stop(job.idx, now, completed or not requeue_job)
        if self.multi:
            cluster = self.node_cluster[job.placement[0][0]]
            self.cluster_free[cluster] += job.gpus
            rec.cluster_busy[cluster].add(now, -job.gpus)
            rec.cluster_want[cluster].add(now, -job.gpus)
            self.room_dirty.add(cluster)
        elapsed = now - job.run_start
        paid = min(elapsed, job.overhead)
        work = elapsed - paid
        job.running = None
        job.epoch += 1
        job.grace_end = None
        self.frag_dirty = True
        if rj.claimed_for is not None and self.hold:
            left = self.claims.get(rj.claimed_for, 0) - 1
            if left > 0:
                self.claims[rj.claimed_for] = left
            else:
                self.claims.pop(rj.claimed_for, None)
            self._room_freed(rj.claimed_for)
        job.attained += job.gpus * elapsed
        if self.listener is not None:
            self.listener.stopped(s.job_id, job.attained, elapsed, now, completed or not requeue_job)
        if completed or not requeue_job:
            job.state = DONE
            rec.job_done(s.tenant, s.submit_s, now, s.duration_s, s.gpus, job.contenders)
            rec.demand.add(now, -job.gpus)
            if job.counts:
                rec.alloc_demand[s.tenant].add(now, -job.gpus)
            if job.overhead > 0:
                rec.lost_gpu_s += job.gpus * paid
            return
        # stopped and requeued: keep what was checkpointed, throw away the rest
        if checkpoint and s.resumable:
            kept = work
        elif s.resumable and self.ckpt_interval > 0:
            kept = math.floor(work / self.ckpt_interval) * self.ckpt_interval
        else:
            kept = 0.0
        job.saved = job.saved + kept if s.resumable else 0.0
        rec.lost_gpu_s += job.gpus * (work - kept + paid)
        job.overhead = self.restart_overhead
        job.state = PENDING
        job.pending = requeue(rj)
        self._enqueue(job)

    def _room_freed(self, job_id: str) -> None:
        """ADR 0021: a job preempted for `job_id` stopped (or ended in its grace): its waiting
        beneficiary learns when its room was freed (`PendingJob.room_freed_at`), as the ledger's
        fold tells the live scheduler, and the cycle holds the GPUs for it a while."""
        job = self.by_id.get(job_id)
        if job is None or job.state != PENDING or job.pending is None:
            return
        self._dequeue(job)
        job.pending = with_room_freed(job.pending, self.now)
        self._enqueue(job)
        self.held[job_id] = job

    def _held_jobs(self, pending: list[PendingJob]) -> list[PendingJob]:
        """The view plus every beneficiary whose hold still runs (a trimmed view may have left it out:
        it is no twin of its chain while it holds room); expired holds are forgotten."""
        if not self.held:
            return pending
        hold = self.hold_s
        claims = self.claims
        now = self.now
        extra: list[PendingJob] = []
        seen: set[str] | None = None
        for job_id, job in list(self.held.items()):
            pj = job.pending
            if job.state != PENDING or pj is None or (job_id not in claims and (
                    pj.room_freed_at is None or now - pj.room_freed_at > hold)):
                del self.held[job_id]
                continue
            if seen is None:
                seen = {j.id for j in pending}
            if job_id not in seen:
                extra.append(pj)
        return pending + extra if extra else pending

    def _unmark_preemptible(self, job: SimJob) -> None:
        if job.preemptible:
            job.preemptible = False
            if job.funded:
                self.n_unprotected_funded -= 1
            else:
                self.n_unfunded_running -= 1

    # --- several clusters (ADR 0066) ----------------------------------------------------------------

    def _start_on_cluster(self, job: SimJob, assignments: tuple[tuple[str, int], ...]) -> None:
        """A run starts: the cluster's books, and for a job that could run on several clusters, whether it
        went to one where it could have started earliest (metrics.py: `routed_earliest_fraction`)."""
        now = self.now
        clusters = {self.node_cluster[n] for n, _ in assignments}
        if len(clusters) != 1:
            raise EngineError(f"policy placed job {job.spec.job_id} over several clusters: {sorted(clusters)}")
        (cluster,) = clusters
        if job.clusters and cluster not in job.clusters:
            raise EngineError(f"policy placed job {job.spec.job_id} on cluster {cluster}, which its request "
                              f"does not admit (it admits {', '.join(job.clusters)})")
        self.cluster_free[cluster] -= job.gpus
        rec = self.rec
        rec.cluster_busy[cluster].add(now, job.gpus)
        rec.cluster_want[cluster].add(now, job.gpus)  # _dequeue took it off every admissible cluster
        room = job.room
        if room is not None:
            job.room = None
            self.watching.pop(job.spec.job_id, None)
            mine = room.get(cluster, now)
            rec.routed_jobs += 1
            if all(mine <= t for c, t in room.items() if c != cluster):
                rec.routed_earliest += 1

    def _watch_room(self) -> None:
        """Each waiting job that could run on several clusters notes the first instant each of them had room
        for it: enough free GPUs of the models it accepts on one node, or (a gang) enough wholly free ones
        (topology aside). Checked where GPUs were freed, and for jobs new to the watch, on every cluster."""
        now = self.now
        dirty = self.room_dirty
        new = {id(j) for j in self.room_new}
        jobs = list(self.watching.values()) if dirty else self.room_new
        self.room_dirty = set()
        self.room_new = []
        memo: dict[tuple[tuple[str, ...], int, str], bool] = {}
        for job in jobs:
            room = job.room
            if room is None:  # started already
                continue
            fresh = id(job) in new
            for c in job.clusters:
                if c in room or not (fresh or c in dirty):
                    continue
                key = (job.spec.gpu_models, job.gpus, c)
                ok = memo.get(key)
                if ok is None:
                    ok = memo[key] = self._room_on(c, job.spec.gpu_models, job.gpus)
                if ok:
                    room[c] = now

    def _room_on(self, cluster: str, models: tuple[str, ...], gpus: int) -> bool:
        if self.cluster_free[cluster] < gpus:
            return False
        cap = {n.id: n.gpus for n in self.nodes if self.node_cluster[n.id] == cluster
               and (not models or n.model in models)}
        if not cap:
            return False
        if gpus <= max(cap.values()):
            return any(self.free[n] >= gpus for n in cap)
        return sum(c for n, c in cap.items() if self.free[n] == c) >= gpus

    def _model(self, job: SimJob) -> str:
        return self.node_model[job.placement[0][0]] if job.placement else "default"

    # --- the cycle -------------------------------------------------------------------------------

    def _cycle_useful(self) -> bool:
        """Can a cycle decide anything now? (A necessary condition, so skipping is safe.)"""
        if self.n_sessions:
            return True
        if not self.pending:
            return False
        if self.pending_sizes and min(self.pending_sizes) <= self.free_total:
            return True
        return self.n_unfunded_running > 0 or (self.n_unprotected_funded > 0 and self.fair_preemption)

    def _refresh_checkpoints(self) -> None:
        now = self.now
        heap = self.ckpt_heap
        interval = self.ckpt_interval
        while heap and heap[0][0] <= now:
            _, idx, epoch = heapq.heappop(heap)
            job = self.jobs[idx]
            if job.epoch != epoch or job.state != RUNNING or job.running is None:
                continue
            last = last_checkpoint(job.run_start + job.overhead, interval, now)
            job.running = running_with(job.running, last, job.running.preemption_requested_at)
            self.running[job.spec.job_id] = job.running
            heapq.heappush(heap, (next_checkpoint(last, interval, now), idx, epoch))

    def _cycle(self) -> bool:
        """Run one cycle and apply its decisions; True when another cycle at this instant may help
        (something stopped at once)."""
        now = self.now
        t0 = time.perf_counter()
        self._refresh_checkpoints()
        running = tuple(self.running.values())
        free = self.free_total + self.session_gpus
        narrow = self.trim and self.narrow
        pending = self._held_jobs(self.pending.jobs(free, narrow) if self.trim else self.pending.all_jobs())
        usage = self.usage.usage(now)
        demand = {p: lvl.value for p, lvl in self.rec.alloc_demand.items() if lvl.value > 0} if self.by_demand else None
        cluster_usage = (None if self.cluster_usage is None
                         else {c: u.usage(now) for c, u in self.cluster_usage.items()})
        snapshot = Snapshot(
            now=now, nodes=self.nodes, tree=self.tree, usage=usage, running=running,
            pending=tuple(pending), settings=self.settings, demand=demand, cluster_usage=cluster_usage,
        )
        t1 = time.perf_counter()
        result = self.schedule(snapshot)
        if self.trim:
            result = self._with_backfill(snapshot, result, pending, narrow)
        if narrow and self.pending.acted_past(_acted_on(result), free):
            # the narrow view may have hidden a twin the cycle would act on: the full view decides
            self.stats.widened += 1
            pending = self._held_jobs(self.pending.jobs(free))
            snapshot = dataclasses.replace(snapshot, pending=tuple(pending))
            result = self._with_backfill(snapshot, self.schedule(snapshot), pending)
        t2 = time.perf_counter()
        self.stats.cycles += 1
        self.stats.snapshot_s += t1 - t0
        self.stats.cycle_s += t2 - t1
        if len(self.pending) > self.stats.max_pending:
            self.stats.max_pending = len(self.pending)
        self.stats.view_total += len(pending)
        self.stats.pending_total += len(self.pending)
        if len(pending) > self.stats.max_view:
            self.stats.max_view = len(pending)
        if self.record_decisions:
            self.stats.trace.append(_decision_digest(result))
        wake = result.evidence.get("wake_at")
        if isinstance(wake, float) and wake > now and wake not in self.wakes:
            self.wakes.add(wake)
            self.seq += 1
            heapq.heappush(self.events, (wake, WAKE, self.seq, 0, -1))
        self.productive = bool(result.placements or result.preemptions or result.stops)
        searches = result.evidence.get("preemption_searches")
        lane = result.evidence.get("lane_searches", 0)
        self.last_searches = searches + lane if isinstance(searches, int) and isinstance(lane, int) else None
        again = False
        for stop in result.stops:
            job = self.by_id.get(stop.job_id)
            if job is None or job.state != RUNNING:
                continue
            completed = not stop.requeue
            self._end_run(job, completed=completed, checkpoint=stop.checkpoint, requeue_job=stop.requeue)
            again = True
        for pre in result.preemptions:
            job = self.by_id.get(pre.victim_id)
            if job is None or job.state != RUNNING or job.grace_end is not None:
                continue
            self._preempt(job, pre.grace_ends_at, pre.for_job_id)
            if pre.grace_ends_at <= now:
                self._end_run(job, completed=False)
                again = True
        for p in result.placements:
            job = self.by_id.get(p.job_id)
            if job is None:
                raise EngineError(f"policy placed unknown job {p.job_id}")
            self._start(job, p.assignments, p.funded, p.protected_until)
        return again

    def _with_backfill(
        self, snapshot: Snapshot, result: CycleResult, pending: list[PendingJob], narrow: bool = False
    ) -> CycleResult:
        """When the cycle made reservations, work protected for less than the time until one is due
        may backfill the reserved nodes even where its twins ahead may not: if the trimmed queue
        left such jobs out, run the cycle again with them (view.py)."""
        free = self.free_total + self.session_gpus
        seen: set[str] | None = None
        for _ in range(3):
            if result.reservation is None:
                return result
            # every reservation of the cycle (policy: one per under-served allocation), each with
            # its own due time: the latest admits the most jobs, an earlier one the shortest only
            dues = [float(r["ready_at"]) for r in result.evidence.get("reservations", ())]
            horizons = [due - self.now for due in dues or [result.reservation.ready_at]]
            extra = self.pending.backfill_candidates(free, horizons, narrow)
            if seen is None:
                seen = {j.id for j in pending}
            extra = [j for j in extra if j.id not in seen]
            if not extra:
                return result
            self.stats.reruns += 1
            pending = pending + extra
            seen.update(j.id for j in extra)
            snapshot = dataclasses.replace(snapshot, pending=tuple(pending))
            result = self.schedule(snapshot)
        return result

    def _preempt(self, job: SimJob, grace_ends_at: float, for_job_id: str | None = None) -> None:
        now = self.now
        rj = job.running
        assert rj is not None
        rec = self.rec
        rec.preemptions += 1
        rec.preempted(now - job.run_start)
        if job.funded and now < job.protected_until:
            rec.protection_violations += 1
        self._unmark_preemptible(job)
        job.grace_end = max(grace_ends_at, now)
        job.running = running_with(rj, rj.last_checkpoint_at, now, for_job_id)
        self.running[job.spec.job_id] = job.running
        if grace_ends_at > now:
            self._push(grace_ends_at, GRACE_END, job)
        if for_job_id is not None and self.hold:
            beneficiary = self.by_id.get(for_job_id)
            if beneficiary is not None and beneficiary.state == PENDING:
                self.claims[for_job_id] = self.claims.get(for_job_id, 0) + 1
                self.held[for_job_id] = beneficiary

    # --- fragmentation ---------------------------------------------------------------------------

    def _update_frag(self) -> None:
        """Free GPUs the largest waiting gang cannot use ÷ capacity (0 when it fits or none waits)."""
        if not self.frag_dirty:
            return
        self.frag_dirty = False
        now = self.now
        gangs = [g for g in self.pending_sizes if g > 1]
        rec = self.rec
        if not gangs:
            rec.gang_wait.set(now, 0.0)
            rec.frag.set(now, 0.0)
            return
        g = max(gangs)
        rec.gang_wait.set(now, 1.0)
        rec.frag.set(now, 0.0 if self._fits(g) else self.free_total / self.capacity)

    def _fits(self, gpus: int) -> bool:
        if gpus > self.free_total:
            return False
        per = self.gpus_per_node
        if gpus <= per:
            return any(f >= gpus for f in self.free.values())
        whole = math.ceil(gpus / per)
        return sum(1 for f in self.free.values() if f >= per) >= whole


def last_checkpoint(base: float, interval: float, now: float) -> float:
    """The last checkpoint at or before `now` of a run whose work began at `base`, one every `interval`:
    always one whose next (`last + interval`, the one the checkpoint heap waits for) is after `now`.
    The quotient alone may round down by one where `now` is a checkpoint instant reached by adding
    `interval` (`(261185.264 + 1800 + 1800 - 261185.264) / 1800` is just below 2): the next checkpoint was
    then due already, and `_refresh_checkpoints` pushed and popped it at the same instant forever, inside
    one cycle, where the storm cut-off (it counts cycles) never looks (a jittered gang-heavy scenario hung;
    tests/unit/sim/test_engine.py). An interval below the clock's resolution at `now` (1e-6 s at 1e12 s, a trace
    in epoch milliseconds) adds nothing to `last`: the loop stops there (it looped forever) and the job counts as
    checkpointed at `now`, which is what so short an interval means."""
    last = base + math.floor((now - base) / interval) * interval
    while last + interval <= now:
        if last + interval <= last:
            return now
        last += interval
    return last


def next_checkpoint(last: float, interval: float, now: float) -> float:
    """What the checkpoint heap waits for after a refresh at `now`: `last + interval`, or the next float after `now`
    when the interval is below the clock's resolution (`last_checkpoint`), so the refresh at `now` ends."""
    nxt = last + interval
    return nxt if nxt > now else math.nextafter(now, math.inf)


def running_with(rj: RunningJob, last_checkpoint_at: float | None,
                 preemption_requested_at: float | None, claimed_for: str | None = None) -> RunningJob:
    """`dataclasses.replace(rj, last_checkpoint_at=..., preemption_requested_at=..., claimed_for=...)`
    (`claimed_for` None keeps the job's own), field by field: the generic `replace` took ≈ 10 % of a
    compiled run (ADR 0020). tests/unit/sim/test_engine.py checks that it equals `replace` with every
    field of `RunningJob` set."""
    return RunningJob(rj.id, rj.project, rj.gpus, rj.placement, rj.started_at, rj.protected_until, rj.funded,
                      last_checkpoint_at, rj.resumable, rj.klass, rj.submitted_at, preemption_requested_at,
                      rj.min_runtime_s, rj.priority, rj.topology_depth,
                      rj.claimed_for if claimed_for is None else claimed_for, rj.gpu_models, rj.clusters, rj.pin)


def with_room_freed(pj: PendingJob, at: float) -> PendingJob:
    """`dataclasses.replace(pj, room_freed_at=at)`, field by field (see `running_with`)."""
    return PendingJob(pj.id, pj.project, pj.gpus, pj.submitted_at, pj.min_runtime_s, pj.resumable, pj.klass,
                      pj.priority, pj.topology_depth, pj.previous_node, at, pj.gpu_models, pj.clusters, pj.pin)


def _acted_on(result: CycleResult) -> set[str]:
    """The waiting jobs a cycle acted on: placed, made room for (victims chosen), reserved for."""
    acted = {p.job_id for p in result.placements}
    acted.update(p.for_job_id for p in result.preemptions)
    # a search whose victims are all leaving already makes room without a new preemption
    acted.update(str(j) for j in result.evidence.get("making_room_for", ()))
    for r in result.evidence.get("reservations", ()):
        acted.add(str(r["job_id"]))
    if result.reservation is not None:
        acted.add(result.reservation.job_id)
    return acted


def _decision_digest(result: CycleResult) -> dict[str, Any]:
    return {
        "now": result.now,
        "placements": [(p.job_id, p.assignments, p.funded) for p in result.placements],
        "preemptions": [(p.victim_id, p.for_job_id, p.reason) for p in result.preemptions],
        "stops": [(s.job_id, s.reason) for s in result.stops],
    }
