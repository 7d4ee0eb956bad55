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

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from steward.domain.policy_settings import PolicySettings
from steward.policy.ordering import subtree_sums, tree_layout, usage_ratio
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
