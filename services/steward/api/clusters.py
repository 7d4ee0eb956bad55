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
from steward.domain.state import LedgerState


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
                             "per GPU model (busy + free + draining + down = gpus).")
class ClusterOccupancy(GpuCounts):
    name: str
    gpu_models: list[ModelOccupancy] = strawberry.field(description="The same figures per GPU model, by name.")


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


def cluster_occupancy(nodes: Iterable[Mapping[str, Any]], used: Mapping[str, int]) -> list[ClusterOccupancy]:
    """Every cluster's occupancy (by name), from the read model's node rows and the GPUs Steward's jobs hold
    on each (`ReadView.used_gpus`); a node's cluster is named as the domain names it (`cluster_name`)."""
    per: dict[str, dict[str, list[int]]] = {}
    for node in nodes:
        models = per.setdefault(cluster_name(str(node.get("cluster") or "")), {})
        sums = models.setdefault(str(node["gpu_model"]), [0] * 6)
        for i, x in enumerate((1, int(node["gpus"]), *node_gpus(node, used))):
            sums[i] += x
    out = []
    for name, models in sorted(per.items()):
        rows = [ModelOccupancy(**_counts(s), gpu_model=m) for m, s in sorted(models.items())]
        total = [sum(s[i] for s in models.values()) for i in range(6)]
        out.append(ClusterOccupancy(**_counts(total), name=name, gpu_models=rows))
    return out
