"""When a start that waits is lost (ADR 0069): only when its executor is silent, never because it is busy.

A placement's start waits in its executor's queue (a Temporal task queue) until the executor takes it. Before
ADR 0069 a start not taken within the contract's `lost_after_s` was declared lost, so a burst of placements
queued behind a live executor's backlog was declared lost, re-placed and queued again (382 of 2,382 placements
in `steward bench k8s`, docs/benchmarks.md). A backlog is not a dead executor: the executor's own heartbeats
(`ExecutorHeartbeat`, recorded by the ledger on every change and at least every `HEARTBEAT_REPORT_S`) say
whether it is alive. The JobRun looks at them whenever its start has waited a window, and declares the attempt
lost only when the executor has said nothing for `lost_after_s`; otherwise it waits on (its GPUs stay held,
the placement stands) and looks again when the last heartbeat it saw would be stale.

Pure: the time of the last heartbeat and `now` come in as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

# An executor reports a heartbeat at least this often (and on every change), a third of the default
# `lost_after_s` (60 s): a live executor is never silent for a whole loss window between two reports.
HEARTBEAT_REPORT_S = 20.0
# The least time between two looks at a waiting start's executor (a heartbeat a moment from stale is not
# looked at again in a busy loop).
MIN_RECHECK_S = 1.0


@dataclass(frozen=True, slots=True)
class StartWait:
    """What a JobRun does with a task that has waited in its executor's queue: `lost` (the executor is silent)
    or wait on, looking again after `recheck_s`. `reason` says why, for the loss report or the run's status."""

    lost: bool
    reason: str
    recheck_s: float


def start_wait(executor: str, heard_at: float | None, waited_s: float, now: float, lost_after_s: float,
               queued: int = 0) -> StartWait:
    """The verdict on a start of `executor` that has waited `waited_s`, seen at `now`.

    `heard_at`: when the ledger recorded the executor's last heartbeat (None: never, or unknown because the
    log could not be read). `queued`: the placements at that executor not yet started besides this one.
    Silent (lost): no heartbeat at all, or the last one `lost_after_s` old or more. Otherwise the start is
    queued behind a live executor: look again once that heartbeat is `lost_after_s` old, so a dead executor is
    declared lost within `lost_after_s` of its last heartbeat (and of the placement, when it was already dead)."""
    if lost_after_s <= 0:
        raise ValueError(f"lost_after_s must be positive, not {lost_after_s}")
    if heard_at is None:
        return StartWait(True, f"executor '{executor}' has sent no heartbeat (waited {waited_s:.0f} s)", 0.0)
    age = max(now - heard_at, 0.0)  # a heartbeat recorded "after" now: clocks a moment apart, it is fresh
    if age >= lost_after_s:
        return StartWait(True, f"executor '{executor}' silent for {age:.0f} s (no heartbeat within lost_after_s="
                               f"{lost_after_s:g} s; waited {waited_s:.0f} s)", 0.0)
    behind = f"behind {queued} other placement(s) not yet started " if queued > 0 else ""
    return StartWait(False, f"queued {behind}at executor '{executor}' (alive: heartbeat {age:.0f} s ago; "
                            f"waited {waited_s:.0f} s)", max(lost_after_s - age, MIN_RECHECK_S))
