"""The pure bridge between the ledger's state and the policy cycle (no IO, no clock).

`snapshot_of(state, usage, settings, now)` turns the folded `LedgerState` into the policy's
`Snapshot`; `commands_of(result, state)` turns a `CycleResult` into the commands the scheduler
publishes: `PlaceJob` (with concrete GPU indices), `RequestPreemption` (with the evidence), and
`ExplainQueue` entries for waiting jobs whose explanation changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from steward.domain.clusters import effective_pin, pinned_clusters
from steward.domain.commands import ROOT, PlaceJob, RequestPreemption
from steward.domain.policy_settings import PolicySettings
from steward.domain.state import ClusterNode, Job, LedgerState
from steward.policy.model import (
    AllocationTree,
    CycleResult,
    Node,
    PendingJob,
    RunningJob,
    Snapshot,
)
from steward.policy.usage import Interval

WAITING_STATES = frozenset({"QUEUED"})
HOLDING_STATES = frozenset({"PLACED", "RUNNING"})
NODE_STATES = {"ready": "ready", "draining": "draining", "unhealthy": "unhealthy"}


def policy_node(node: ClusterNode) -> Node:
    """A registered node's path ends with the node itself; the policy's path lists only the domains
    that enclose it (block, spine, ...). GPUs held by foreign load (work another scheduler placed) are not
    the policy's to place on nor to preempt: it sees the node without them."""
    path = node.path[:-1] if node.path and node.path[-1] == node.node_id else node.path
    state = NODE_STATES.get(node.state, "unhealthy")
    gpus = max(0, node.gpus - node.foreign_gpus)
    return Node(node.node_id, gpus, node.gpu_model, tuple(path), state, node.cluster)  # type: ignore[arg-type]


def allocation_tree(state: LedgerState, max_depth: int = 8) -> AllocationTree:
    """The policy's tree, with the debug quotas managers set (DESIGN.md "Debug quota"; unset: default)."""
    allocations = state.allocations.values()
    return AllocationTree.build(
        ((a.name, None if a.parent == ROOT else a.parent, a.share) for a in allocations),
        max_depth=max_depth,
        debug_quotas={a.name: a.debug_quota_gpus for a in allocations if a.debug_quota_gpus is not None},
    )


def allocation_pins(state: LedgerState) -> dict[str, str]:
    """ADR 0067: the cluster each allocation is pinned to (its own pin or its nearest pinned ancestor's), for
    the allocations with one."""
    parents = {n: a.parent for n, a in state.allocations.items()}
    own = {n: a.pin for n, a in state.allocations.items() if a.pin}
    if not own:
        return {}
    pins = {n: effective_pin(n, parents, own) for n in state.allocations}
    return {n: p for n, p in pins.items() if p}


def _klass(job: Job) -> Any:
    return job.job_class if job.job_class in ("batch", "debug", "interactive") else "batch"


def pending_job(job: Job, room_freed_at: float | None = None, pin: str = "") -> PendingJob:
    """A waiting job as the policy reads it; `pin`: the cluster its allocation is pinned to (ADR 0067), which
    narrows the clusters it accepts to that one (`pinned_clusters`)."""
    return PendingJob(
        id=job.job_id, project=job.project, gpus=job.gpus, submitted_at=job.submitted_at,
        min_runtime_s=job.min_runtime_s, resumable=job.resumable, klass=_klass(job), priority=job.priority,
        previous_node=job.preferred_node, room_freed_at=room_freed_at,
        gpu_models=job.gpu_models, clusters=pinned_clusters(job.clusters, pin), pin=pin,
    )


def rooms_freed(jobs: list[Job]) -> dict[str, float]:
    """ADR 0021: per waiting job, the last time a job preempted for it stopped and freed its GPUs. A
    requeued victim keeps `preemption_for` (its beneficiary) until it is placed again, and its
    `requeued_at` is the stop; the policy holds the room for the beneficiary a while (`lane_hold_s`)."""
    out: dict[str, float] = {}
    for job in jobs:
        at, beneficiary = job.requeued_at, job.preemption_for
        if job.state in WAITING_STATES and beneficiary and at is not None and at > out.get(beneficiary, -1.0):
            out[beneficiary] = at
    return out


def running_job(job: Job, now: float, pin: str = "") -> RunningJob:
    started = job.started_at if job.started_at is not None else now
    protected = job.protected_until
    if protected is None:  # placed, not yet started: protection counts from the start, so it holds
        protected = now + (job.min_runtime_s if job.funded else 0.0)
    return RunningJob(
        id=job.job_id, project=job.project, gpus=job.gpus,
        placement=tuple((n, len(g)) for n, g in job.assignments), started_at=started,
        protected_until=protected, funded=job.funded, last_checkpoint_at=job.last_checkpoint_at,
        resumable=job.resumable, klass=_klass(job), submitted_at=job.submitted_at,
        preemption_requested_at=job.preemption_requested_at, min_runtime_s=job.min_runtime_s,
        priority=job.priority, claimed_for=job.preemption_for or None,
        gpu_models=job.gpu_models, clusters=pinned_clusters(job.clusters, pin), pin=pin,
    )


def snapshot_of(state: LedgerState, usage: Mapping[str, float], settings: PolicySettings, now: float) -> Snapshot:
    nodes = tuple(policy_node(n) for _, n in sorted(state.nodes.items()))
    jobs = sorted(state.jobs.values(), key=lambda j: j.job_id)
    freed = rooms_freed(jobs)
    pins = allocation_pins(state)
    return Snapshot(
        now=now,
        nodes=nodes,
        tree=allocation_tree(state, settings.max_tree_depth),
        usage=usage,
        running=tuple(running_job(j, now, pins.get(j.project, "")) for j in jobs if j.state in HOLDING_STATES),
        pending=tuple(pending_job(j, freed.get(j.job_id), pins.get(j.project, ""))
                      for j in jobs if j.state in WAITING_STATES),
        settings=settings,
    )


def funded_interval(job: Job, end: float, models: Mapping[str, str]) -> list[Interval]:
    """The usage an ended attempt charged (DESIGN: usage is GPU-seconds of funded occupancy)."""
    if not job.funded or job.started_at is None or end <= job.started_at:
        return []
    return [Interval(job.project, job.started_at, end, len(g), models.get(n, "default")) for n, g in job.assignments]


def place_command(state: LedgerState, job_id: str, assignments: tuple[tuple[str, int], ...], funded: bool,
                  evidence: dict[str, Any], taken: dict[str, set[int]]) -> PlaceJob:
    """Concrete GPU indices for a placement: the lowest free ones on each node (not yet `taken`)."""
    chosen: dict[str, list[int]] = {}
    for node_id, count in assignments:
        free = sorted(state.free_gpus(node_id) - taken.setdefault(node_id, set()))
        if len(free) < count:
            raise ValueError(f"placement of {job_id} wants {count} GPUs on {node_id}, {len(free)} free")
        chosen[node_id] = free[:count]
        taken[node_id].update(chosen[node_id])
    return PlaceJob(job_id, chosen, funded=funded, evidence=evidence)


def can_be_asked_to_stop(job: Job) -> bool:
    """DESIGN.md "The time-slicing contract" (checkpoint request, grace, stop, requeue) acts on a running
    attempt: the ledger refuses a preemption of anything else (`require_running`) or a second one while
    one is pending (`require_no_pending_preemption`). A placement that never started has nothing to
    checkpoint or stop: its JobRun workflow either starts it (a draining node's live executor does; the
    drain then stops it after its protection) or, when the executor never takes the start (a dead node
    agent), reports the attempt lost once (`ReportJobLost` after `lost_after_s`, with the nodes and
    executors as evidence), and the ledger requeues it with its original submit time."""
    return job.state == "RUNNING" and job.preemption_requested_at is None


def commands_of(result: CycleResult, state: LedgerState, grace_s: float = 120.0,
                asked: set[tuple[str, int]] | None = None) -> list[PlaceJob | RequestPreemption]:
    """Placements, preemptions and drain stops as commands. Session caps and grace ends are the
    Temporal workflows' timers (they hold those promises), so those stops are not re-issued here.

    A drain stop is asked once per attempt (`asked` remembers (job, attempt) across cycles): a refused
    request is not repeated every cycle, and the policy re-decides it every cycle while the job holds a
    draining or unhealthy node's GPUs."""
    taken: dict[str, set[int]] = {}
    out: list[PlaceJob | RequestPreemption] = []
    for p in result.placements:
        out.append(place_command(state, p.job_id, p.assignments, p.funded,
                                 p.evidence | {"protected_until": p.protected_until}, taken))
    for pre in result.preemptions:
        victim = state.jobs.get(pre.victim_id)
        if victim is None or not can_be_asked_to_stop(victim):
            continue
        out.append(RequestPreemption(
            job_id=pre.victim_id, reason=pre.reason, attempt=victim.attempt,
            grace_s=max(0.0, pre.grace_ends_at - result.now), requeue=True, for_job_id=pre.for_job_id,
            evidence=pre.evidence | {"lost_gpu_s": pre.lost_gpu_s},
        ))
    for stop in result.stops:
        job = state.jobs.get(stop.job_id)
        if job is None or stop.reason != "drain" or not can_be_asked_to_stop(job):
            continue
        if asked is not None:
            if (job.job_id, job.attempt) in asked:
                continue
            asked.add((job.job_id, job.attempt))
        out.append(RequestPreemption(
            job_id=stop.job_id, reason="drain", attempt=job.attempt,
            grace_s=grace_s if stop.checkpoint else 0.0, requeue=stop.requeue, for_job_id="",
            evidence=stop.evidence | {"stop": stop.reason},
        ))
    return out
