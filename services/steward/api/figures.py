"""The headline figures of the allocation tree (pure; DESIGN.md "Owed vs delivered", "Usage window").

For each allocation, over the window [now - window, now]:
- entitled  = entitlement × capacity × window (GPU-seconds)
- delivered = GPU-seconds its jobs ran (usage in the window)
- demand    = GPU-seconds its jobs waited or ran
- owed      = Σ over hours of min(entitlement × capacity × hour, demand in that hour)
- burn      = GPUs it runs on now ÷ GPUs it is entitled to now (1.0 = exactly its share)

The read model keeps one run interval per job (its latest start), so a job requeued after preemption
counts from its latest start only; the event-accurate figures come with the store's usage projection.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ROOT = "cluster"
HOUR = 3600.0
DEFAULT_WINDOW_S = 7 * 24 * HOUR
WAITING = ("QUEUED", "PREEMPTED")
RUNNING = ("PLACED", "RUNNING")


@dataclass(frozen=True, slots=True)
class AllocationFigures:
    name: str
    parent: str
    depth: int
    share: float
    entitlement: float
    is_project: bool
    entitled_in_window: float
    usage_in_window: float
    demand_in_window: float
    owed: float
    delivered: float
    delivered_over_owed: float | None
    burn: float | None
    running_gpus: int
    running_jobs: int
    waiting_jobs: int
    waiting_gpus: int


def entitlements(parents: Mapping[str, str], shares: Mapping[str, float]) -> dict[str, float]:
    """A node's entitlement is the product of the shares on its path (DESIGN.md "Org tree")."""
    memo: dict[str, float] = {}

    def ent(name: str, guard: int = 0) -> float:
        if name not in memo:
            parent = parents[name]
            up = ent(parent, guard + 1) if parent in parents and guard < 64 else 1.0
            memo[name] = shares[name] * up
        return memo[name]

    return {n: ent(n) for n in parents}


def depth_first(parents: Mapping[str, str]) -> list[tuple[str, int]]:
    """(name, depth) in depth-first order, children by name; depth 1 = a child of the root."""
    children: dict[str, list[str]] = {}
    for child, parent in parents.items():
        children.setdefault(parent if parent in parents else ROOT, []).append(child)
    out: list[tuple[str, int]] = []
    stack = [(c, 1) for c in sorted(children.get(ROOT, []), reverse=True)]
    seen: set[str] = set()
    while stack:
        name, depth = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        out.append((name, depth))
        stack.extend((c, depth + 1) for c in sorted(children.get(name, []), reverse=True))
    return out


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def _add_hourly(buckets: list[float], start: float, end: float, w0: float, gpus: int) -> None:
    if end <= start:
        return
    first = max(0, int((start - w0) // HOUR))
    last = min(len(buckets) - 1, math.ceil((end - w0) / HOUR) - 1)
    for h in range(first, last + 1):
        b0 = w0 + h * HOUR
        buckets[h] += gpus * _overlap(start, end, b0, b0 + HOUR)


def compute(
    allocations: Sequence[Mapping[str, Any]],
    jobs: Iterable[Mapping[str, Any]],
    capacity: int,
    now: float,
    window_s: float = DEFAULT_WINDOW_S,
) -> list[AllocationFigures]:
    """Figures for every allocation, depth-first. `jobs` are projection rows with at least project,
    state, gpus, submitted_at, started_at, ended_at."""
    parents = {r["name"]: r["parent"] for r in allocations}
    shares = {r["name"]: float(r["share"]) for r in allocations}
    ents = entitlements(parents, shares)
    has_children = set(parents.values())
    w0 = now - window_s
    hours = max(1, math.ceil(window_s / HOUR))
    demand: dict[str, list[float]] = {}
    delivered: dict[str, float] = {}
    running_gpus: dict[str, int] = {}
    running_jobs: dict[str, int] = {}
    waiting_jobs: dict[str, int] = {}
    waiting_gpus: dict[str, int] = {}
    for j in jobs:
        p = j["project"]
        if p not in parents:
            continue
        gpus = int(j["gpus"])
        end = j["ended_at"] if j["ended_at"] is not None else now
        s0 = max(float(j["submitted_at"]), w0)
        if end > s0:
            _add_hourly(demand.setdefault(p, [0.0] * hours), s0, min(end, now), w0, gpus)
        if j["started_at"] is not None:
            delivered[p] = delivered.get(p, 0.0) + gpus * _overlap(float(j["started_at"]), end, w0, now)
        if j["state"] in RUNNING:
            running_gpus[p] = running_gpus.get(p, 0) + gpus
            running_jobs[p] = running_jobs.get(p, 0) + 1
        elif j["state"] in WAITING:
            waiting_jobs[p] = waiting_jobs.get(p, 0) + 1
            waiting_gpus[p] = waiting_gpus.get(p, 0) + gpus
    order = depth_first(parents)
    # roll the per-project figures up the tree, deepest first
    sub_demand: dict[str, list[float]] = {n: list(demand.get(n, [0.0] * hours)) for n in parents}
    sums: dict[str, list[float]] = {n: [delivered.get(n, 0.0), running_gpus.get(n, 0), running_jobs.get(n, 0),
                                       waiting_jobs.get(n, 0), waiting_gpus.get(n, 0)] for n in parents}
    for name, _depth in reversed(order):
        parent = parents[name]
        if parent in parents:
            pd = sub_demand[parent]
            for h, v in enumerate(sub_demand[name]):
                pd[h] += v
            ps = sums[parent]
            for i, v in enumerate(sums[name]):
                ps[i] += v
    out: list[AllocationFigures] = []
    for name, depth in order:
        ent = ents[name]
        per_hour = ent * capacity * HOUR
        owed = 0.0
        for h, d in enumerate(sub_demand[name]):
            span = min(HOUR, max(0.0, window_s - h * HOUR))
            owed += min(ent * capacity * span, d) if span < HOUR else min(per_hour, d)
        dlv, rg, rj, wj, wg = sums[name]
        entitled_gpus = ent * capacity
        out.append(AllocationFigures(
            name=name, parent=parents[name], depth=depth, share=shares[name], entitlement=ent,
            is_project=name not in has_children, entitled_in_window=ent * capacity * window_s,
            usage_in_window=dlv, demand_in_window=sum(sub_demand[name]), owed=owed, delivered=dlv,
            delivered_over_owed=(dlv / owed) if owed > 0 else None,
            burn=(rg / entitled_gpus) if entitled_gpus > 0 else None,
            running_gpus=int(rg), running_jobs=int(rj), waiting_jobs=int(wj), waiting_gpus=int(wg),
        ))
    return out
