"""Ordering (DESIGN.md "Ordering (hierarchical fair share)").

At every level of the org tree, siblings are ordered by delivered-in-window ÷ entitled-in-window,
lowest first (the most under-served goes first); the walk down the tree gives the global order of
projects; priority orders jobs only inside one project, then submit time; ties break by id.
The `fifo_priority` baseline orders all jobs by priority, then submit time, then id.

ADR 0016 (setting `active_entitlement`, on for `steward`): an inner allocation's entitlement counts
each project below it only up to that project's demand now (the GPUs of its funded-asking work,
waiting or running), and its delivered counts only projects with demand; a project's own
entitlement among its siblings is counted in full. Unused entitlement is lent to the siblings, as
Slurm Fair Tree's and Kueue's cohorts lend unused quota, so a child that cannot use its share no
longer makes its parent look under-served.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from steward.domain.policy_settings import PolicySettings
from steward.policy.model import PendingJob, RunningJob, Snapshot
from steward.policy.tree import AllocationTree
from steward.policy.usage import entitled_horizon_s

_by_id = attrgetter("id")
_by_submit = attrgetter("submitted_at")
_by_priority = attrgetter("priority")


def usage_ratio(delivered: float, entitled: float) -> float:
    """DESIGN.md "Ordering": delivered-in-window ÷ entitled-in-window; an allocation entitled to
    nothing is infinitely served (it never goes ahead of one with a share)."""
    if entitled <= 0.0:
        return math.inf
    return delivered / entitled


def sibling_key(ratio: float, node: str) -> tuple[float, str]:
    """DESIGN.md "Ordering": lowest ratio first; "Ties break deterministically" (by id)."""
    return (ratio, node)


def demand_gpus(
    pending: Iterable[PendingJob], running: Iterable[RunningJob], settings: PolicySettings
) -> dict[str, float]:
    """ADR 0016 "what counts as demand": per project, the GPUs of its work that asks for funding
    (`contract.asks_for_funding`, DESIGN.md "Unfunded occupancy": min_runtime > 0, or a session),
    waiting or running (in grace too) — the jobs the headline figure's "that allocation's demand"
    counts. Work that asked for no protection opted out of the allocation and is not demand."""
    out: dict[str, float] = {}
    get = out.get
    everything = not settings.funding  # asks_for_funding(), inlined: one call per job is most of the cost
    for jobs in (pending, running):
        for job in jobs:
            if everything or job.min_runtime_s > 0 or job.klass == "interactive":
                out[job.project] = get(job.project, 0.0) + job.gpus
    return out


def demand_of(snap: Snapshot) -> Mapping[str, float] | None:
    """The demand the cycle ranks with (ADR 0016): the caller's count of the whole queue when it
    gives one (`Snapshot.demand`: the simulator hands the cycle a trimmed queue), else counted from
    the snapshot's jobs. None when the policy counts entitlement in full (`active_entitlement` off)."""
    s = snap.settings
    if not s.active_entitlement or s.ordering != "fair_share":
        return None
    if snap.demand is not None:
        return snap.demand
    return demand_gpus(snap.pending, snap.running, s)


class TreeLayout:
    """What the cycle reads of an allocation tree several times per call, taken once per tree object
    (immutable): every allocation with its children, each after its children (depth first, children
    in `tree.children` order: the order `subtree_sums` adds in), the projects (leaves) and each
    allocation's entitlement. Recursive closures per call made each cycle reference-cyclic garbage
    for the collector (docs/benchmarks.md "Simulator", round 5)."""

    __slots__ = ("entitlement", "leaves", "nodes", "post", "tree")

    def __init__(self, tree: AllocationTree) -> None:
        self.tree = tree
        out: list[tuple[str, tuple[str, ...]]] = []
        stack: list[tuple[str, bool]] = [(c, False) for c in reversed(tree.children(None))]
        while stack:
            node, done = stack.pop()
            kids = tree.children(node)
            if done or not kids:
                out.append((node, kids))
                continue
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(kids))
        self.post: tuple[tuple[str, tuple[str, ...]], ...] = tuple(out)
        self.leaves: tuple[str, ...] = tree.leaves()
        self.nodes: tuple[str, ...] = tuple(tree.allocations)
        self.entitlement: dict[str, float] = {n: tree.entitlement(n) for n in self.nodes}


_layouts: list[TreeLayout] = []


def tree_layout(tree: AllocationTree) -> TreeLayout:
    """The layout of `tree`, reused while the caller passes the very same tree object."""
    if _layouts and _layouts[0].tree is tree:
        return _layouts[0]
    layout = TreeLayout(tree)
    _layouts[:] = [layout]
    return layout


def post_order(tree: AllocationTree) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Every allocation with its children, each after its children (see `TreeLayout`)."""
    return tree_layout(tree).post


def subtree_sums(tree: AllocationTree, leaf_values: Mapping[str, float]) -> dict[str, float]:
    """Per allocation, the sum of `leaf_values` over the projects in its subtree (a project: its own
    value, 0 when absent), children added in `tree.children` order. O(tree)."""
    out: dict[str, float] = {}
    for node, kids in post_order(tree):
        if kids:
            total = 0.0
            for c in kids:
                total += out[c]
        else:
            total = float(leaf_values.get(node, 0.0))
        out[node] = total
    return out


def active_entitlement(tree: AllocationTree, demand: Mapping[str, float], capacity: int) -> dict[str, float]:
    """ADR 0016: the part of each allocation's entitlement its demand can use now. A project counts
    min(entitlement, demand ÷ capacity); an inner allocation the sum over its children (never more
    than its own entitlement, since the children's shares sum to at most 1)."""
    cap = max(capacity, 1)
    layout = tree_layout(tree)
    ent = layout.entitlement
    usable = {p: min(ent[p], max(demand.get(p, 0.0), 0.0) / cap) for p in layout.leaves}
    return subtree_sums(tree, usable)


def delivered_with_demand(
    tree: AllocationTree, usage: Mapping[str, float], demand: Mapping[str, float]
) -> dict[str, float]:
    """ADR 0016: an inner allocation's delivered-in-window counts only the projects below it that
    have demand now (a project's own delivered is its usage, demand or not)."""
    leaves = tree_layout(tree).leaves
    out = subtree_sums(tree, {p: usage.get(p, 0.0) for p in leaves if demand.get(p, 0.0) > 0.0})
    for p in leaves:  # a loop, not `update(generator)`: compiled, the generator cost more than the sums
        out[p] = float(usage.get(p, 0.0))
    return out


def ranked_entitled(tree: AllocationTree, node: str, active: Mapping[str, float], horizon: float) -> float:
    """ADR 0016: what a sibling is ranked against — a project its whole entitlement (its place among
    its siblings is unchanged), an inner allocation the active entitlement of the projects below it —
    over the window (GPU-seconds)."""
    if tree.children(node):
        return active[node] * horizon
    return tree.entitlement(node) * horizon


@dataclass(frozen=True, slots=True)
class Standing:
    """Where every allocation stands this cycle (the evidence of ordering decisions)."""

    delivered: Mapping[str, float]
    """Usage in the window of each allocation's subtree (GPU-seconds, weighted)."""
    entitled: Mapping[str, float]
    """Entitled in window: entitlement × capacity × window (GPU-seconds)."""
    ranked_delivered: Mapping[str, float]
    """The delivered each allocation is ranked by (and strict improvement compares): `delivered`,
    or with ADR 0016 only the projects below it with demand."""
    ranked_entitled: Mapping[str, float]
    """The entitled-in-window each allocation is ranked against: `entitled`, or with ADR 0016 the
    active entitlement of an inner allocation (see `ranked_entitled`)."""
    ratio: Mapping[str, float]
    level_rank: Mapping[str, tuple[int, int]]
    """(rank, of): 1-based position among its siblings."""
    leaf_order: tuple[str, ...]
    """Projects (leaves) in global order: the depth-first walk with siblings sorted."""
    leaf_index: Mapping[str, int]
    capacity: int
    demand: Mapping[str, float] | None = None
    """GPUs of demand of each allocation's subtree when entitlement is counted by demand (ADR 0016),
    else None."""
    active: Mapping[str, float] | None = None
    """Active entitlement per allocation (ADR 0016), else None."""

    def evidence(self, tree: AllocationTree, project: str) -> dict[str, Any]:
        """The ranks, shares, usage behind a project's place in the order, level by level."""
        path = tree.path(project)
        if not path or not tree.is_leaf(project):
            return {"project": project, "allocation": None}
        levels = []
        for node in path:
            rank, of = self.level_rank[node]
            ratio = self.ratio[node]
            levels.append(
                {
                    "allocation": node,
                    "rank": rank,
                    "of": of,
                    "share": tree.share(node),
                    "entitlement": tree.entitlement(node),
                    "delivered_gpu_s": self.delivered[node],
                    "entitled_gpu_s": self.entitled[node],
                    "ratio": None if math.isinf(ratio) else ratio,
                }
            )
            if self.active is not None and self.demand is not None:
                levels[-1]["active"] = {
                    "entitlement": self.active[node],
                    "demand_gpus": self.demand[node],
                    "delivered_gpu_s": self.ranked_delivered[node],
                    "entitled_gpu_s": self.ranked_entitled[node],
                }
        return {
            "project": project,
            "allocation": project,
            "project_rank": self.leaf_index[project] + 1,
            "projects": len(self.leaf_order),
            "levels": levels,
        }


def standing(
    tree: AllocationTree,
    usage: Mapping[str, float],
    capacity: int,
    settings: PolicySettings,
    demand: Mapping[str, float] | None = None,
) -> Standing:
    """Compute subtree usage, entitled-in-window, ratios and sibling ranks for every allocation, and
    the global order of projects. With `demand` (GPUs per project, `demand_of`), inner allocations
    are ranked by the entitlement their projects' demand can use (ADR 0016); without it, every
    entitlement counts in full. O(tree)."""
    horizon = entitled_horizon_s(settings) * max(capacity, 1)
    delivered = subtree_sums(tree, usage)
    layout = tree_layout(tree)
    nodes, ent = layout.nodes, layout.entitlement
    entitled = {n: ent[n] * horizon for n in nodes}
    active: dict[str, float] | None = None
    if demand is None:
        ranked_d: Mapping[str, float] = delivered
        ranked_e: Mapping[str, float] = entitled
    else:
        active = active_entitlement(tree, demand, capacity)
        ranked_d = delivered_with_demand(tree, usage, demand)
        ranked_e = {n: ranked_entitled(tree, n, active, horizon) for n in nodes}
    ratio = {n: usage_ratio(ranked_d[n], ranked_e[n]) for n in nodes}
    level_rank: dict[str, tuple[int, int]] = {}
    leaf_order: list[str] = []
    rank_walk(tree, ratio, None, level_rank, leaf_order)
    return Standing(
        delivered=delivered,
        entitled=entitled,
        ranked_delivered=ranked_d,
        ranked_entitled=ranked_e,
        ratio=ratio,
        level_rank=level_rank,
        leaf_order=tuple(leaf_order),
        leaf_index={p: i for i, p in enumerate(leaf_order)},
        capacity=capacity,
        demand=None if demand is None else subtree_sums(tree, demand),
        active=active,
    )


def rank_walk(
    tree: AllocationTree,
    ratio: Mapping[str, float],
    parent: str | None,
    level_rank: dict[str, tuple[int, int]],
    leaf_order: list[str],
) -> None:
    """`standing`'s walk down the tree: siblings by `sibling_key` (unique, as node ids are), each
    one's (rank, of), the leaves in global order (ADR 0080: also each cluster's order, by the standing on it).
    A module function, not a closure (see `post_order`)."""
    kids = sorted([sibling_key(ratio[c], c) for c in tree.children(parent)])
    n = len(kids)
    for i, (_, c) in enumerate(kids):
        level_rank[c] = (i + 1, n)
        if tree.children(c):
            rank_walk(tree, ratio, c, level_rank, leaf_order)
        else:
            leaf_order.append(c)


def sort_within_project(jobs: list[PendingJob]) -> list[PendingJob]:
    """DESIGN.md "priority only orders jobs inside one project, then submit time", ties by id.
    Three stable sorts on C-level keys (cheaper than tuple keys at 100,000 jobs)."""
    jobs.sort(key=_by_id)
    jobs.sort(key=_by_submit)
    if any(j.priority for j in jobs):
        jobs.sort(key=_by_priority, reverse=True)
    return jobs


def group_by_project(pending: Iterable[PendingJob]) -> dict[str, list[PendingJob]]:
    groups: dict[str, list[PendingJob]] = {}
    for job in pending:
        group = groups.get(job.project)
        if group is None:
            groups[job.project] = [job]
        else:
            group.append(job)
    return groups


def project_order(groups: Mapping[str, object], stand: Standing, usage: Mapping[str, float]) -> list[str]:
    """Projects in global order: tree leaves by the hierarchical walk, then names with no allocation
    (unfunded work) by usage then id."""
    known = [p for p in stand.leaf_order if p in groups]
    unknown = sorted((p for p in groups if p not in stand.leaf_index), key=lambda p: (usage.get(p, 0.0), p))
    return known + unknown


@dataclass(frozen=True, slots=True)
class Order:
    """The global order of waiting jobs and each project's own queue."""

    jobs: Sequence[PendingJob]
    by_project: Mapping[str, Sequence[PendingJob]]


def order_pending(
    pending: Iterable[PendingJob], stand: Standing, usage: Mapping[str, float], settings: PolicySettings
) -> Order:
    """The global order: fair-share walk of projects, each project's queue in priority/submit/id
    order; or, for the `fifo_priority` baseline, priority then submit time then id over all jobs."""
    groups = group_by_project(pending)
    for group in groups.values():
        sort_within_project(group)
    if settings.ordering == "fifo_priority":
        jobs = [j for g in groups.values() for j in g]
        return Order(jobs=sort_within_project(jobs), by_project=groups)
    jobs = []
    for project in project_order(groups, stand, usage):
        jobs.extend(groups[project])
    return Order(jobs=jobs, by_project=groups)
