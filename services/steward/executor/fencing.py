"""One attempt per GPU, whatever happened before (issue 22; ADR 0058): the rules an executor follows before it
starts an attempt, pure (no IO, no clock) so that every executor and the tests read the same ones.

- **Its own nodes only.** An executor serves the nodes its operator names (STEWARD_EXECUTOR_NODES: names or
  shell patterns, comma-separated; empty: every node placed with it) and refuses a placement on any other,
  or one made for another executor, with the reason.
- **The newest placement holds a GPU.** The ledger gives a GPU to one attempt at a time: when it places an
  attempt on a GPU, whatever ran there before lost its claim (its job was cancelled, preempted, ended, or
  declared lost). So an attempt still alive on one of the new attempt's GPUs is stopped before the new one
  starts, and so is an older attempt of the same job anywhere on this executor (a lost job's new attempt
  never runs beside its old one).
- **Attempt numbers decide.** Within one job, a higher attempt supersedes a lower one: a start of an attempt
  older than one already running here is refused (a late retry of a stale start), and when an executor
  comes back with two attempts of a job alive, the older is stopped first.
- **Only live processes hold GPUs.** The books are the attempts whose process still runs (an exited,
  killed or fenced attempt frees its GPUs at once), never the attempts the executor once started.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Protocol


class Attempt(Protocol):
    """What the rules read of an attempt (`steward.executor.attempts.AttemptRecord` is one)."""

    @property
    def job_id(self) -> str: ...

    @property
    def attempt(self) -> int: ...

    @property
    def assignments(self) -> dict[str, list[int]]: ...


def served_nodes(setting: str) -> tuple[str, ...]:
    """The node names or patterns of STEWARD_EXECUTOR_NODES (`gpu-01,gpu-0[2-4],rack7-*`); () serves all."""
    return tuple(p.strip() for p in setting.split(",") if p.strip())


def foreign_nodes(assignments: Mapping[str, Sequence[int]], served: Sequence[str]) -> list[str]:
    """The nodes of a placement that an executor serving `served` does not serve (none when it serves all)."""
    if not served:
        return []
    return sorted(n for n in assignments if not any(fnmatchcase(n, p) for p in served))


def refusal(executor_id: str, job_id: str, attempt: int, placed_for: str, assignments: Mapping[str, Sequence[int]],
            served: Sequence[str]) -> str | None:
    """Why executor `executor_id` must not start this placement, or None when it may."""
    what = f"job {job_id} attempt {attempt}"
    if placed_for and placed_for != executor_id:
        return (f"{what} was placed for executor '{placed_for}' on node(s) {', '.join(sorted(assignments))}, "
                f"not for executor '{executor_id}': not started")
    foreign = foreign_nodes(assignments, served)
    if foreign:
        return (f"{what} is placed on node(s) {', '.join(foreign)}, which executor '{executor_id}' does not serve "
                f"(it serves {', '.join(served)}): not started; register the node with the executor that runs it")
    return None


def gpus_of(assignments: Mapping[str, Sequence[int]]) -> set[tuple[str, int]]:
    return {(node, gpu) for node, gpus in assignments.items() for gpu in gpus}


@dataclass(frozen=True)
class Fence:
    """What a start must do first: `stop` these live attempts; or not start at all, because `newer` (a
    higher attempt of the same job) runs here."""

    stop: tuple[Attempt, ...] = ()
    newer: Attempt | None = None


def fence(job_id: str, attempt: int, assignments: Mapping[str, Sequence[int]], live: Iterable[Attempt]) -> Fence:
    """The rule for starting `job_id` attempt `attempt` on `assignments` beside the `live` attempts."""
    wanted = gpus_of(assignments)
    stop: list[Attempt] = []
    newer: Attempt | None = None
    for rec in live:
        if rec.job_id == job_id:
            if rec.attempt > attempt:
                newer = rec if newer is None or rec.attempt > newer.attempt else newer
            elif rec.attempt < attempt:
                stop.append(rec)
        elif wanted & gpus_of(rec.assignments):
            stop.append(rec)
    if newer is not None:
        return Fence((), newer)
    return Fence(tuple(sorted(stop, key=lambda r: (r.job_id, r.attempt))))


def superseded(live: Iterable[Attempt]) -> list[Attempt]:
    """Live attempts that a higher attempt of the same job, also live here, supersedes (oldest first)."""
    recs = list(live)
    highest: dict[str, int] = {}
    for rec in recs:
        highest[rec.job_id] = max(highest.get(rec.job_id, rec.attempt), rec.attempt)
    return sorted((r for r in recs if r.attempt < highest[r.job_id]), key=lambda r: (r.job_id, r.attempt))
