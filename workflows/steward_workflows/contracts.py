"""The frozen dataclasses that go in and out of every workflow and activity (one in, one out)."""

from __future__ import annotations

from dataclasses import dataclass, field

WORKFLOW_TASK_QUEUE = "steward-workflows"


def executor_task_queue(executor: str) -> str:
    return f"executor-{executor}"


@dataclass(frozen=True)
class JobRunInput:
    job_id: str
    attempt: int
    executor: str
    command: list[str]
    assignments: dict[str, list[int]]
    correlation_id: str = ""
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ProcessOutcome:
    job_id: str
    attempt: int
    exit_code: int


@dataclass(frozen=True)
class JobRunResult:
    job_id: str
    attempt: int
    outcome: str  # "exited" | "lost"
    exit_code: int | None


@dataclass(frozen=True)
class LostReport:
    job_id: str
    attempt: int
    reason: str
    correlation_id: str = ""
