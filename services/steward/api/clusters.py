"""Clusters and GPU models in the API (issue 25, ADR 0057): the GPU models of the registered nodes with the
weight in force (budget units per GPU-hour; the policy setting `gpu_model_weights`), their GPUs and
clusters, the input of `setGpuModelWeights`, and each cluster's occupancy now (busy, free, draining and down GPUs,
in all and per GPU model) from the read model's nodes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import strawberry

from steward.api.scalars import BigInt
from steward.domain.clusters import cluster_name
from steward.domain.nodes import takes_new_work, winding_down
from steward.domain.policy_settings import PolicySettings
from steward.domain.state import ClusterNode, LedgerState
from steward.policy.placement import unusable_by_cluster
from steward.scheduler.bridge import policy_node


@strawberry.type(description="A GPU model of the registered nodes: its weight (budget units per GPU-hour, set by "
                             "admins with setGpuModelWeights; 1 unless set), how many GPUs and nodes have it, in "
                             "which clusters.")
class GpuModel:
    model: str
    weight: float
    gpus: BigInt
    nodes: BigInt
    clusters: list[str]


@strawberry.input
class GpuModelWeightInput:
    model: str
    weight: float


def gpu_models_of(state: LedgerState, settings: PolicySettings) -> list[GpuModel]:
    """Every GPU model of the registered nodes, by name, with the weight the scheduler charges it at."""
    gpus: dict[str, int] = {}
    nodes: dict[str, int] = {}
    clusters: dict[str, set[str]] = {}
    for node in state.nodes.values():
        m = node.gpu_model
        gpus[m] = gpus.get(m, 0) + node.gpus
        nodes[m] = nodes.get(m, 0) + 1
        clusters.setdefault(m, set()).add(node.cluster)
    return [GpuModel(model=m, weight=settings.model_weight(m), gpus=gpus[m], nodes=nodes[m],
                     clusters=sorted(clusters[m])) for m in sorted(gpus)]


@strawberry.type
class GpuCounts:
    """The figures of a set of nodes (a cluster, or one GPU model in it); shared by the two types below."""

    nodes: BigInt
    gpus: BigInt
    busy_gpus: BigInt
    free_gpus: BigInt
    draining_gpus: BigInt
    down_gpus: BigInt


@strawberry.type(description="One GPU model's GPUs in one cluster, by what they do now: busy (held by Steward's "
                             "jobs or by work another scheduler placed), free (on ready nodes), draining (not held, "
                             "on draining or retiring nodes: offered to no new job) and down (not held, on "
                             "unhealthy nodes). "
                             "busy + free + draining + down = gpus.")
class ModelOccupancy(GpuCounts):
    gpu_model: str


@strawberry.type(description="A cluster's occupancy now (ADR 0057): its nodes and GPUs by what they do, in all and "
                             "per GPU model (busy + free + draining + down = gpus), and its fragmentation (ADR 0091).")
class ClusterOccupancy(GpuCounts):
    name: str
    gpu_models: list[ModelOccupancy] = strawberry.field(description="The same figures per GPU model, by name.")
    largest_waiting_gang: BigInt | None = strawberry.field(
        default=None, description="GPUs of the largest waiting job that may run on this cluster (the GPU models and "
                                  "clusters it accepts, its allocation's pin, and this cluster's nodes it admits "
                                  "hold it together); 0 when none waits. Null when the queue's order is not known "
                                  "yet (the occupancy subscription pushes the last order computed).")
    fragmented_gpus: BigInt | None = strawberry.field(
        default=None, description="DESIGN.md \"Fragmentation\": this cluster's free GPUs that its largest waiting "
                                  "gang cannot use (the scheduler's rule, steward.policy.placement.unusable_gpus, "
                                  "on this cluster's nodes: gangs never span clusters); 0 when none waits. Null "
                                  "with largestWaitingGang.")


def node_gpus(node: Mapping[str, Any], used: Mapping[str, int]) -> tuple[int, int, int, int]:
    """(busy, free, draining, down) GPUs of one node row, the one reading of a node's GPUs every figure of the
    API uses (`Node.freeGpus`, `Domain`, `Occupancy`, `clusterOccupancy`): held GPUs (Steward's jobs, `used`,
    and another scheduler's, `foreign_gpus`) are busy whatever the node's state; the rest are free on a ready
    node, draining on a draining or retiring one (offered to no new job, ADR 0081), down otherwise (the policy's
    reading of a state it does not know: unhealthy); the states read by `domain.nodes.takes_new_work` and
    `winding_down`, as the ledger and the policy read them (ADR 0091)."""
    gpus = int(node["gpus"])
    busy = min(gpus, used.get(node["node_id"], 0) + int(node.get("foreign_gpus") or 0))
    rest = gpus - busy
    state = str(node["state"])
    if takes_new_work(state):
        return busy, rest, 0, 0
    return (busy, 0, rest, 0) if winding_down(state) else (busy, 0, 0, rest)


def _counts(sums: list[int]) -> dict[str, int]:
    return dict(zip(("nodes", "gpus", "busy_gpus", "free_gpus", "draining_gpus", "down_gpus"), sums, strict=True))


def cluster_node(row: Mapping[str, Any]) -> ClusterNode:
    """A read model's node row as the ledger's state holds the node."""
    return ClusterNode(str(row["node_id"]), int(row["gpus"]), str(row["gpu_model"]), tuple(row["path"]),
                       str(row["executor"]), str(row["state"]), int(row.get("foreign_gpus") or 0),
                       cluster_name(str(row.get("cluster") or "")))


def fragmented_gpus(rows: Iterable[Mapping[str, Any]], used: Mapping[str, int],
                    largest: Mapping[str, int]) -> dict[str, int]:
    """ADR 0091: each cluster's free GPUs (of these node rows) that its largest waiting gang (`largest`) cannot use, by
    the policy's one rule of it (`policy.placement.unusable_by_cluster`) on the nodes as the scheduler sees them
    (`scheduler.bridge.policy_node`: foreign load taken off, a node's state read by `domain.nodes.takes_new_work`)."""
    return unusable_by_cluster([policy_node(cluster_node(r)) for r in rows], used, largest)


def cluster_occupancy(nodes: Iterable[Mapping[str, Any]], used: Mapping[str, int],
                      largest: Mapping[str, int] | None = None) -> list[ClusterOccupancy]:
    """Every cluster's occupancy (by name), from the read model's node rows and the GPUs Steward's jobs hold
    on each (`ReadView.used_gpus`); a node's cluster is named as the domain names it (`cluster_name`). With
    `largest` (the largest waiting gang that may run on each cluster, `PolicyOrder.largest_by_cluster`), each
    cluster's fragmentation against it (ADR 0091); without, those two figures are null."""
    per: dict[str, dict[str, list[int]]] = {}
    rows: list[Mapping[str, Any]] = []
    for node in nodes:
        name = cluster_name(str(node.get("cluster") or ""))
        rows.append(node)
        models = per.setdefault(name, {})
        sums = models.setdefault(str(node["gpu_model"]), [0] * 6)
        for i, x in enumerate((1, int(node["gpus"]), *node_gpus(node, used))):
            sums[i] += x
    frag = None if largest is None else fragmented_gpus(rows, used, largest)
    out = []
    for name, models in sorted(per.items()):
        by_model = [ModelOccupancy(**_counts(s), gpu_model=m) for m, s in sorted(models.items())]
        total = [sum(s[i] for s in models.values()) for i in range(6)]
        gang = None if largest is None else int(largest.get(name, 0))
        out.append(ClusterOccupancy(**_counts(total), name=name, gpu_models=by_model, largest_waiting_gang=gang,
                                    fragmented_gpus=None if frag is None else frag.get(name, 0)))
    return out
