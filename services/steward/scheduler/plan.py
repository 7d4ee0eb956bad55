"""The walking skeleton's placement: first fit by (priority, submit time), whole gangs only.

Pure. The full policy cycle (steward.policy.cycle) replaces it once wired; the view types stay.
"""

from __future__ import annotations

from dataclasses import dataclass

from steward.domain.commands import PlaceJob


@dataclass(frozen=True, slots=True)
class NodeView:
    node_id: str
    gpus: int
    gpu_model: str
    path: tuple[str, ...]
    state: str


@dataclass(frozen=True, slots=True)
class JobView:
    job_id: str
    project: str
    state: str
    gpus: int
    priority: int
    submitted_at: float
    assignments: dict[str, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class ClusterView:
    nodes: tuple[NodeView, ...]
    jobs: tuple[JobView, ...]


def free_gpu_indices(view: ClusterView) -> dict[str, list[int]]:
    used: dict[str, set[int]] = {}
    for job in view.jobs:
        if job.state in ("PLACED", "RUNNING"):
            for node_id, gpus in job.assignments.items():
                used.setdefault(node_id, set()).update(gpus)
    return {
        n.node_id: [g for g in range(n.gpus) if g not in used.get(n.node_id, set())]
        for n in view.nodes
        if n.state == "ready"
    }


def plan_placements(view: ClusterView, skip: frozenset[str] = frozenset()) -> list[PlaceJob]:
    free = free_gpu_indices(view)
    waiting = sorted(
        (j for j in view.jobs if j.state in ("QUEUED", "PREEMPTED") and j.job_id not in skip),
        key=lambda j: (-j.priority, j.submitted_at, j.job_id),
    )
    out: list[PlaceJob] = []
    for job in waiting:
        chosen: dict[str, list[int]] = {}
        need = job.gpus
        for node_id in sorted(free):
            if need == 0:
                break
            take = free[node_id][:need] if job.gpus <= len(free[node_id]) or need >= len(free[node_id]) else []
            if job.gpus <= max((len(g) for g in free.values()), default=0) and len(take) < job.gpus:
                continue  # a job that fits on one node goes on one node
            if take:
                chosen[node_id] = take
                need -= len(take)
        if need:
            continue
        for node_id, gpus in chosen.items():
            free[node_id] = [g for g in free[node_id] if g not in gpus]
        out.append(PlaceJob(job.job_id, chosen, funded=True,
                            evidence={"policy": "first-fit", "order": "priority, submit time"}))
    return out
