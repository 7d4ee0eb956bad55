"""The ledger's state, folded from events by `evolve` (pure, no IO)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from steward.domain.commands import ROOT
from steward.domain.events import Event

JOB_STATES = ("QUEUED", "PLACED", "RUNNING", "COMPLETED", "FAILED", "PREEMPTED", "CANCELLED")
TERMINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED"})


@dataclass(frozen=True, slots=True)
class AllocationNode:
    name: str
    parent: str
    share: float


@dataclass(frozen=True, slots=True)
class ClusterNode:
    node_id: str
    gpus: int
    gpu_model: str
    path: tuple[str, ...]
    executor: str
    state: str = "ready"


@dataclass(frozen=True, slots=True)
class Job:
    job_id: str
    project: str
    gpus: int
    min_runtime_s: float
    command: tuple[str, ...]
    resumable: bool
    job_class: str
    priority: int
    submitted_at: float
    state: str = "QUEUED"
    attempt: int = 0
    assignments: tuple[tuple[str, tuple[int, ...]], ...] = ()
    funded: bool = False
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None


@dataclass(frozen=True, slots=True)
class LedgerState:
    allocations: dict[str, AllocationNode] = field(default_factory=dict)
    nodes: dict[str, ClusterNode] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)
    # node id -> GPU indices held by non-terminal placed/running jobs
    used: dict[str, frozenset[int]] = field(default_factory=dict)

    def children(self, parent: str) -> dict[str, AllocationNode]:
        return {n: a for n, a in self.allocations.items() if a.parent == parent}

    def is_project(self, name: str) -> bool:
        """A project is a leaf of the allocation tree."""
        return name in self.allocations and not self.children(name)

    def depth(self, name: str) -> int:
        depth = 0
        while name != ROOT and name in self.allocations:
            name = self.allocations[name].parent
            depth += 1
        return depth

    def free_gpus(self, node_id: str) -> frozenset[int]:
        node = self.nodes[node_id]
        return frozenset(range(node.gpus)) - self.used.get(node_id, frozenset())


def _release(state: LedgerState, job: Job) -> dict[str, frozenset[int]]:
    used = dict(state.used)
    for node_id, gpus in job.assignments:
        used[node_id] = used.get(node_id, frozenset()) - frozenset(gpus)
    return used


def evolve(state: LedgerState, event: Event, at: float) -> LedgerState:
    """Apply one recorded event to the state. Unknown event types leave the state unchanged."""
    p: dict[str, Any] = event.payload
    if event.type == "AllocationsSet":
        allocations = dict(state.allocations)
        for child, share in p["shares"].items():
            allocations[child] = AllocationNode(child, p["parent"], float(share))
        return replace(state, allocations=allocations)
    if event.type == "NodeRegistered":
        node = ClusterNode(p["node_id"], p["gpus"], p["gpu_model"], tuple(p["path"]), p["executor"])
        return replace(state, nodes={**state.nodes, node.node_id: node})
    if event.type == "JobSubmitted":
        job = Job(
            job_id=p["job_id"], project=p["project"], gpus=p["gpus"], min_runtime_s=p["min_runtime_s"],
            command=tuple(p["command"]), resumable=p["resumable"], job_class=p["job_class"],
            priority=p["priority"], submitted_at=p["submitted_at"],
        )
        return replace(state, jobs={**state.jobs, job.job_id: job})
    job_id = p.get("job_id")
    if job_id is None or job_id not in state.jobs:
        return state
    job = state.jobs[job_id]
    used = state.used
    if event.type == "JobPlaced":
        assignments = tuple((n, tuple(g)) for n, g in sorted(p["assignments"].items()))
        job = replace(job, state="PLACED", attempt=p["attempt"], assignments=assignments, funded=p["funded"])
        used = dict(used)
        for node_id, gpus in assignments:
            used[node_id] = used.get(node_id, frozenset()) | frozenset(gpus)
    elif event.type == "JobStarted":
        job = replace(job, state="RUNNING", started_at=at)
    elif event.type in ("JobCompleted", "JobFailed", "JobCancelled"):
        used = _release(state, job)
        new_state = {"JobCompleted": "COMPLETED", "JobFailed": "FAILED", "JobCancelled": "CANCELLED"}
        job = replace(job, state=new_state[event.type], ended_at=at, exit_code=p.get("exit_code"))
    return replace(state, jobs={**state.jobs, job_id: job}, used=used)
