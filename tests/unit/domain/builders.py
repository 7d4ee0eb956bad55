"""Builders for ledger states and commands: tests say only what matters to the case."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from steward.domain.commands import PlaceJob, RegisterNode, SetAllocations, SubmitJob
from steward.domain.decide import decide
from steward.domain.state import LedgerState, evolve


def apply(state: LedgerState, *commands: Any, now: float = 0.0) -> LedgerState:
    for cmd in commands:
        for ev in decide(state, cmd, now):
            state = evolve(state, ev, now)
    return state


def tree(**levels: dict[str, float]) -> LedgerState:
    """tree(cluster={"a": .5}, a={"a1": 1.0}) -> a state with those allocations."""
    state = LedgerState()
    for parent, shares in levels.items():
        state = apply(state, SetAllocations(parent, shares, "test"))
    return state


def with_nodes(state: LedgerState, count: int = 1, gpus: int = 8) -> LedgerState:
    return apply(state, *[RegisterNode(f"n{i}", gpus, "V100", ["b0", f"n{i}"]) for i in range(count)])


def submit(job_id: str = "j1", project: str = "a1", **over: Any) -> SubmitJob:
    base = SubmitJob(job_id=job_id, project=project, gpus=1, min_runtime_s=600, command=["true"])
    return replace(base, **over)


def place(job_id: str = "j1", **assignments: list[int]) -> PlaceJob:
    return PlaceJob(job_id, dict(assignments) or {"n0": [0]}, funded=True)


def small_cluster() -> LedgerState:
    return with_nodes(tree(cluster={"a": 0.6, "b": 0.4}, a={"a1": 1.0}, b={"b1": 0.5}))


def running(state: LedgerState | None = None, job_id: str = "j1", at: float = 100.0, **over: Any) -> LedgerState:
    """A job placed on n0 and started at `at` (funded unless `funded=False`)."""
    from steward.domain.commands import ReportJobStarted

    funded = over.pop("funded", True)
    gpus = over.get("gpus", 1)
    state = apply(state or small_cluster(), submit(job_id, **over), now=0.0)
    state = apply(state, PlaceJob(job_id, {"n0": list(range(gpus))}, funded=funded), now=at)
    return apply(state, ReportJobStarted(job_id, state.jobs[job_id].attempt, 4242, started_at=at), now=at)


def events_of(state: LedgerState, command: Any, now: float) -> list[str]:
    return [e.type for e in decide(state, command, now)]
