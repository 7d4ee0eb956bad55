"""Clusters and GPU models in the API (issue 25, ADR 0057): the GPU models of the registered nodes with the
weight in force (budget units per GPU-hour; the policy setting `gpu_model_weights`), their GPUs and
clusters, and the input of `setGpuModelWeights`."""

from __future__ import annotations

import strawberry

from steward.api.scalars import BigInt
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
