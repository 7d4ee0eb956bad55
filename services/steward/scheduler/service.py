"""The scheduler service: the policy cycle over the ledger's state, decisions published as commands.

It folds the event log into the same `LedgerState` the ledger keeps (tailing the store), feeds the
usage window with the funded intervals of ended attempts, runs `steward.policy.cycle.schedule` on a
snapshot, and publishes the decisions to Kafka. It then waits until the ledger has recorded an
outcome for each command before the next cycle, so no cycle plans on a state its own decisions have
not yet reached (a plan commits as a whole or is re-planned, never half-applied twice). A cycle that
decided nothing waits for an event that may change a decision (`steward.scheduler.wake`), at the
latest `scheduler_interval_s`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kafka.errors import KafkaError
from sqlalchemy.exc import DBAPIError

from steward.bus.envelope import command_envelope
from steward.bus.identity import SCHEDULER_ACTOR, SYSTEM_ROLE
from steward.bus.kafka import CommandPublisher
from steward.config import Settings
from steward.domain.commands import Command, ExplainWaiting
from steward.domain.events import Event
from steward.domain.policy_settings import PolicySettings, in_force
from steward.domain.state import JOB_LOCAL_EVENTS, TERMINAL_STATES, LedgerState, evolve, evolve_job
from steward.logs import JobCorrelations
from steward.policy.cycle import schedule
from steward.policy.explain import Explanations
from steward.policy.model import CycleResult, Node, RunningJob, Snapshot
from steward.policy.usage import Interval, UsageWindow
from steward.scheduler.bridge import (
    HOLDING_STATES,
    commands_of,
    funded_interval,
    policy_node,
    running_job,
    snapshot_of,
)
from steward.scheduler.wake import EventWake
from steward.store.eventstore import EventStore
from steward.store.leases import LeaseStore, lead

log = logging.getLogger("steward.scheduler")

ENDING_EVENTS = frozenset({"JobCompleted", "JobFailed", "JobCancelled", "JobPreempted", "JobLost"})


@dataclass
class SchedulerState:
    """The scheduler's view, folded from the log (the same `evolve` as the ledger) plus usage."""

    settings: PolicySettings
    state: LedgerState = field(default_factory=LedgerState)
    head: int = 0
    usage: UsageWindow = field(init=False)
    # ADR 0076: the same usage per cluster (each attempt runs on one cluster: gangs never span two)
    cluster_usage: dict[str, UsageWindow] = field(default_factory=dict)
    last_result: CycleResult | None = None
    last_snapshot: Snapshot | None = None  # what the last cycle read (its result's input: the metrics' fragmentation)
    explained: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    explained_at: float = 0.0
    policy: dict[str, Any] = field(default_factory=dict)
    correlations: JobCorrelations = field(default_factory=JobCorrelations)
    # drain stops already asked, per (job, attempt): asked once, not every cycle (`commands_of`)
    drain_asked: set[tuple[str, int]] = field(default_factory=set)
    # the job table's size after the last drop of ended jobs (`drop_ended`)
    kept: int = 0

    def __post_init__(self) -> None:
        self.usage = UsageWindow(self.settings)
        self.cluster_usage = {}

    def follow_policy(self, store: EventStore) -> bool:
        """Apply the policy settings recorded in the log (`PolicySet`). The usage window depends on
        them (window, decay), so a change re-folds the log under the new settings."""
        if self.state.policy == self.policy:
            return False
        self.policy = dict(self.state.policy)
        self.settings = PolicySettings.steward(**in_force(self.policy))
        self.usage = UsageWindow(self.settings)
        self.cluster_usage = {}
        self.state, self.head, self.kept = LedgerState(), 0, 0
        self.catch_up(store)
        log.info("policy settings now %s", self.policy)
        return True

    def catch_up(self, store: EventStore) -> int:
        """Fold the log's new events into the view (and the usage window), then drop the ended jobs once the
        table has doubled (`drop_ended`). The cost of an event does not grow with the history: a job-local
        event changes its job in the view's own table (`fold`), and the table holds the jobs not ended."""
        n = 0
        for rec in store.iterate(self.head):
            if rec.type in ENDING_EVENTS:
                job = self.state.jobs.get(rec.payload.get("job_id", ""))
                if job is not None and job.state in HOLDING_STATES:
                    models = {nid: node.gpu_model for nid, node in self.state.nodes.items()}
                    intervals = funded_interval(job, rec.recorded_at, models)
                    for interval in intervals:
                        # an attempt that ended before the window's clock (recorded just before a
                        # cycle, read after it) still charged its usage: the window clips it itself
                        self.usage.add(interval)
                    if intervals:
                        self.charge_cluster(job.assignments, intervals)
            self.fold(rec.as_event(), rec.recorded_at)
            self.correlations.observe(rec.type, rec.payload, rec.metadata)
            self.head = rec.position
            n += 1
        self.drop_ended()
        return n

    def charge_cluster(self, assignments: tuple[tuple[str, tuple[int, ...]], ...], intervals: list[Interval]) -> None:
        """ADR 0076: an ended attempt's usage charged to the cluster of its first node (`funded_interval` gives one
        interval per node, in the assignments' order)."""
        nodes = self.state.nodes
        for (nid, _), interval in zip(assignments, intervals, strict=False):
            node = nodes.get(nid)
            cluster = node.cluster if node is not None else "default"
            window = self.cluster_usage.get(cluster)
            if window is None:
                window = self.cluster_usage[cluster] = UsageWindow(self.settings)
            window.add(interval)

    def usage_by_cluster(self, now: float, running: list[RunningJob],
                         nodes: Mapping[str, Node]) -> dict[str, dict[str, float]] | None:
        """ADR 0076: per cluster, the usage in the window with the funded running jobs on it; None with one cluster
        registered (the cycle reads the tree's alone)."""
        clusters = {n.cluster for n in nodes.values()}
        if len(clusters) < 2:
            return None
        on: dict[str, list[RunningJob]] = {}  # the running jobs by cluster, in one pass
        for r in running:
            if r.placement and (node := nodes.get(r.placement[0][0])) is not None:
                on.setdefault(node.cluster, []).append(r)
        out: dict[str, dict[str, float]] = {}
        for cluster in sorted(clusters | set(self.cluster_usage)):
            window = self.cluster_usage.get(cluster)
            if window is None:
                window = self.cluster_usage[cluster] = UsageWindow(self.settings)
            out[cluster] = window.usage(max(now, window.now), on.get(cluster, []), nodes)
        return out

    def fold(self, event: Event, at: float) -> None:
        """`evolve`, with a job-local event (`JOB_LOCAL_EVENTS`) applied to the view's own job table in place
        (`evolve` copies the whole table per job event, so folding a log of N jobs cost O(N²)); the table
        belongs to this view, and nothing keeps an older state of it."""
        if event.type not in JOB_LOCAL_EVENTS:
            self.state = evolve(self.state, event, at)
            return
        job_id = event.payload.get("job_id")
        jobs = self.state.jobs
        step = evolve_job(jobs.get(job_id) if isinstance(job_id, str) else None, self.state.used, event, at)
        if step is None:
            return
        job, used = step
        jobs[job.job_id] = job
        if used is not self.state.used:
            self.state = replace(self.state, used=used)

    def drop_ended(self) -> int:
        """Drop the ended jobs (`TERMINAL_STATES`) once the table has doubled since the last drop (amortised
        O(1) per job): no rule of the cycle, nor of the API's order and previews, reads an ended job (the
        snapshot takes the waiting and the holding ones; an ended attempt's usage is already in the usage
        window), and an ended job never changes again. Returns the table's size after."""
        jobs = self.state.jobs
        if len(jobs) > 2 * self.kept + 64:
            self.state = replace(self.state, jobs={k: j for k, j in jobs.items() if j.state not in TERMINAL_STATES})
            self.kept = len(self.state.jobs)
        return self.kept

    def cycle(self, now: float) -> CycleResult:
        running = [running_job(j, now) for j in self.state.jobs.values() if j.state in HOLDING_STATES]
        nodes = {nid: policy_node(node) for nid, node in self.state.nodes.items()}
        usage = self.usage.usage(max(now, self.usage.now), running, nodes)
        snap = snapshot_of(self.state, usage, self.settings, now)
        by_cluster = self.usage_by_cluster(now, running, nodes)
        if by_cluster is not None:
            snap = replace(snap, cluster_usage=by_cluster)
        result = schedule(snap)
        self.last_result, self.last_snapshot = result, snap
        return result


EXPLAIN_EVERY_S = 5.0
EXPLANATIONS_PER_COMMAND = 100
MAX_EVIDENCE_BYTES = 1500


def explanation_keys(result: CycleResult) -> Iterator[tuple[str, tuple[str, int, str]]]:
    """(job id, (reason, blocking GPUs, scope)) of every waiting job. ADR 0031: the cycle's lazy
    `Explanations` give them without building an explanation (one computation per class of jobs
    the bulk rule cannot tell apart); any other mapping is read in full."""
    explanations = result.explanations
    if isinstance(explanations, Explanations):
        return explanations.summaries()
    return ((e.job_id, (e.reason, e.blocking_gpus, e.blocking_scope)) for e in result.iter_explanations())


def changed_explanations(view: SchedulerState, result: CycleResult) -> list[ExplainWaiting]:
    """The explanations whose reason or blocking amount changed since they were last recorded, in
    commands of bounded size (a waiting job's position alone changing is not worth an event). Only
    those are built in full (ADR 0031): the others are compared by their key."""
    changed: dict[str, dict[str, Any]] = {}
    seen: dict[str, tuple[str, int, str]] = {}
    explained = view.explained
    for job_id, key in explanation_keys(result):
        seen[job_id] = key
        if explained.get(job_id) != key:
            data = result.explanations[job_id].to_dict()
            data.pop("job_id")
            if len(json.dumps(data["evidence"], default=str)) > MAX_EVIDENCE_BYTES:
                data["evidence"] = {"truncated": True, "keys": sorted(data["evidence"])}
            changed[job_id] = data
    view.explained = seen
    ids = sorted(changed)
    return [ExplainWaiting({j: changed[j] for j in ids[i:i + EXPLANATIONS_PER_COMMAND]})
            for i in range(0, len(ids), EXPLANATIONS_PER_COMMAND)]


# How long the scheduler waits for the ledger to record its decisions before it plans again. It waits while
# the ledger makes progress on them (an outcome at least every OUTCOME_STALL_S), up to OUTCOME_LIMIT_S in all:
# a fixed 15 s let a cycle re-plan on a view the ledger had not yet reached under load, and decide again jobs
# it had just placed (issue 26: 451 of 2,000 pods decided twice); a stalled ledger still lets it re-plan.
OUTCOME_STALL_S = 15.0
OUTCOME_LIMIT_S = 120.0


def wait_for_outcomes(recorded: Callable[[str], bool], message_ids: list[str], *,
                      stall_s: float = OUTCOME_STALL_S, limit_s: float = OUTCOME_LIMIT_S,
                      stop: threading.Event | None = None, clock: Callable[[], float] = time.monotonic,
                      sleep: Callable[[float], None] = time.sleep) -> bool:
    """Until the ledger recorded an outcome for each message (`recorded(message_id)`): True when it did.
    False when no new outcome arrived for `stall_s`, when `limit_s` passed, or on `stop`. The first looks
    come soon (a few ms when idle); the next cycle waits on this."""
    start = last_progress = clock()
    remaining = list(message_ids)
    delay = 0.005
    while remaining:
        now = clock()
        if now - last_progress >= stall_s or now - start >= limit_s or (stop is not None and stop.is_set()):
            return False
        still = [m for m in remaining if not recorded(m)]
        if len(still) < len(remaining):
            last_progress, delay = clock(), 0.005
        remaining = still
        if remaining:
            sleep(delay)
            delay = min(delay * 1.5, 0.05)
    return True


def run_cycle(view: SchedulerState, store: EventStore, publisher: CommandPublisher,
              fence: Callable[[], None] | None = None, epoch: int | None = None,
              stop: threading.Event | None = None) -> bool:
    """One cycle: catch up on the log, decide, publish, wait for the ledger's outcomes. True when it
    decided something (the next cycle then runs at once, on the state those decisions made). `fence` runs
    right before publishing (ADR 0060: raises `Fenced` when a standby took the scheduler's lease); every
    command carries `epoch`, the lease's epoch it was decided under, and the ledger refuses it once the lease
    has a newer one (ADR 0065: a cycle published after a pause past the fence's read)."""
    view.catch_up(store)
    view.follow_policy(store)
    if not view.state.nodes:
        return False
    now = time.time()
    result = view.cycle(now)
    if view.drain_asked:  # forget attempts that ended or moved on
        view.drain_asked &= {(j.job_id, j.attempt) for j in view.state.jobs.values() if j.state == "RUNNING"}
    decisions = commands_of(result, view.state, view.settings.preemption_grace_s, view.drain_asked)
    commands: list[Command] = list(decisions)
    if now - view.explained_at >= EXPLAIN_EVERY_S:
        commands.extend(changed_explanations(view, result))
        view.explained_at = now
    if not commands:
        return False
    if fence is not None:
        fence()
    ids = []
    for command in commands:
        job_id = getattr(command, "job_id", None)
        env = command_envelope(command, actor=SCHEDULER_ACTOR, role=SYSTEM_ROLE,
                               correlation_id=view.correlations.of(job_id), epoch=epoch)
        if job_id is not None:
            log.info("decided %s for job %s", command.TYPE, job_id,
                     extra={"correlation_id": env.meta["correlation_id"]})
        publisher.publish(env, wait=False)
        ids.append(env.id)
    publisher.flush()
    if decisions:
        log.info("cycle decided %d placement(s), %d preemption(s)", len(result.placements),
                 len(decisions) - len(result.placements))
    if not wait_for_outcomes(lambda m: bool(store.by_message(m)), ids, stop=stop):
        log.warning("the ledger has not recorded all decisions (no outcome for %.0f s, or %.0f s in all); "
                    "re-planning", OUTCOME_STALL_S, OUTCOME_LIMIT_S)
    return bool(decisions)


def run_scheduler_candidate(settings: Settings, stop: threading.Event) -> None:
    """The scheduler as one candidate of its role (ADR 0060): a standby until it holds the `scheduler` lease,
    then the scheduler, which asks the store that the lease is still its own right before each publication
    and sends the lease's epoch with every command (the ledger refuses an older one, ADR 0065), until `stop` or
    a takeover (a standby again then)."""
    from steward.scheduler import metrics as metrics_scheduler

    store = EventStore.from_url(settings.resolved_store_url)
    metrics_scheduler.start(settings)  # a standby serves `steward_leader{role="scheduler"} 0`
    checks = LeaseStore(store.engine, "scheduler")  # the publishing thread's own connection

    def active(active_stop: threading.Event, epoch: int) -> None:
        run_scheduler(settings, active_stop, fence=lambda: checks.check(epoch), epoch=epoch)

    try:
        lead(store.engine, "scheduler", stop, active)
    finally:
        checks.close()
        store.engine.dispose()


def run_scheduler(settings: Settings, stop: threading.Event | None = None,
                  policy: PolicySettings | None = None, fence: Callable[[], None] | None = None,
                  epoch: int | None = None) -> None:
    stop = stop or threading.Event()
    store = EventStore.from_url(settings.resolved_store_url)
    publisher = CommandPublisher(settings)
    view = SchedulerState(policy or PolicySettings.steward())
    from steward.scheduler import metrics as metrics_scheduler

    metrics = metrics_scheduler.start(settings)
    wake = EventWake(settings, stop)
    wake.start()
    log.info("scheduler started")
    try:
        while not stop.is_set():
            try:
                started = time.perf_counter()
                decided = run_cycle(view, store, publisher, fence, epoch, stop)
                metrics.observe(time.perf_counter() - started, view.last_result, view.last_snapshot)
            except (DBAPIError, KafkaError, OSError) as err:
                # the store or the broker restarts: keep the folded view, retry after a pause
                log.warning("cycle failed (%s: %s); retrying", err.__class__.__name__, str(err).splitlines()[0])
                stop.wait(2.0)
                continue
            if not decided:  # the next cycle when the log changes, at the latest after the interval
                wake.wait(settings.scheduler_interval_s)
    finally:
        wake.close()
        publisher.close()
