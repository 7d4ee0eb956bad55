"""What Steward knows of a Slurm cluster's machines (issue 23 "Inventory"): its nodes with their GPUs (GRES
`gpu`, with the type where given) from `scontrol -o show node`, and each node's place in the switch tree from
Slurm's own `topology.conf` (the tree form NVIDIA Topograph publishes), so Steward places on the hierarchy
Slurm sees: a node's path is its switches from the top down, then the node (`[spine, leaf0, slurm0]`)."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import Path

from steward.domain.commands import RegisterNode
from steward.executor.slurm_commands import SlurmNode, expand_hostlist


class TopologyError(Exception):
    """topology.conf cannot be read as a tree (one line naming the switch)."""


def parse_topology(text: str) -> dict[str, list[str]]:
    """topology.conf (`SwitchName=leaf0 Nodes=slurm[0-1]`, `SwitchName=spine Switches=leaf[0-1]`; comments
    and other keys ignored) as each node's path: its switches from the root down, then itself."""
    parent: dict[str, str] = {}  # switch or node -> the switch above it
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = dict(part.split("=", 1) for part in shlex.split(line) if "=" in part)
        switch = fields.get("SwitchName")
        if not switch:
            continue
        for key in ("Nodes", "Switches"):
            for child in expand_hostlist(fields.get(key, "")):
                if child in parent and parent[child] != switch:
                    raise TopologyError(f"topology.conf puts {child} under both {parent[child]} and {switch}")
                parent[child] = switch
    node_children = {c for raw in text.splitlines() for c in _nodes_of(raw)}
    paths: dict[str, list[str]] = {}
    for node in sorted(node_children):
        path, seen, here = [node], {node}, node
        while here in parent:
            here = parent[here]
            if here in seen:
                raise TopologyError(f"topology.conf has a loop through switch {here}")
            seen.add(here)
            path.append(here)
        paths[node] = path[::-1]
    return paths


def _nodes_of(raw: str) -> list[str]:
    line = raw.split("#", 1)[0].strip()
    fields = dict(part.split("=", 1) for part in shlex.split(line) if "=" in part) if line else {}
    return expand_hostlist(fields.get("Nodes", "")) if fields.get("SwitchName") else []


def topology_file(slurm_conf: str) -> Path:
    """Slurm reads topology.conf beside slurm.conf."""
    return Path(slurm_conf or "/etc/slurm/slurm.conf").parent / "topology.conf"


def read_topology(slurm_conf: str) -> dict[str, list[str]]:
    """The nodes' paths from the cluster's topology.conf; none (every node then hangs from one switch named
    after the cluster) when the cluster has no topology.conf."""
    path = topology_file(slurm_conf)
    try:
        return parse_topology(path.read_text())
    except FileNotFoundError:
        return {}


def registrations(nodes: Iterable[SlurmNode], paths: dict[str, list[str]], executor_id: str,
                  default_model: str = "gpu", cluster: str = "") -> list[RegisterNode]:
    """A `RegisterNode` per Slurm node with GPUs, placed in the switch tree (nodes topology.conf does not name
    hang from a switch named after the executor) and in `cluster` (the executor's setting, ADR 0085; "": the
    default cluster); nodes without GPUs are not Steward's to place on."""
    return [RegisterNode(n.name, n.gpus, n.gpu_model or default_model,
                         paths.get(n.name, [f"{executor_id}-cluster", n.name]), executor_id, cluster)
            for n in nodes if n.gpus > 0]
