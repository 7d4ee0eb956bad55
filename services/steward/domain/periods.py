"""Closing a budget period (DESIGN.md "Owed vs delivered"): a closed period records its owed and delivered
sums as a `PeriodClosed` event so reports never recompute history. The arithmetic is
`steward.domain.budget`'s (the period-close workflow computes the figures with `budget.period_figures`).
"""

from __future__ import annotations

import math
from typing import Any

from steward.domain.budget import delivered_of_owed
from steward.domain.commands import ClosePeriod
from steward.domain.errors import InvalidCommand
from steward.domain.events import Event
from steward.domain.state import LedgerState


def require_valid_period(cmd: ClosePeriod) -> None:
    """A period is a non-empty interval; its figures are GPU-seconds, never negative."""
    if not (math.isfinite(cmd.start) and math.isfinite(cmd.end)) or cmd.end <= cmd.start:
        raise InvalidCommand(f"period end {cmd.end} must be after its start {cmd.start}")
    if cmd.capacity_gpu_s < 0:
        raise InvalidCommand("capacity_gpu_s must be 0 or more")
    for name, figures in cmd.allocations.items():
        for key in ("owed_gpu_s", "delivered_gpu_s"):
            if key not in figures:
                raise InvalidCommand(f"allocation '{name}' lacks '{key}'")
        bad = [k for k, v in figures.items() if not v >= 0]
        if bad:
            raise InvalidCommand(f"allocation '{name}' has negative {', '.join(sorted(bad))}")


def decide_close(state: LedgerState, cmd: ClosePeriod, now: float) -> list[Event]:
    require_valid_period(cmd)
    cluster = delivered_of_owed((f["owed_gpu_s"], f["delivered_gpu_s"]) for n, f in cmd.allocations.items()
                                if state.is_project(n))
    payload: dict[str, Any] = {
        "period_id": cmd.period_id, "start": cmd.start, "end": cmd.end, "capacity_gpu_s": cmd.capacity_gpu_s,
        "allocations": {n: dict(f) for n, f in sorted(cmd.allocations.items())},
        "delivered_of_owed": cluster,
        "evidence": dict(cmd.evidence), "closed_at": now,
    }
    return [Event(cmd.aggregate, "PeriodClosed", payload)]
