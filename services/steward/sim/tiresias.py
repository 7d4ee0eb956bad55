"""`tiresias`: Tiresias' discretized two-dimensional least-attained-service scheduler (2D-LAS; Gu et al.,
"Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI'19), a research baseline that the
simulator runs beside the four policies: it minimises job completion time, knows no budgets, shares,
protection or lanes. It is no policy of the live scheduler (docs/results.md "The tiresias baseline").

Rules:
- **Attained service** of a job = GPUs × seconds it has held them, summed over its runs (the engine's
  count, `QueueListener.stopped`), from its submit or from its last promotion.
- **Queues.** `len(THRESHOLDS) + 1` = 2 priority queues: queue 0 below 3,250 GPU-seconds of attained
  service, queue 1 from there on. Two queues is the paper's discretized 2D-LAS on its traces; 3,250
  GPU-seconds is the first queue limit of the authors' public simulator (SymbioticLab/Tiresias,
  `simulator/jobs.py`, `queue_limit`), used with GPU time (`dlas-gpu`).
- **Demotion.** A job enters queue 0 at submit. While it runs, it moves down at the instant its
  attained service crosses a threshold (the cycle asks the engine to wake it then: evidence
  `wake_at`). Inside a queue, jobs are served FIFO by the instant they entered it.
- **Starvation (STARVELIMIT), off by default.** The authors' default scheduler (`dlas-gpu`) promotes
  nothing, and neither does this baseline unless given `promote_knob`: then a waiting job of a lower
  queue whose last run ended at least `promote_knob` × that run's length ago is promoted to queue 0, its
  attained service counted from zero again (the authors' simulator, `solve_starvation`, resets it the
  same way; it compares the waiting and running times summed since the last promotion, this module the
  last run and the wait after it). Under this work model the reset livelocks gangs: a 64-GPU gang
  crosses 3,250 GPU-seconds in 51 s, long before its first checkpoint, is preempted by the next
  queue-0 job, waits, is promoted with its service reset and starts again, losing all of it each time
  (87,500 preemptions for 220 jobs on `gang-heavy-n8-l1.2`; docs/results.md "The tiresias baseline").
  The authors' simulator cannot see this: a preemption loses nothing there.
- **The cycle.** Waiting jobs are walked from queue 0, FIFO inside. A job whose whole gang fits the
  free GPUs starts (best fit; a gang larger than a node takes whole nodes: `steward.policy.placement`,
  the rule every policy places by). One that does not fit preempts running jobs of strictly *lower*
  queues, the lowest first (last queue, latest entry), when that makes its whole gang fit, and none
  otherwise (all or nothing); victims it does not need are spared. Its room is then held: the victims'
  GPUs go to it at the end of their grace, and jobs behind it in the walk may not take the free GPUs
  its gang will use. A running job is never preempted for a job of its own queue (Tiresias' simulator
  keeps running jobs ahead of waiting ones in a queue).
- **Routing** (several clusters, or a job naming the GPU models or clusters it accepts; ADR 0057, 0066):
  steward's rule, through its code (`steward.policy.routing`): the job looks for room cluster by cluster,
  each time with every node it may not use there hidden from the plan, so it never lands on a model or
  cluster it excluded and a gang never spans clusters; among the clusters where it fits now, the tightest
  fit, then the name. When it fits nowhere, its victim search runs cluster by cluster (by name) in the same
  way, and the first cluster where preempting lower queues makes room holds it.
- **Work model**: the scenario's contract timings, as for every policy: a victim keeps its GPUs for
  `grace_s` (the scenario's `preemption_grace_s`), loses the work since its last checkpoint, pays the
  restart overhead on its next start. Sessions stop at their cap (`steward.policy.sessions`).
  Placements are unfunded (no budget charged, nothing protected).

Pure: no clock, no randomness. Its state is the queue as the engine reports it (`QueueListener`), so one
`Tiresias` serves one simulation.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from dataclasses import dataclass
from types import MappingProxyType

from steward.policy.contract import grace_s, lost_gpu_s
from steward.policy.model import CycleResult, Node, PendingJob, Placement, Preemption, RunningJob, Snapshot, Stop
from steward.policy.placement import CapacityIndex, Fit
from steward.policy.routing import Routes, hidden_except, left_free
from steward.policy.sessions import session_cap_stop

THRESHOLDS: tuple[float, ...] = (3250.0,)
"""Attained-service limits (GPU-seconds) between consecutive queues: queue k holds service in
[THRESHOLDS[k-1], THRESHOLDS[k])."""
PROMOTE_KNOB: float | None = None
"""STARVELIMIT as a multiple of the job's last run, or None for no promotion (the authors' default
`dlas-gpu`; their simulator tries knobs from 0.5 to 1,000). Module docstring: why None."""
STARVE_KNOB = 8.0
"""The knob the hand-computed tests use when they switch promotion on."""

Request = tuple[tuple[str, ...], tuple[str, ...]]  # (GPU models, clusters) a job accepts; empty: any
ChainKey = tuple[int, int, int | None, Request]  # (queue, gpus, topology depth, request)
NONE, PLACED, HELD = 0, 1, 2


def queue_of(service: float, thresholds: tuple[float, ...] = THRESHOLDS) -> int:
    """The queue of a job with `service` GPU-seconds of attained service: the thresholds it reached."""
    q = 0
    for limit in thresholds:
        if service < limit:
            break
        q += 1
    return q


def crossing_at(started_at: float, service_at_start: float, gpus: int, limit: float) -> float:
    """When a run that started at `started_at` with `service_at_start` reaches `limit` GPU-seconds."""
    return started_at + (limit - service_at_start) / gpus


@dataclass(slots=True)
class _Job:
    project: str
    gpus: int
    depth: int | None
    queue: int
    entry: float  # when it entered its queue
    pending: PendingJob  # what it asks (its request: what routing reads)
    attained: float = 0.0  # the engine's attained service at its last stop
    base: float = 0.0  # attained service at its last promotion (service counts from here)
    promote_at: float | None = None
    waiting: bool = False

    @property
    def key(self) -> ChainKey:
        return (self.queue, self.gpus, self.depth, (self.pending.gpu_models, self.pending.clusters))


class Tiresias:
    """The scheduler (`Snapshot -> CycleResult`) and the engine's `QueueListener` in one."""

    def __init__(self, thresholds: tuple[float, ...] = THRESHOLDS,
                 promote_knob: float | None = PROMOTE_KNOB) -> None:
        if list(thresholds) != sorted(set(thresholds)) or any(t <= 0 for t in thresholds):
            raise ValueError(f"thresholds must increase and be positive, got {thresholds}")
        if promote_knob is not None and not promote_knob > 0:
            raise ValueError(f"promote_knob must be positive or None, got {promote_knob}")
        self.thresholds = thresholds
        self.promote_knob = promote_knob
        self.jobs: dict[str, _Job] = {}
        self.chains: dict[ChainKey, list[tuple[float, str]]] = {}
        self.promotions: list[tuple[float, str]] = []  # (promote_at, job id), stale entries skipped
        self.runs: dict[str, tuple[float, int, float, tuple[float, ...]]] = {}
        """Per running job: (started_at, queue and queue entry at the start, the instants it moves down)."""
        self._capacity: tuple[tuple[Node, ...] | None, int] = (None, 0)

    # --- QueueListener ----------------------------------------------------------------------------

    def queued(self, job: PendingJob) -> None:
        j = self.jobs.get(job.id)
        if j is None:
            j = self.jobs[job.id] = _Job(job.project, job.gpus, job.topology_depth, 0, job.submitted_at, job)
        j.waiting = True
        insort(self.chains.setdefault(j.key, []), (j.entry, job.id))

    def left_queue(self, job_id: str) -> None:
        j = self.jobs[job_id]
        self._unchain(j, job_id)
        j.waiting = False
        j.promote_at = None

    def stopped(self, job_id: str, attained_gpu_s: float, run_s: float, now: float, done: bool) -> None:
        self.runs.pop(job_id, None)
        if done:
            del self.jobs[job_id]
            return
        j = self.jobs[job_id]
        before = j.attained - j.base
        q = queue_of(attained_gpu_s - j.base, self.thresholds)
        if q > j.queue:  # demoted while it ran: it entered its queue when it crossed the limit
            j.entry = crossing_at(now - run_s, before, j.gpus, self.thresholds[q - 1])
            j.queue = q
        j.attained = attained_gpu_s
        if j.queue > 0 and self.promote_knob is not None:
            j.promote_at = now + self.promote_knob * run_s
            heapq.heappush(self.promotions, (j.promote_at, job_id))

    def _unchain(self, j: _Job, job_id: str) -> None:
        chain = self.chains[j.key]
        del chain[bisect_left(chain, (j.entry, job_id))]
        if not chain:
            del self.chains[j.key]

    def _promote(self, now: float) -> None:
        """Starvation avoidance: waiting jobs due for promotion go to queue 0 (entering it when due)."""
        heap = self.promotions
        while heap and heap[0][0] <= now:
            at, job_id = heapq.heappop(heap)
            j = self.jobs.get(job_id)
            if j is None or not j.waiting or j.promote_at != at:
                continue
            self._unchain(j, job_id)
            j.queue, j.entry, j.base, j.promote_at = 0, at, j.attained, None
            insort(self.chains.setdefault(j.key, []), (j.entry, job_id))

    def run_info(self, rj: RunningJob) -> tuple[float, int, float, tuple[float, ...]]:
        """The run's start, the queue and entry it started with, and when it crosses each next limit."""
        info = self.runs.get(rj.id)
        if info is None or info[0] != rj.started_at:
            j = self.jobs[rj.id]
            at_start = j.attained - j.base
            crossings = tuple(crossing_at(rj.started_at, at_start, rj.gpus, limit)
                              for limit in self.thresholds[j.queue:])
            info = self.runs[rj.id] = (rj.started_at, j.queue, j.entry, crossings)
        return info

    def capacity(self, nodes: tuple[Node, ...]) -> int:
        """GPUs of the schedulable nodes (memo of the last nodes tuple)."""
        if self._capacity[0] is not nodes:
            self._capacity = (nodes, sum(n.gpus for n in nodes if n.schedulable))
        return self._capacity[1]

    def _next_promotion(self) -> float:
        heap = self.promotions
        while heap:
            at, job_id = heap[0]
            j = self.jobs.get(job_id)
            if j is not None and j.waiting and j.promote_at == at:
                return at
            heapq.heappop(heap)
        return math.inf

    # --- the cycle --------------------------------------------------------------------------------

    def __call__(self, snapshot: Snapshot) -> CycleResult:
        return _Cycle(self, snapshot).run()


class _Cycle:
    """One walk of the queues over a tentative plan of the cluster (free GPUs minus held room)."""

    def __init__(self, sched: Tiresias, snapshot: Snapshot) -> None:
        self.sched = sched
        self.snap = snapshot
        self.now = snapshot.now
        self.settings = snapshot.settings
        self.placements: list[Placement] = []
        self.preemptions: list[Preemption] = []
        self.stops: list[Stop] = []
        self.claims: dict[str, list[RunningJob]] = {}  # beneficiary -> its victims in their grace
        self.victims: list[tuple[int, float, str, RunningJob]] = []  # lowest priority first
        self.taken: set[str] = set()
        self.untaken = [0] * (len(sched.thresholds) + 1)  # possible victims left, per queue
        self.wake_at = math.inf
        self.free_total = sched.capacity(snapshot.nodes) - sum(rj.gpus for rj in snapshot.running)
        self._plan: CapacityIndex | None = None
        self._routes: Routes | None = None

    @property
    def plan(self) -> CapacityIndex:
        """Free GPUs per node minus the room held this cycle (built when first needed)."""
        if self._plan is None:
            used: dict[str, int] = {}
            for rj in self.snap.running:
                for node, count in rj.placement:
                    used[node] = used.get(node, 0) + count
            self._plan = CapacityIndex(self.snap.nodes, used, self.settings.placement)
        return self._plan

    @property
    def routes(self) -> Routes:
        """The clusters of the plan's nodes and what each job may use (steward's, policy/routing.py)."""
        if self._routes is None:
            routes = Routes(self.plan, ())
            # active for any waiting job's request: this walk reads the whole queue, not the snapshot's
            routes.active = routes.multi or any(key[3] != ((), ()) for key in self.sched.chains)
            self._routes = routes
        return self._routes

    def free_now(self) -> int:
        return self._plan.total_free if self._plan is not None else self.free_total

    def eligible(self, q: int) -> int:
        """Running jobs of queues below `q` not yet chosen as victims."""
        return sum(self.untaken[q + 1:])

    def run(self) -> CycleResult:
        sched = self.sched
        now = self.now
        sched._promote(now)
        self._running()
        failed: dict[tuple[int, Request], int] = {}  # (queue, request) -> fewest GPUs that found no room
        for q in range(len(sched.thresholds) + 1):
            heads = [(chain[0][0], chain[0][1], key, 0) for key, chain in sched.chains.items() if key[0] == q]
            heapq.heapify(heads)
            while heads:
                eligible = self.eligible(q)
                if self.free_now() == 0 and eligible == 0 and not self.claims:
                    break
                _, job_id, key, i = heapq.heappop(heads)
                _, gpus, depth, request = key
                claimed = bool(self.claims.get(job_id))
                if depth is None and not claimed and any(
                        gpus >= g for (fq, fr), g in failed.items() if fq <= q and fr == request):
                    continue  # a twin of no more priority found no room: neither will this one (chain dropped)
                if gpus > self.free_now() and eligible == 0 and not claimed:
                    outcome = NONE  # more GPUs than free and nothing to preempt
                else:
                    outcome = self._admit(job_id, q, gpus, depth)
                if outcome == NONE:
                    if depth is None and not claimed:
                        failed[(q, request)] = min(failed.get((q, request), gpus), gpus)
                    continue  # its twins behind it find no room either
                chain = sched.chains[key]
                if i + 1 < len(chain):
                    nxt = chain[i + 1]
                    heapq.heappush(heads, (nxt[0], nxt[1], key, i + 1))
        if self.snap.pending or sched.chains:
            self.wake_at = min(self.wake_at, sched._next_promotion())
        evidence: dict[str, object] = {"policy": "tiresias"}
        if self.wake_at < math.inf:
            evidence["wake_at"] = float(self.wake_at)
        return CycleResult(
            now=now, placements=tuple(self.placements), preemptions=tuple(self.preemptions),
            stops=tuple(self.stops), explanations=MappingProxyType({}), reservation=None, fragmentation=0.0,
            order=(), evidence=evidence,
        )

    def _running(self) -> None:
        """Sessions at their cap stop; victims in their grace are listed by beneficiary; every other
        running job is a possible victim, with its queue now and the next instant it moves down."""
        sched = self.sched
        now = self.now
        victims = self.victims
        untaken = self.untaken
        wake = math.inf
        for rj in self.snap.running:
            if rj.preemption_requested_at is not None:
                if rj.claimed_for is not None:
                    self.claims.setdefault(rj.claimed_for, []).append(rj)
                continue
            if rj.klass == "interactive":
                stop = session_cap_stop(rj, now, self.settings)
                if stop is not None:
                    self.stops.append(stop)
                    continue
            _, q, entry, crossings = sched.run_info(rj)
            for at in crossings:  # one queue down at each crossing passed
                if at > now:
                    wake = min(wake, at)
                    break
                q += 1
                entry = at
            victims.append((q, entry, rj.id, rj))
            untaken[q] += 1
        self.wake_at = wake
        victims.sort(reverse=True)

    def _admit(self, job_id: str, q: int, gpus: int, depth: int | None) -> int:
        """Place the job, or hold room for it by preempting lower queues (all or nothing); a routed job
        (module docstring) cluster by cluster, through steward's routing."""
        routes = self.routes
        pj = self.sched.jobs[job_id].pending
        if not routes.routed(pj):
            return self._admit_on(job_id, q, gpus, depth, self.plan.find(gpus, depth))
        plan = self.plan
        candidates = routes.candidates(pj)
        found: list[tuple[int, str, Fit]] = []
        for cluster, nodes in candidates:
            with hidden_except(plan, nodes):
                fit = plan.find(gpus, depth)
            if fit is not None:
                found.append((left_free(plan, fit), cluster, fit))
        if found:
            _, cluster, fit = min(found, key=lambda x: (x[0], x[1]))
            return self._admit_on(job_id, q, gpus, depth, fit, cluster)
        for cluster, nodes in candidates:
            with hidden_except(plan, nodes):
                outcome = self._admit_on(job_id, q, gpus, depth, None, cluster)
            if outcome != NONE:
                return outcome
        return NONE

    def _admit_on(self, job_id: str, q: int, gpus: int, depth: int | None, fit: Fit | None,
                  cluster: str | None = None) -> int:
        """Place the job on `fit` (found on the visible nodes), or make room for it on the visible nodes."""
        plan = self.plan
        if fit is not None:
            assignments = plan.commit(fit)
            j = self.sched.jobs[job_id]
            self.placements.append(Placement(
                job_id=job_id, project=j.project, assignments=assignments, funded=False,
                protected_until=self.now,
                evidence={"queue": q, "attained_gpu_s": j.attained - j.base, "entered_queue_at": j.entry,
                          **({"cluster": cluster} if cluster is not None else {})}))
            return PLACED
        released: list[RunningJob] = []
        for rj in self.claims.get(job_id, ()):  # already leaving for it
            self._release(rj, released)
        fit = plan.find(gpus, depth) if released else None
        new: list[tuple[int, RunningJob]] = []
        if fit is None:
            for vq, _, vid, rj in self.victims:
                if vq <= q:
                    break
                if vid in self.taken:
                    continue
                if cluster is not None and not any(plan.ok[plan.pos[n]] for n, _ in rj.placement):
                    continue  # on a node hidden from this search: its GPUs cannot make room here
                self._release(rj, released)
                new.append((vq, rj))
                fit = plan.find(gpus, depth)
                if fit is not None:
                    break
        if fit is None:
            for rj in released:
                self._hold(rj)
            return NONE
        kept: set[str] = set()
        for rj in reversed(released):  # spare the victims the gang does not need
            self._hold(rj)
            if self._fits(fit, gpus):
                kept.add(rj.id)
            else:
                self._release(rj, [])
        leaving: dict[int, int] = {}  # node -> GPUs of the victims that go (free at their stop, not now)
        for rj in released:
            if rj.id not in kept:
                for node, count in rj.placement:
                    i = plan.pos[node]
                    leaving[i] = leaving.get(i, 0) + count
        plan.commit(fit)
        for i, count in leaving.items():
            # the gang takes the GPUs free now first; the victims keep theirs until their grace ends,
            # so nobody behind plans on them in this cycle
            back = min(count, plan.free[i])
            if back > 0:
                plan.take(i, back)
        grace = grace_s(False, self.settings)
        for vq, rj in new:
            if rj.id in kept:
                continue
            self.taken.add(rj.id)
            self.untaken[vq] -= 1
            self.preemptions.append(Preemption(
                victim_id=rj.id, for_job_id=job_id, reason="unfunded", grace_ends_at=self.now + grace,
                lost_gpu_s=lost_gpu_s(rj, self.now, self.settings),
                evidence={"victim_queue": vq, "for_queue": q}))
        return HELD

    def _fits(self, fit: Fit, gpus: int) -> bool:
        """Does the plan still hold `fit` (a gang larger than one node on wholly free nodes)?"""
        plan = self.plan
        if gpus > plan.maxcap:
            return all(plan.free[i] == plan.cap[i] for i, _ in fit.nodes)
        return all(plan.free[i] >= take for i, take in fit.nodes)

    def _release(self, rj: RunningJob, released: list[RunningJob]) -> None:
        """Count a victim's GPUs as free in the plan (it will leave)."""
        plan = self.plan
        for node, count in rj.placement:
            plan.take(plan.pos[node], -count)
        released.append(rj)

    def _hold(self, rj: RunningJob) -> None:
        plan = self.plan
        for node, count in rj.placement:
            plan.take(plan.pos[node], count)
