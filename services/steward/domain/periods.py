"""Budget periods (DESIGN.md "Owed vs delivered"): for each allocation and hour, owed = min(entitlement ×
capacity, that allocation's demand in the hour) and delivered = GPU-hours it actually ran. A closed period
records the sums as a `PeriodClosed` event so reports never recompute history.

`period_figures` computes them from the recorded events alone (pure: the caller reads the log).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from steward.domain.commands import ROOT, ClosePeriod
from steward.domain.errors import InvalidCommand
from steward.domain.events import Event
from steward.domain.state import LedgerState

HOUR_S = 3600.0
FIGURES = ("owed_gpu_s", "delivered_gpu_s", "demand_gpu_s", "entitled_gpu_s")
# events that end a job's demand (it no longer waits nor runs) and those that end a run
_DEMAND_ENDS = ("JobCompleted", "JobFailed", "JobCancelled", "SessionRestored")
_RUN_ENDS = ("JobCompleted", "JobFailed", "JobCancelled", "JobPreempted", "JobLost")


def period_id(start: float, end: float) -> str:
    """A readable, unique name: `20261130T000000Z-20261201T000000Z`."""
    fmt = "%Y%m%dT%H%M%SZ"
    return f"{datetime.fromtimestamp(start, UTC).strftime(fmt)}-{datetime.fromtimestamp(end, UTC).strftime(fmt)}"


def period_bounds(at: float, period_s: float) -> tuple[float, float]:
    """The last whole period that ended at or before `at` (periods are aligned to multiples of
    `period_s` from the epoch, so every closer agrees on them)."""
    end = math.floor(at / period_s) * period_s
    return end - period_s, end


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
    owed = sum(f["owed_gpu_s"] for n, f in cmd.allocations.items() if state.is_project(n))
    delivered = sum(min(f["delivered_gpu_s"], f["owed_gpu_s"]) for n, f in cmd.allocations.items()
                    if state.is_project(n))
    payload: dict[str, Any] = {
        "period_id": cmd.period_id, "start": cmd.start, "end": cmd.end, "capacity_gpu_s": cmd.capacity_gpu_s,
        "allocations": {n: dict(f) for n, f in sorted(cmd.allocations.items())},
        "delivered_of_owed": (delivered / owed) if owed > 0 else None,
        "evidence": dict(cmd.evidence), "closed_at": now,
    }
    return [Event(cmd.aggregate, "PeriodClosed", payload)]


# -- computing the figures from the log ---------------------------------------------------------------


@dataclass(slots=True)
class _JobLife:
    project: str
    gpus: int
    demand: list[tuple[float, float]] = field(default_factory=list)
    runs: list[tuple[float, float]] = field(default_factory=list)
    wanting_since: float | None = None
    running_since: float | None = None


def _overlap(intervals: Iterable[tuple[float, float]], lo: float, hi: float) -> float:
    return sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in intervals)


def entitlements(shares: Mapping[str, tuple[str, float]]) -> dict[str, float]:
    """DESIGN.md "Org tree and allocations": a node's entitlement is the product of the shares on its
    path (`shares`: node -> (parent, share); the root and unknown parents count as 1)."""
    memo: dict[str, float] = {}

    def ent(name: str, depth: int = 0) -> float:
        if name == ROOT or name not in shares or depth > 16:
            return 1.0
        if name not in memo:
            parent, share = shares[name]
            memo[name] = share * ent(parent, depth + 1)
        return memo[name]

    return {n: ent(n) for n in shares}


def entitled_gpu_s(lo: float, hi: float, changes: Sequence[tuple[float, str, float | int, str]], i: int,
                   shares: dict[str, tuple[str, float]], nodes: dict[str, int]) -> tuple[dict[str, float], float, int]:
    """DESIGN.md "Owed vs delivered" (entitlement × capacity) over [lo, hi): the GPU-seconds each tree node
    is entitled to, summed over the stretches between changes. `changes` are (at, kind, value, name) in
    time order, kind "share" (name "parent\\x00child") or a node's GPU count; those due from index `i`
    are applied to `shares` and `nodes` in place. Returns (entitled per node, capacity GPU-s, next index)."""
    entitled: dict[str, float] = {}
    capacity = 0.0
    seg = lo
    while seg < hi:
        while i < len(changes) and changes[i][0] <= seg:
            _at, kind, value, name = changes[i]
            if kind == "share":
                parent, child = name.split("\x00", 1)
                shares[child] = (parent, float(value))
            else:
                nodes[name] = int(value)
            i += 1
        seg_end = min(hi, changes[i][0]) if i < len(changes) else hi
        gpu_s = sum(nodes.values()) * (seg_end - seg)
        capacity += gpu_s
        for name, ent in entitlements(shares).items():
            entitled[name] = entitled.get(name, 0.0) + ent * gpu_s
        seg = seg_end
    return entitled, capacity, i


def add_owed(out: dict[str, dict[str, float]], entitled: Mapping[str, float], demand: dict[str, float],
             delivered: dict[str, float], shares: Mapping[str, tuple[str, float]]) -> None:
    """DESIGN.md "Owed vs delivered" for one stretch: owed = min(entitled, demand) per tree node, where an
    inner node's demand and delivery are the sums of its subtree's projects (`demand`/`delivered` name the
    projects and are extended in place); the stretch's figures are added to `out`'s rows (FIGURES)."""
    for project in list(demand):  # inner nodes: the sums of their subtree's projects
        node = project
        while node in shares:
            node = shares[node][0]
            if node in shares:
                demand[node] = demand.get(node, 0.0) + demand[project]
                delivered[node] = delivered.get(node, 0.0) + delivered[project]
    for name, ent_gpu_s in entitled.items():
        row = out.setdefault(name, dict.fromkeys(FIGURES, 0.0))
        d = demand.get(name, 0.0)
        row["owed_gpu_s"] += min(ent_gpu_s, d)
        row["delivered_gpu_s"] += delivered.get(name, 0.0)
        row["demand_gpu_s"] += d
        row["entitled_gpu_s"] += ent_gpu_s


def period_figures(
    history: Iterable[tuple[str, Mapping[str, Any], float]], start: float, end: float, hour_s: float = HOUR_S,
) -> tuple[dict[str, dict[str, float]], float]:
    """Owed, delivered, demand and entitled GPU-seconds per allocation over [start, end), hour by hour,
    from `history` ((event type, payload, recorded_at) in log order). Returns (figures, capacity GPU-s)."""
    changes: list[tuple[float, str, float | int, str]] = []  # (at, kind, value, name/parent)
    jobs: dict[str, _JobLife] = {}
    for kind, p, at in history:
        if at >= end:
            break
        if kind == "AllocationsSet":
            for child, share in p["shares"].items():
                changes.append((at, "share", float(share), f"{p['parent']}\x00{child}"))
        elif kind == "NodeRegistered":
            changes.append((at, "node", int(p["gpus"]), p["node_id"]))
        elif kind == "JobSubmitted":
            jobs[p["job_id"]] = _JobLife(p["project"], int(p["gpus"]), wanting_since=at)
        elif (life := jobs.get(p.get("job_id", ""))) is not None:
            if kind == "JobStarted":
                life.running_since = at
            if kind == "JobRequeued" and life.wanting_since is None:
                life.wanting_since = at
            if kind in _RUN_ENDS and life.running_since is not None:
                life.runs.append((life.running_since, at))
                life.running_since = None
            if (kind in _DEMAND_ENDS or (kind == "JobPreempted" and not p.get("requeue", True))) \
                    and life.wanting_since is not None:
                life.demand.append((life.wanting_since, at))
                life.wanting_since = None
    for life in jobs.values():
        if life.running_since is not None:
            life.runs.append((life.running_since, end))
        if life.wanting_since is not None:
            life.demand.append((life.wanting_since, end))

    shares: dict[str, tuple[str, float]] = {}
    nodes: dict[str, int] = {}
    by_project: dict[str, list[_JobLife]] = {}
    for life in jobs.values():
        by_project.setdefault(life.project, []).append(life)
    out: dict[str, dict[str, float]] = {}
    capacity_total = 0.0
    i = 0
    lo = start
    while lo < end:
        hi = min(lo + hour_s, end)
        # DESIGN.md "Allocation changes ... take effect from their event time": within the hour, entitled
        # GPU-seconds are summed over the stretches between changes
        entitled, capacity, i = entitled_gpu_s(lo, hi, changes, i, shares, nodes)
        capacity_total += capacity
        demand: dict[str, float] = {}
        delivered: dict[str, float] = {}
        for project, lives in by_project.items():
            demand[project] = sum(lf.gpus * _overlap(lf.demand, lo, hi) for lf in lives)
            delivered[project] = sum(lf.gpus * _overlap(lf.runs, lo, hi) for lf in lives)
        add_owed(out, entitled, demand, delivered, shares)
        lo = hi
    return out, capacity_total
