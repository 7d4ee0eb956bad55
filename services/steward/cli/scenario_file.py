"""The `tree:` and `cluster:` sections of a scenario YAML as commands, refusing bad files with a message that
names the node or key, before anything is recorded. The file is read by the simulator's parser
(`steward.sim.scenario`): one reading of the format for the live stack, the simulator and the what-if."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from steward.domain.clusters import cluster_name
from steward.domain.commands import ROOT, RegisterNode, SetAllocations
from steward.domain.decide import decide
from steward.domain.display_names import display_name_problem
from steward.domain.errors import DomainError
from steward.domain.ids import shown
from steward.domain.state import LedgerState, evolve
from steward.sim.errors import ScenarioError
from steward.sim.scenario import NodeSpec, check_top_level, parse_clusters, parse_tree, parse_weights, read_yaml


class ScenarioFileError(ValueError):
    pass


def load_yaml(path: Path) -> dict[str, Any]:
    try:
        data = read_yaml(path)
        check_top_level(path.name, data)
        return data
    except ScenarioError as err:
        raise ScenarioFileError(err.message) from None


def _display_name(value: str | None, node: str) -> str | None:
    if value is None:
        return None
    problem = display_name_problem(value)
    if problem is not None:
        raise ScenarioFileError(f"tree node '{node}': name {shown(value)} {problem}")
    return value


def tree_commands(data: dict[str, Any], reason: str, source: str = "the file") -> list[SetAllocations]:
    """One SetAllocations per parent, top-down, from the tree the simulator reads (`sim.scenario.parse_tree`,
    the one parser of the file). A child is `name: share` or `name: {share, children, debug_quota, name, pin}`
    (`debug_quota`: GPUs of debug work ahead of the fair-share order, DESIGN.md "Debug quota"; `name`: what
    people call it, ADR 0055; `pin`: the cluster its subtree's jobs run on, ADR 0067)."""
    if not isinstance(data.get("tree"), dict) or not data["tree"]:
        raise ScenarioFileError("the file has no 'tree:' section (a mapping of node name to share)")
    try:
        specs = parse_tree(source, data["tree"])
    except ScenarioError as err:
        raise ScenarioFileError(err.message) from None
    out: list[SetAllocations] = []

    def walk(parent: str, children: list[str]) -> None:
        kids = [specs[c] for c in children]
        out.append(SetAllocations(
            parent=parent, shares={a.name: a.share for a in kids}, reason=reason,
            debug_quotas={a.name: a.debug_quota for a in kids if a.debug_quota is not None},
            display_names={a.name: _display_name(a.display_name, a.name) for a in kids if a.display_name is not None},
            pins={a.name: a.pin for a in kids if a.pin}))
        for a in kids:
            if a.children:
                walk(a.name, list(a.children))

    walk(ROOT, [a.name for a in specs.values() if a.parent is None])
    return out


def _nodes(data: dict[str, Any], source: str) -> tuple[NodeSpec, ...]:
    if "cluster" not in data and "clusters" not in data:
        raise ScenarioFileError("the file has no 'cluster:' section")
    try:
        return parse_clusters(source, data)
    except ScenarioError as err:
        raise ScenarioFileError(err.message) from None


def cluster_file(data: dict[str, Any], executor: str,
                 source: str = "the file") -> tuple[list[RegisterNode], dict[str, float]]:
    """What `steward cluster apply` records, from one parse of the file (`sim.scenario.parse_clusters` and
    `parse_weights`: the same file names the same nodes live and in a what-if):
    - the nodes of a scenario's `cluster:` section (the default cluster), or of each cluster of its `clusters:`
      section (name -> the same fields; ADR 0057: node `NAME-nodeK`, topology path under the cluster's name). A
      cluster's `executor:` names the executor that runs its nodes' jobs (ADR 0068: a cluster with its own
      executor); `executor` is the one for a cluster that names none;
    - the weights of its `gpu_models:` section (model -> budget units per GPU-hour; ADR 0057), each a model of
      the file's nodes."""
    several = "clusters" in data
    nodes = _nodes(data, source)
    commands = [RegisterNode(node_id=n.name, gpus=n.gpus, gpu_model=n.gpu_model, path=list(n.path),
                             executor=n.executor or executor, cluster=n.cluster if several else "") for n in nodes]
    if data.get("gpu_models") is None:
        return commands, {}
    try:
        return commands, parse_weights(source, data["gpu_models"], nodes)
    except ScenarioError as err:
        raise ScenarioFileError(err.message) from None


def prune_plan(commands: list[RegisterNode], registered: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`cluster apply --prune` (ADR 0078): the registered nodes (the API's `nodes`: id, cluster, executor) that
    the file no longer lists, in a cluster it lists, of an executor it names for that cluster. A node of
    another executor in the same cluster (a node agent's, a Kubernetes cluster's) is not the file's to retire."""
    listed = {c.node_id for c in commands}
    owners = {(cluster_name(c.cluster), c.executor) for c in commands}
    return sorted((n for n in registered if n["id"] not in listed
                   and (cluster_name(str(n.get("cluster") or "")), str(n.get("executor") or "")) in owners),
                  key=lambda n: str(n["id"]))


def check_locally(state: LedgerState, commands: list[SetAllocations] | list[RegisterNode]) -> None:
    """Run the same pure guards the ledger runs, so a bad file is refused before anything is sent."""
    for cmd in commands:
        try:
            for ev in decide(state, cmd, 0.0):
                state = evolve(state, ev, 0.0)
        except DomainError as err:
            raise ScenarioFileError(err.message) from None
