"""The budget arithmetic: the one home of DESIGN.md "Org tree and allocations" (entitlement down the tree),
"Usage window" and "Owed vs delivered" (owed per hour, delivered, the ratio, the window and the period).

Every reader calls these functions: the ledger's period close (`steward.domain.periods`), the period-close
workflow, the API's read model (`steward.api.figures`: the allocation tree, the overview, the budget report),
the what-if, the simulator's metrics, the CLI and the demo summary (both read the API). Pure: no IO, no clock;
times are arguments (epoch seconds), amounts are GPU-seconds.

The figures of one allocation over an interval [start, end), summed hour by hour (hours counted from
`start`):
- entitled  = entitlement × registered capacity, integrated over the interval (share and node changes take
  effect from their event time);
- demand    = GPU-seconds its jobs wanted (from submission to their end, waiting or running);
- owed      = Σ over hours of min(entitled in the hour, demand in the hour)  (`owed_gpu_s`);
- delivered = GPU-seconds its jobs ran (every run, funded or not);
- ratio     = delivered ÷ owed, as it is (above 1 is over-delivery, `over_delivered`; never capped);
- an inner node's demand and delivery are the sums of its subtree's projects.
The cluster-wide figure (`delivered_of_owed`) credits each project at most what it was owed, so one
project's over-delivery never hides another's shortfall.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from steward.domain.commands import ROOT

HOUR_S = 3600.0
DAY_S = 86400.0
DEFAULT_WINDOW_S = 7 * DAY_S
FIGURES = ("owed_gpu_s", "delivered_gpu_s", "demand_gpu_s", "entitled_gpu_s")
# events that end a job's demand (it no longer waits nor runs) and those that end a run
DEMAND_ENDS = ("JobCompleted", "JobFailed", "JobCancelled", "SessionRestored")
RUN_ENDS = ("JobCompleted", "JobFailed", "JobCancelled", "JobPreempted", "JobLost")


# -- the rules ---------------------------------------------------------------------------------------------


def _time(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def run_start(payload: Mapping[str, Any], at: float) -> float:
    """DESIGN.md "Owed vs delivered": a run is delivered from when its process started by the executor's clock
    (`JobStarted.started_at`; Slurm's StartTime under Slurm, issue 23), never later than the start was
    recorded (`at`); without a time of its own, from `at`."""
    started = _time(payload.get("started_at"))
    return started if started is not None and started <= at else at


def run_end(kind: str, payload: Mapping[str, Any], at: float, start: float) -> float:
    """...to when it ended by the executor's clock (`ended_at` of `JobCompleted`/`JobFailed`, or of a
    preemption's `evidence`: Slurm's EndTime under Slurm), within [start, at]; else to when its end was recorded.
    So Steward's delivered GPU-seconds are the executor's (Slurm's accounting of the same jobs agrees), not
    the executor's report delay later."""
    if kind == "JobPreempted":
        evidence = payload.get("evidence")
        ended = _time(evidence.get("ended_at")) if isinstance(evidence, Mapping) else None
    else:
        ended = _time(payload.get("ended_at"))
    return ended if ended is not None and start <= ended <= at else max(at, start)


def owed_gpu_s(entitled_gpu_s: float, demand_gpu_s: float) -> float:
    """DESIGN.md "Owed vs delivered": for each allocation and hour, owed = min(entitlement × capacity, that
    allocation's demand in the hour). Both arguments are GPU-seconds of the same hour."""
    return min(entitled_gpu_s, demand_gpu_s)


def owed_over_hours(entitled: Sequence[float] | float, demand: Sequence[float]) -> float:
    """Owed summed over hours: `demand` per hour, `entitled` per hour (or one figure for every hour)."""
    if isinstance(entitled, (int, float)):
        return sum(owed_gpu_s(entitled, d) for d in demand)
    return sum(owed_gpu_s(e, d) for e, d in zip(entitled, demand, strict=False))


def ratio(delivered_gpu_s: float, owed_gpu_s_: float) -> float | None:
    """delivered ÷ owed, as it is (None when nothing was owed). Above 1 is over-delivery: an allocation ran
    more than it was owed (on idle capacity, or ahead of its share); it is shown, never capped."""
    return delivered_gpu_s / owed_gpu_s_ if owed_gpu_s_ > 0 else None


def over_delivered(r: float | None) -> bool:
    """Whether a ratio is over-delivery (more delivered than owed)."""
    return r is not None and r > 1.0


def burn(running_gpus: float, entitled_gpus: float) -> float | None:
    """An allocation's burn: the GPUs its subtree runs on now ÷ the GPUs it is entitled to now (its
    entitlement × the ready capacity); 1.0 is exactly its share, None when it is entitled to nothing. The
    API's figure (`Allocation.burn`) and the notifications' forecast (`burn_forecast`) both take it from here."""
    return running_gpus / entitled_gpus if entitled_gpus > 0 else None


def over_entitlement(b: float | None) -> bool:
    """Whether a burn forecasts exceeding the entitlement: kept at this rate, the allocation uses more than
    it is entitled to (the UI marks it; a manager may be told, issue 24)."""
    return b is not None and b > 1.0


def credited_gpu_s(delivered_gpu_s: float, owed_gpu_s_: float) -> float:
    """The part of a delivery that counts towards what was owed (at most the owed amount)."""
    return min(delivered_gpu_s, owed_gpu_s_)


def delivered_of_owed(rows: Iterable[tuple[float, float]]) -> float | None:
    """The headline fairness figure over several allocations ((owed, delivered) each): Σ credited ÷ Σ owed,
    each allocation credited at most its owed amount (None when nothing was owed)."""
    owed = got = 0.0
    for o, d in rows:
        owed += o
        got += credited_gpu_s(d, o)
    return got / owed if owed > 0 else None


def credited_fraction(delivered_gpu_s: float, owed_gpu_s_: float) -> float | None:
    """One allocation's `delivered_of_owed` (its ratio capped at 1): the simulator's fairness score per
    allocation and period (`owed_delivered_mean`/`_min` average these, so over-delivery earns no credit)."""
    return delivered_of_owed([(owed_gpu_s_, delivered_gpu_s)])


# -- the window and the period -----------------------------------------------------------------------------


def window_bounds(now: float, window_s: float = DEFAULT_WINDOW_S) -> tuple[float, float]:
    """DESIGN.md "Usage window": the sliding window [now - window, now)."""
    return now - window_s, now


def period_bounds(at: float, period_s: float) -> tuple[float, float]:
    """The last whole period that ended at or before `at` (periods are aligned to multiples of
    `period_s` from the epoch, so every closer agrees on them)."""
    end = math.floor(at / period_s) * period_s
    return end - period_s, end


def current_period(now: float, period_s: float) -> tuple[float, float]:
    """The period `now` is in, up to `now`: [the last boundary, now)."""
    return math.floor(now / period_s) * period_s, now


def period_id(start: float, end: float) -> str:
    """A readable, unique name: `20261130T000000Z-20261201T000000Z`."""
    fmt = "%Y%m%dT%H%M%SZ"
    return f"{datetime.fromtimestamp(start, UTC).strftime(fmt)}-{datetime.fromtimestamp(end, UTC).strftime(fmt)}"


def describe_interval(start: float, end: float, now: float | None = None) -> str:
    """The words a surface prints next to a figure: "last 7 days" for a window ending now, otherwise the
    dates, e.g. "1 Dec 00:00 – 2 Dec 00:00 UTC"."""
    length = end - start
    if now is not None and abs(end - now) < 1.0:
        if length % DAY_S == 0:
            n = int(length // DAY_S)
            return "last day" if n == 1 else f"last {n} days"
        if length % HOUR_S == 0:
            n = int(length // HOUR_S)
            return "last hour" if n == 1 else f"last {n} hours"
    def fmt(t: float) -> str:
        d = datetime.fromtimestamp(t, UTC)
        return f"{d.day} {d.strftime('%b %H:%M')}"
    return f"{fmt(start)} – {fmt(end)} UTC"


# -- entitlement down the tree and the figures of an interval --------------------------------------------


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


def entitlements(shares: Mapping[str, tuple[str, float]], root: str = ROOT) -> dict[str, float]:
    """DESIGN.md "Org tree and allocations": a node's entitlement is the product of the shares on its
    path (`shares`: node -> (parent, share); the root and unknown parents count as 1). The ledger's, the
    API's and the scheduler's trees (`steward.policy.tree`, whose root is `root`) all take it from here."""
    memo: dict[str, float] = {}

    def ent(name: str, depth: int = 0) -> float:
        if name == root or name not in shares or depth > 16:
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
        row["owed_gpu_s"] += owed_gpu_s(ent_gpu_s, d)
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
                life.running_since = run_start(p, at)
            if kind == "JobRequeued" and life.wanting_since is None:
                life.wanting_since = at
            if kind in RUN_ENDS and life.running_since is not None:
                life.runs.append((life.running_since, run_end(kind, p, at, life.running_since)))
                life.running_since = None
            if (kind in DEMAND_ENDS or (kind == "JobPreempted" and not p.get("requeue", True))) \
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
