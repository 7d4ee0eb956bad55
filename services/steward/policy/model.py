"""The policy's vocabulary: cluster nodes, jobs, the snapshot a cycle reads, and the decisions it
returns. Immutable values only; time is float seconds and ids are strings, both given by callers.

Inputs:  `Node`, `AllocationTree` (from tree.py), `PendingJob`, `RunningJob`, `Snapshot`.
Outputs: `Placement`, `Preemption`, `Stop`, `Reservation`, `Explanation`, `CycleResult`.

Applying a `CycleResult` (ledger, simulator): a `Placement` starts the job (`contract.start`); a
`Preemption` sets the victim's `preemption_requested_at = now` (checkpoint request) and the cycle
that runs after `grace_ends_at` returns a `Stop(reason="grace_ended")`; a `Stop` with `requeue`
turns the job back into a `PendingJob` with its original submit time (`contract.requeue`); a
`Stop` without it (a session at its cap) ends the job until the researcher restores it. GPUs of a
job being stopped are not reused inside the same cycle.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from steward.domain.nodes import takes_new_work
from steward.domain.policy_settings import PolicySettings
from steward.policy.errors import InvalidJob, InvalidNode
from steward.policy.reasons import explanation_text
from steward.policy.tree import Allocation, AllocationTree

__all__ = [
    "Allocation",
    "AllocationTree",
    "CycleResult",
    "Evidence",
    "Explanation",
    "JobClass",
    "Node",
    "NodeState",
    "PendingJob",
    "Placement",
    "Preemption",
    "Reservation",
    "RunningJob",
    "Snapshot",
    "Stop",
]

NodeState = Literal["ready", "draining", "unhealthy"]
JobClass = Literal["batch", "debug", "interactive"]
Evidence = dict[str, Any]
"""JSON-serialisable inputs that justified a decision (ranks, shares, usage, protection, candidates)."""

NODE_STATES: frozenset[str] = frozenset(("ready", "draining", "unhealthy"))
JOB_CLASSES: frozenset[str] = frozenset(("batch", "debug", "interactive"))


# --- inputs ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Node:
    """A host: its GPU count and model, and its topology path (enclosing domains, outermost first,
    the node itself not included; e.g. `("zone-a", "spine-2", "block-7")`), and the named cluster it
    belongs to (DESIGN.md "Clusters and GPU models": gangs never span clusters)."""

    id: str
    gpus: int
    model: str = "default"
    path: tuple[str, ...] = ()
    state: NodeState = "ready"
    cluster: str = "default"

    def __post_init__(self) -> None:
        if self.gpus < 0:
            raise InvalidNode(self.id, f"negative GPU count {self.gpus}")
        if self.state not in NODE_STATES:
            raise InvalidNode(self.id, f"unknown state {self.state!r}")

    @property
    def schedulable(self) -> bool:
        """DESIGN.md / issue 3 "Draining": a draining or unhealthy node takes no new work."""
        return takes_new_work(self.state)


@dataclass(frozen=True, slots=True)
class PendingJob:
    """A waiting job. `topology_depth`, when set, is a hard constraint: the gang must fit inside one
    domain `node.path[:topology_depth]`. `previous_node` marks a session restore. `room_freed_at` is
    the last time a job preempted for this one (`RunningJob.claimed_for`) stopped and freed its GPUs
    (ADR 0021: the lane holds them for it a short while)."""

    id: str
    project: str
    gpus: int
    submitted_at: float
    min_runtime_s: float = 0.0
    resumable: bool = True
    klass: JobClass = "batch"
    priority: int = 0
    topology_depth: int | None = None
    previous_node: str | None = None
    room_freed_at: float | None = None
    # DESIGN.md "Clusters and GPU models": the GPU models and clusters it accepts (empty: any)
    gpu_models: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    # ADR 0067: the cluster its allocation is pinned to ("" when none); `clusters` is then the pin alone
    # (`domain.clusters.pinned_clusters`), so routing only ever tries that cluster
    pin: str = ""

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise InvalidJob(self.id, f"needs at least one GPU, asked for {self.gpus}")
        if self.min_runtime_s < 0:
            raise InvalidJob(self.id, f"negative min_runtime {self.min_runtime_s}")
        if self.klass not in JOB_CLASSES:
            raise InvalidJob(self.id, f"unknown class {self.klass!r}")
        if self.topology_depth is not None and self.topology_depth < 0:
            raise InvalidJob(self.id, f"negative topology depth {self.topology_depth}")


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job holding GPUs. `placement` is ((node_id, gpu_count), ...). `protected_until` is the end
    of its protection from this start (equal to `started_at` when unfunded). `preemption_requested_at`
    is set once a preemption (checkpoint request) was issued; the job stops after the grace period.
    `claimed_for` is then the waiting job the preemption makes room for (its beneficiary, ADR 0021)."""

    id: str
    project: str
    gpus: int
    placement: tuple[tuple[str, int], ...]
    started_at: float
    protected_until: float
    funded: bool
    last_checkpoint_at: float | None = None
    resumable: bool = True
    klass: JobClass = "batch"
    submitted_at: float = 0.0
    preemption_requested_at: float | None = None
    min_runtime_s: float = 0.0
    priority: int = 0
    topology_depth: int | None = None
    claimed_for: str | None = None
    gpu_models: tuple[str, ...] = ()  # what it accepts, kept for its requeue (PendingJob)
    clusters: tuple[str, ...] = ()
    pin: str = ""  # its allocation's pin, kept for its requeue (PendingJob, ADR 0067)

    def __post_init__(self) -> None:
        if sum(c for _, c in self.placement) != self.gpus:
            raise InvalidJob(self.id, f"placement {self.placement} does not hold its {self.gpus} GPUs")

    def gpus_on(self, node: str) -> int:
        return sum(c for n, c in self.placement if n == node)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one scheduling cycle reads. `usage` maps allocation (project) ids to delivered,
    weighted GPU-seconds in the window up to `now` (running jobs included; see usage.py).
    `topology_levels` optionally names the path levels (e.g. `("zone", "spine", "block")`) for
    explanations. `demand` optionally gives, per project, the GPUs of its funded-asking work waiting or
    running, counted over the whole queue by a caller that hands the cycle only part of it (the
    simulator's trimmed queue); None: the cycle counts `pending` and `running` (ADR 0016)."""

    now: float
    nodes: tuple[Node, ...]
    tree: AllocationTree
    usage: Mapping[str, float]
    running: tuple[RunningJob, ...]
    pending: tuple[PendingJob, ...]
    settings: PolicySettings = field(default_factory=PolicySettings)
    topology_levels: tuple[str, ...] = ()
    demand: Mapping[str, float] | None = None
    cluster_usage: Mapping[str, Mapping[str, float]] | None = None
    """ADR 0076: per cluster, the usage of each project on it (weighted GPU-seconds in the window up to `now`,
    running jobs included, as `usage`; a project's usage is the sum over the clusters). None: not known (the
    standing is then the tree's alone)."""

    def __hash__(self) -> int:  # Mapping field: identity hash, snapshots are not set members
        return id(self)


# --- outputs -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Placement:
    """Start `job_id` on `assignments` ((node_id, gpus), ...). Funded jobs are charged and protected
    until `protected_until`; unfunded ones have `protected_until == now`."""

    job_id: str
    project: str
    assignments: tuple[tuple[str, int], ...]
    funded: bool
    protected_until: float
    evidence: Evidence


PreemptionReason = Literal["unfunded", "fair_share"]


@dataclass(frozen=True, slots=True)
class Preemption:
    """Request a checkpoint of `victim_id`, stop it at `grace_ends_at`, requeue it with its original
    submit time; done to make room for `for_job_id`."""

    victim_id: str
    for_job_id: str
    reason: PreemptionReason
    grace_ends_at: float
    lost_gpu_s: float
    evidence: Evidence


StopReason = Literal["drain", "session_cap", "grace_ended"]


@dataclass(frozen=True, slots=True)
class Stop:
    """Stop a running job now (with a checkpoint when `checkpoint`), and requeue it unless it is a
    session that reached its cap."""

    job_id: str
    reason: StopReason
    checkpoint: bool
    requeue: bool
    evidence: Evidence


@dataclass(frozen=True, slots=True)
class Reservation:
    """Nodes held for the head large gang: only work whose protection ends by `ready_at` (or
    unfunded work) may start on them meanwhile."""

    job_id: str
    domain: tuple[str, ...]
    nodes: tuple[str, ...]
    ready_at: float
    evidence: Evidence
    cluster: str | None = None
    """The one cluster its nodes are in when the gang is routed (ADR 0071); None otherwise."""


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a job still waits: a stable reason code, the amount blocking it (`blocking_gpus` more GPUs
    in one `blocking_scope`, or until `blocking_until`), its position overall and in its project
    (1-based), and the evidence."""

    job_id: str
    reason: str
    blocking_gpus: int
    blocking_scope: str
    blocking_until: float | None
    position: int
    position_in_project: int
    evidence: Evidence

    @property
    def text(self) -> str:
        """Plain words for a researcher."""
        return explanation_text(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "reason": self.reason,
            "text": self.text,
            "blocking_gpus": self.blocking_gpus,
            "blocking_scope": self.blocking_scope,
            "blocking_until": self.blocking_until,
            "position": self.position,
            "position_in_project": self.position_in_project,
            "evidence": self.evidence,
        }


@dataclass(frozen=True, slots=True)
class CycleResult:
    """Decisions of one cycle. `explanations` has an entry for every job still waiting after it
    (built lazily in bulk: a read-only mapping job_id -> Explanation). `order` is the global order of
    the pending jobs (ids). `fragmentation` is free GPUs the largest waiting gang cannot use ÷
    capacity."""

    now: float
    placements: tuple[Placement, ...]
    preemptions: tuple[Preemption, ...]
    stops: tuple[Stop, ...]
    explanations: Mapping[str, Explanation]
    reservation: Reservation | None
    fragmentation: float
    order: tuple[str, ...]
    evidence: Evidence

    def __hash__(self) -> int:
        return id(self)

    def iter_explanations(self) -> Iterator[Explanation]:
        return iter(self.explanations.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (for events, the simulator's logs and tests of determinism)."""
        return {
            "now": self.now,
            "placements": [
                {
                    "job_id": p.job_id,
                    "project": p.project,
                    "assignments": [list(a) for a in p.assignments],
                    "funded": p.funded,
                    "protected_until": p.protected_until,
                    "evidence": p.evidence,
                }
                for p in self.placements
            ],
            "preemptions": [
                {
                    "victim_id": p.victim_id,
                    "for_job_id": p.for_job_id,
                    "reason": p.reason,
                    "grace_ends_at": p.grace_ends_at,
                    "lost_gpu_s": p.lost_gpu_s,
                    "evidence": p.evidence,
                }
                for p in self.preemptions
            ],
            "stops": [
                {
                    "job_id": s.job_id,
                    "reason": s.reason,
                    "checkpoint": s.checkpoint,
                    "requeue": s.requeue,
                    "evidence": s.evidence,
                }
                for s in self.stops
            ],
            "explanations": [e.to_dict() for e in self.explanations.values()],
            "reservation": None
            if self.reservation is None
            else {
                "job_id": self.reservation.job_id,
                "domain": list(self.reservation.domain),
                "nodes": list(self.reservation.nodes),
                "ready_at": self.reservation.ready_at,
                "evidence": self.reservation.evidence,
            },
            "fragmentation": self.fragmentation,
            "order": list(self.order),
            "evidence": self.evidence,
        }


EMPTY_USAGE: Mapping[str, float] = MappingProxyType({})
