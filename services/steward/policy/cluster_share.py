"""Fair share per cluster (DESIGN.md "Clusters and GPU models"; ADR 0076): the one home of the rule.

Budgets are one tree: entitlement, owed and delivered stay tree-wide, in weighted GPU-hours. But a cluster's
GPUs are contended only by the work that can run there, so strict improvement on a cluster (may this waiting
job take that running job's GPUs?) and the dating of a reservation's releases there also read how each
allocation has used *that* cluster:

- An allocation's **part of a cluster** is its entitlement shared out over the clusters its demand may use (the
  clusters its waiting and running jobs accept: a pin's alone when pinned, every cluster when nothing is asked)
  in proportion to their GPUs; the parts sum to its entitlement, so adding a cluster adds no one's claim, and
  an allocation whose work can run only on one cluster has its whole entitlement there (its owed is tree-wide,
  ADR 0062, so it must not read as over-served for running all of it where it can). An inner allocation's part
  is its entitlement × the fraction of its projects' entitlement that falls on the cluster.
- Its **standing on the cluster** is its usage there (weighted GPU-seconds in the window, the tree's units) ÷
  its part × the whole capacity × the window (as the tree's entitled-in-window), lowest most under-served.
- The standing a decision on a cluster reads is **the worse (higher) of the two**: the standing over the tree
  and the standing on the cluster (`standing_on`). An allocation over its budget on the tree cannot escape it by
  moving to another cluster, and one over its part of a cluster is over-served there however little it used
  elsewhere.
- And **the tree vetoes** (`tree_allows`): work is never preempted for an allocation more served than its own
  over the tree now. Without it an allocation under-served on the whole gave GPUs up to one over-served on the
  whole wherever it had had more than its part (measured: the suite's worst allocation 0.998 -> 0.955).

With one cluster its part is its entitlement and its usage there is its usage, so the standing on the cluster
is the standing over the tree, the worse of the two changes nothing and the veto is implied by strict
improvement over the tree; the cycle does not even compute it
(`Routes.multi` is False). Pure: no IO, no clock, no randomness.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from steward.domain.policy_settings import PolicySettings
from steward.policy.model import PendingJob
from steward.policy.ordering import rank_walk, subtree_sums, tree_layout, usage_ratio
from steward.policy.tree import AllocationTree
from steward.policy.usage import entitled_horizon_s


def standing_on(tree_ratio: float, cluster_ratio: float) -> float:
    """ADR 0076, the rule: an allocation's standing on a cluster is the worse (higher) of its standing over the
    tree and its standing on the cluster's usage."""
    return tree_ratio if tree_ratio >= cluster_ratio else cluster_ratio


def tree_allows(waiting_tree_ratio: float, victim_tree_ratio: float) -> bool:
    """ADR 0076, the rule's second half: on a cluster, work is never preempted for an allocation more served than
    its own over the tree now (the tree's standings before the move): one budget, so no one under-served on the
    whole gives GPUs up to someone over-served on the whole, whatever either did on the cluster."""
    return waiting_tree_ratio <= victim_tree_ratio


def usable_clusters(capacity_by_cluster: Mapping[str, float], accepted: Collection[str] | None = None) -> list[str]:
    """The clusters an allocation's demand may use, by name: those of `accepted` (the clusters its jobs accept),
    or every cluster when it names none (None or empty: no jobs)."""
    if not accepted:
        return sorted(capacity_by_cluster)
    return sorted(c for c in capacity_by_cluster if c in accepted)


def demand_clusters(jobs: Iterable[Any], accepts: Callable[[Any], Iterable[str]]) -> dict[str, set[str]]:
    """Per project, the union of the clusters its jobs accept (`accepts(job)`: the clusters where some node admits
    it, `Routes.candidates`); one job accepting every cluster makes it every cluster."""
    out: dict[str, set[str]] = {}
    for job in jobs:
        out.setdefault(job.project, set()).update(accepts(job))
    return out


def cluster_parts(
    tree: AllocationTree, capacity_by_cluster: Mapping[str, float], accepted: Mapping[str, Collection[str]]
) -> dict[str, dict[str, float]]:
    """Per cluster, each allocation's part of it (a fraction of the whole capacity, as `tree.entitlement` is):
    a project's entitlement × the cluster's GPUs ÷ the GPUs of the clusters its demand may use
    (`usable_clusters` of `accepted[project]`, every cluster when absent);
    an inner allocation its own entitlement × the fraction of its projects' entitlement that falls on the
    cluster (their parts' sum ÷ their entitlements' sum; the cluster's share of the GPUs when they have none).
    Σ over clusters of an allocation's parts = its entitlement (0 everywhere for a project whose clusters hold
    no GPUs); with one cluster, a part is the entitlement to the digit (the fractions are exactly 1)."""
    layout = tree_layout(tree)
    ent = layout.entitlement
    capacity = {c: max(g, 0.0) for c, g in capacity_by_cluster.items()}
    whole = sum(capacity.values())
    per_leaf: dict[str, dict[str, float]] = {c: {} for c in capacity}
    for p in layout.leaves:
        usable = usable_clusters(capacity, accepted.get(p))
        total = sum(capacity[c] for c in usable)
        for c in usable:
            per_leaf[c][p] = ent[p] * (capacity[c] / total) if total > 0 else 0.0
    leaf_ent = subtree_sums(tree, {p: ent[p] for p in layout.leaves})
    out: dict[str, dict[str, float]] = {}
    for c, leaf in per_leaf.items():
        sums = subtree_sums(tree, leaf)
        even = capacity[c] / whole if whole > 0 else 0.0
        part = {}
        for n, kids in layout.post:
            if not kids:
                part[n] = sums[n]
            else:
                part[n] = ent[n] * (sums[n] / leaf_ent[n] if leaf_ent[n] > 0 else even)
        out[c] = part
    return out


@dataclass(frozen=True, slots=True)
class ClusterStanding:
    """Where every allocation stands on one cluster (ADR 0076), subtree totals per allocation."""

    cluster: str
    delivered: Mapping[str, float]
    """Usage on the cluster in the window of each allocation's subtree (GPU-seconds, weighted)."""
    entitled: Mapping[str, float]
    """Its part of the cluster × the whole capacity × the window (GPU-seconds)."""
    ratio: Mapping[str, float]
    part: Mapping[str, float]

    def evidence(self, allocation: str, tree_ratio: float) -> dict[str, Any]:
        """The figures behind an allocation's standing on this cluster (JSON: an infinite ratio is None)."""
        mine = self.ratio.get(allocation, float("inf"))
        worse = standing_on(tree_ratio, mine)
        return {
            "cluster": self.cluster,
            "part": self.part.get(allocation, 0.0),
            "delivered_gpu_s": self.delivered.get(allocation, 0.0),
            "entitled_gpu_s": self.entitled.get(allocation, 0.0),
            "ratio": None if mine == float("inf") else mine,
            "tree_ratio": None if tree_ratio == float("inf") else tree_ratio,
            "standing": None if worse == float("inf") else worse,
            "read": "cluster" if mine > tree_ratio else "tree",
        }


def cluster_standings(
    tree: AllocationTree,
    cluster_usage: Mapping[str, Mapping[str, float]],
    capacity_by_cluster: Mapping[str, float],
    accepted: Mapping[str, Collection[str]],
    settings: PolicySettings,
) -> dict[str, ClusterStanding]:
    """ADR 0076: every allocation's standing on each cluster of `capacity_by_cluster` (GPUs per cluster; the
    whole capacity is their sum, as the tree's standing counts it). `cluster_usage`: per cluster, usage per
    project on it (a cluster absent: nothing used there). `accepted`: per project, the clusters its demand may
    use (`demand_clusters`; absent: every cluster). Entitlement counts in full (DESIGN.md's reading):
    ADR 0016's lending by demand stays the tree's. O(tree × clusters)."""
    capacity = sum(max(g, 0.0) for g in capacity_by_cluster.values())
    horizon = entitled_horizon_s(settings) * max(capacity, 1.0)
    parts = cluster_parts(tree, capacity_by_cluster, accepted)
    out: dict[str, ClusterStanding] = {}
    for c in sorted(capacity_by_cluster):
        delivered = subtree_sums(tree, cluster_usage.get(c, {}))
        part = parts[c]
        entitled = {n: part[n] * horizon for n in part}
        ratio = {n: usage_ratio(delivered[n], entitled[n]) for n in part}
        out[c] = ClusterStanding(c, delivered, entitled, ratio, part)
    return out


OrderKey = tuple[tuple[float, str], ...]
"""A project's place in an order, as a sortable key: (standing, allocation) level by level down its path. Sorting
projects by it is the walk of `ordering.rank_walk` (siblings share the prefix, then differ by `sibling_key`), so
keys taken on different clusters compare by the standing where the two allocations' paths part."""


def order_key(path: Sequence[str], ratio: Mapping[str, float]) -> OrderKey:
    """The key of the project at the end of `path` (root first) under the standings `ratio`."""
    return tuple((ratio.get(n, math.inf), n) for n in path)


class ClusterOrder:
    """ADR 0080, the order of waiting jobs per cluster: on each cluster, allocations are walked as the tree's order
    walks them (siblings by `sibling_key`, lowest first) but by their standing *on that cluster* (`standing_on`:
    the worse of the tree's standing the order ranks by and the standing on the cluster's usage, ADR 0076). A job
    takes its place in the one order the phases walk by its allocation's key on the cluster where it ranks best
    among those it accepts (`best`), never ahead of a job of its own project before it (priority, then submit
    time) that may run where it may; so the jobs of allocations whose work accepts one cluster only are in that
    cluster's own order, and a job that accepts several is considered as early as its best cluster (and its
    project's queue there) puts it. With one cluster the standing on it is the tree's and the order is the tree's
    exactly; the cycle then does not build this at all. Built only with the setting `cluster_order` (off in every
    preset: measured, it can cost the budget's worst allocation, ADR 0080)."""

    __slots__ = ("_best", "_ranks", "_tree_ratio", "accepts", "clusters", "leaf_index", "level_rank", "ratio",
                 "stand", "tree")

    def __init__(self, tree: AllocationTree, tree_ratio: Mapping[str, float],
                 per_cluster: Mapping[str, ClusterStanding],
                 accepts: Callable[[PendingJob], Sequence[str]]) -> None:
        """`tree_ratio`: the standing the tree's order ranks by (`Standing.ratio`); `per_cluster`: each cluster's
        (`cluster_standings`); `accepts(job)`: the clusters, by name, where some node admits the job."""
        self.tree = tree
        self.accepts = accepts
        self._tree_ratio = tree_ratio
        self.stand = per_cluster
        self.clusters = tuple(sorted(per_cluster))
        self.ratio: dict[str, dict[str, float]] = {}
        self.level_rank: dict[str, dict[str, tuple[int, int]]] = {}
        self.leaf_index: dict[str, dict[str, int]] = {}
        for c in self.clusters:
            on = per_cluster[c].ratio
            ratio = {n: standing_on(t, on.get(n, math.inf)) for n, t in tree_ratio.items()}
            level_rank: dict[str, tuple[int, int]] = {}
            leaves: list[str] = []
            rank_walk(tree, ratio, None, level_rank, leaves)
            self.ratio[c] = ratio
            self.level_rank[c] = level_rank
            self.leaf_index[c] = {p: i for i, p in enumerate(leaves)}
        self._best: dict[tuple[str, tuple[str, ...]], tuple[OrderKey, str | None]] = {}
        self._ranks: dict[tuple[str, str], dict[str, Any]] = {}

    def best(self, project: str, accepted: Sequence[str]) -> tuple[OrderKey, str | None]:
        """The key a project's job accepting the clusters `accepted` is ordered by, and the cluster it is taken
        on: the least of its keys on those clusters (ties: the first by name); the tree's key and None when it
        accepts none of them."""
        memo = (project, tuple(accepted))
        got = self._best.get(memo)
        if got is None:
            path = self.tree.path(project)
            got = (order_key(path, self._tree_ratio), None)
            for c in accepted:
                ratio = self.ratio.get(c)
                if ratio is not None:
                    key = order_key(path, ratio)
                    if got[1] is None or key < got[0]:
                        got = (key, c)
            self._best[memo] = got
        return got

    def reorder(self, jobs: Sequence[PendingJob]) -> list[PendingJob]:
        """`jobs` (the tree's order: projects in turn, each project's jobs in priority/submit/id order) in the
        per-cluster order: the jobs of allocations by `best`'s key, but never ahead of a job of their own project
        before them that accepts a cluster they accept (DESIGN.md: priority orders jobs inside one project, so on
        every cluster a project's jobs keep their order: a job's key is the worst of its own and those of such
        jobs), then those of projects with no allocation, as they were (last)."""
        tree, accepts = self.tree, self.accepts
        known: list[tuple[OrderKey, int, PendingJob]] = []
        rest: list[PendingJob] = []
        ahead: dict[tuple[str, str], OrderKey] = {}  # (project, cluster): the latest key of its jobs so far there
        for k, job in enumerate(jobs):
            if tree.is_leaf(job.project):
                on = accepts(job)
                key = self.best(job.project, on)[0]
                for c in on:  # never ahead of a job of its project before it that may run where it may
                    before = ahead.get((job.project, c))
                    if before is not None and before > key:
                        key = before
                for c in on:
                    ahead[job.project, c] = key
                known.append((key, k, job))
            else:
                rest.append(job)
        known.sort(key=_first_two)
        return [j for _, _, j in known] + rest

    def evidence(self, project: str, cluster: str) -> dict[str, Any]:
        """The ranks and standings behind a project's place in `cluster`'s order, level by level (JSON: an
        infinite ratio is None)."""
        stand = self.stand[cluster]
        ratio, level_rank = self.ratio[cluster], self.level_rank[cluster]
        levels = []
        for n in self.tree.path(project):
            rank, of = level_rank[n]
            levels.append({"allocation": n, "rank": rank, "of": of,
                           **_finite(standing=ratio[n], tree_ratio=self._tree_ratio.get(n, math.inf),
                                     cluster_ratio=stand.ratio.get(n, math.inf)),
                           "read": "cluster" if stand.ratio.get(n, math.inf) > self._tree_ratio.get(n, math.inf)
                           else "tree"})
        index = self.leaf_index[cluster]
        return {"cluster": cluster, "project_rank": index[project] + 1, "projects": len(index), "levels": levels}

    def rank(self, job: PendingJob, tree_rank: dict[str, Any]) -> dict[str, Any]:
        """A waiting job's rank as decisions and "why pending" carry it: its project's over the tree (`tree_rank`,
        `Standing.evidence`) and, when it accepts a cluster, `on_cluster`: the standing it is ordered by, on the
        cluster where its allocation ranks best among those it accepts (`evidence`; its place may be later still:
        never ahead of its own project's earlier jobs there, `reorder`)."""
        if not self.tree.is_leaf(job.project):
            return tree_rank
        cluster = self.best(job.project, self.accepts(job))[1]
        if cluster is None:
            return tree_rank
        key = (job.project, cluster)
        got = self._ranks.get(key)
        if got is None:
            got = self._ranks[key] = {**tree_rank, "on_cluster": self.evidence(job.project, cluster)}
        return got

    def candidate(self, project: str, cluster: str) -> dict[str, Any]:
        """A project's standing and rank on one cluster, as a routed job's candidates carry them."""
        index = self.leaf_index.get(cluster)
        if index is None or project not in index:
            return {}
        return {"project_rank": index[project] + 1, **_finite(standing=self.ratio[cluster][project])}


def _first_two(x: tuple[OrderKey, int, PendingJob]) -> tuple[OrderKey, int]:
    return x[0], x[1]


def _finite(**ratios: float) -> dict[str, float | None]:
    return {k: None if v == math.inf else v for k, v in ratios.items()}
