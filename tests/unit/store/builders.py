"""Builders for store and audit tests: a small cluster's history as Kafka-like messages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from steward.bus.envelope import command_envelope
from steward.domain.commands import (
    CancelJob,
    PlaceJob,
    RegisterNode,
    ReportJobExited,
    ReportJobStarted,
    SetAllocations,
    SubmitJob,
)

Message = tuple[str, bytes]


def msg(command: Any, mid: str | None = None, source: str = "steward.commands/0@0") -> Message:
    env = command_envelope(command, actor="alice", role="manager", message_id=mid)
    return (source, env.encode())


def setup_commands(nodes: int = 2, gpus: int = 8) -> list[Any]:
    return [
        SetAllocations("cluster", {"research": 0.6, "prod": 0.4}, "initial tree"),
        SetAllocations("research", {"r1": 0.5, "r2": 0.5}, "initial tree"),
        SetAllocations("prod", {"p1": 1.0}, "initial tree"),
        *[RegisterNode(f"n{i}", gpus, "A100", ["z1", f"b{i % 2}", f"n{i}"]) for i in range(nodes)],
    ]


def job_lifecycle(i: int, nodes: int = 2, gpus_per_node: int = 8) -> list[Any]:
    """Submit, place, start and finish job i (every 7th fails, every 11th is cancelled while queued,
    every 13th is rejected for an unknown project)."""
    job = f"j{i}"
    project = ("r1", "r2", "p1")[i % 3]
    if i % 13 == 0:
        return [SubmitJob(job, "ghost", 1, 60.0, ["true"])]
    out: list[Any] = [SubmitJob(job, project, 1, 600.0, ["python", "train.py", f"--seed={i}"], i % 2 == 0,
                                "batch", i % 5)]
    if i % 11 == 0:
        return [*out, CancelJob(job, "not needed")]
    node = f"n{i % nodes}"
    gpu = (i // nodes) % gpus_per_node
    out += [PlaceJob(job, {node: [gpu]}, i % 3 != 0, {"rank": i}), ReportJobStarted(job, 1, 1000 + i),
            ReportJobExited(job, 1, 1 if i % 7 == 0 else 0)]
    return out


def history_messages(jobs: int = 30) -> Iterator[Message]:
    """Setup, then each job's lifecycle to the end before the next one starts (so GPUs are free)."""
    for c in setup_commands():
        yield msg(c)
    for i in range(1, jobs + 1):
        for c in job_lifecycle(i):
            yield msg(c)
