"""What Steward knows of a Kubernetes cluster's machines (issue 26 "Inventory"), from the API server's nodes and
pods: pure functions over their JSON.

- A node with allocatable `nvidia.com/gpu` is a Steward node; its GPU model is the GPU operator's label
  `nvidia.com/gpu.product`; its place in the network is the labels NVIDIA Topograph publishes
  (`network.topology.nvidia.com/datacenter`, `spine`, `block`, `accelerator`), from the top down, then the
  node (a node without them hangs from one switch named after the executor's cluster).
- GPUs that pods of other schedulers hold (foreign load) are not Steward's: a node is registered with all its
  allocatable GPUs, and the heartbeat names the foreign load per node (`ReportHeartbeat.foreign`, the one home
  of foreign load for every executor, ADR 0046): the ledger counts those GPUs unavailable.
- A node cordoned by anyone but Steward, or not Ready, is out of service: reported down (the ledger holds
  it unhealthy until a heartbeat no longer names it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from steward.domain.commands import RegisterNode
from steward.executor.kubernetes_pods import (
    DRAIN_REASON,
    GPU_RESOURCE,
    PodProblem,
    is_steward_pod,
    is_terminal,
    pod_gpus,
    quantity,
)

MODEL_LABEL = "nvidia.com/gpu.product"
TOPOLOGY_PREFIX = "network.topology.nvidia.com/"
TOPOLOGY_LEVELS = ("datacenter", "spine", "block", "accelerator")  # from the top down

Node = Mapping[str, Any]


def name(node: Node) -> str:
    return str(node.get("metadata", {}).get("name", ""))


def allocatable_gpus(node: Node) -> int:
    value = (node.get("status", {}).get("allocatable") or {}).get(GPU_RESOURCE)
    if value is None:
        return 0
    try:
        return quantity(value)
    except PodProblem:
        return 0


def topology_path(node: Node, cluster: str) -> list[str]:
    """The node's switches from the top down (Topograph's labels, each level's value prefixed with its level so
    two levels never share a name), then the node."""
    node_labels = node.get("metadata", {}).get("labels") or {}
    switches = [f"{level}-{node_labels[TOPOLOGY_PREFIX + level]}" for level in TOPOLOGY_LEVELS
                if node_labels.get(TOPOLOGY_PREFIX + level)]
    return [*(switches or [cluster]), name(node)]


def foreign_gpus(pods: Iterable[Mapping[str, Any]], scheduler_name: str) -> dict[str, int]:
    """GPUs held per node by pods Steward does not schedule (bound, not finished), on any node."""
    held: dict[str, int] = {}
    for pod in pods:
        node = pod.get("spec", {}).get("nodeName")
        if not node or is_steward_pod(pod, scheduler_name) or is_terminal(pod):
            continue
        try:
            gpus = pod_gpus(pod)
        except PodProblem:
            continue
        if gpus:
            held[node] = held.get(node, 0) + gpus
    return held


def ready(node: Node) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in node.get("status", {}).get("conditions") or [])


def cordoned_by_others(node: Node) -> bool:
    """Unschedulable, and not by a Steward drain (which names its reason in `steward.io/drain-reason`)."""
    notes = node.get("metadata", {}).get("annotations") or {}
    return bool(node.get("spec", {}).get("unschedulable")) and DRAIN_REASON not in notes


def registrations(nodes: Iterable[Node], executor_id: str, default_model: str = "gpu",
                  cluster: str = "") -> list[RegisterNode]:
    """A `RegisterNode` per node with allocatable GPUs (foreign load is the heartbeat's, not a smaller node), in
    `cluster` (the executor's setting, ADR 0085; "": the default cluster)."""
    out = []
    for node in nodes:
        gpus = allocatable_gpus(node)
        if gpus <= 0:
            continue
        model = (node.get("metadata", {}).get("labels") or {}).get(MODEL_LABEL) or default_model
        out.append(RegisterNode(name(node), gpus, model, topology_path(node, f"{executor_id}-cluster"), executor_id,
                                cluster))
    return out


def foreign_load(nodes: Iterable[Node], foreign: Mapping[str, int], registered: Mapping[str, int]) -> dict[str, int]:
    """The heartbeat's foreign load: GPUs foreign pods hold on each registered node, never more than the node
    was registered with (`registered`: node -> GPUs), nodes with none left out. A node the cluster lists with
    fewer GPUs than registered (its allocatable shrank) counts the difference as foreign too, until it is
    registered again."""
    seen = {name(n): allocatable_gpus(n) for n in nodes}
    load = {}
    for node_id, gpus in registered.items():
        held = foreign.get(node_id, 0) + max(0, gpus - seen.get(node_id, gpus))
        if held > 0:
            load[node_id] = min(gpus, held)
    return dict(sorted(load.items()))


def down_nodes(nodes: Iterable[Node], registered: set[str]) -> list[str]:
    """The registered nodes out of service: gone, NotReady, or cordoned by someone else (a node full of foreign
    pods is not down: its GPUs are foreign load, and a Steward attempt may still run there)."""
    seen = {name(n): n for n in nodes}
    down = []
    for node_id in registered:
        node = seen.get(node_id)
        if node is None or not ready(node) or cordoned_by_others(node):
            down.append(node_id)
    return sorted(down)
