"""Reading the `tree:` and `cluster:` sections of a scenario YAML into commands, refusing bad files
with a message that names the node or key, before anything is recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from steward.domain.commands import ROOT, RegisterNode, SetAllocations
from steward.domain.decide import decide
from steward.domain.display_names import display_name_problem
from steward.domain.errors import DomainError
from steward.domain.ids import id_problem, shown
from steward.domain.state import LedgerState, evolve


class ScenarioFileError(ValueError):
    pass


def load_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as err:
        raise ScenarioFileError(f"cannot read {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ScenarioFileError(f"{path} is not valid YAML{where}: {getattr(err, 'problem', err)}") from None
    if not isinstance(data, dict):
        raise ScenarioFileError(f"{path}: expected a mapping at the top level")
    return data


def _share(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioFileError(f"tree node '{where}': share must be a number, got {value!r}")
    return float(value)


def _debug_quota(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScenarioFileError(
            f"tree node '{where}': debug_quota must be a whole number of GPUs >= 0, got {value!r}")
    return int(value)


def _display_name(value: Any, node: str) -> str:
    if not isinstance(value, str):
        raise ScenarioFileError(f"tree node '{node}': 'name' must be text, got {value!r}")
    problem = display_name_problem(value)
    if problem is not None:
        raise ScenarioFileError(f"tree node '{node}': name {shown(value)} {problem}")
    return value


def _pin(value: Any, node: str) -> str:
    problem = id_problem(value)
    if problem is not None:
        raise ScenarioFileError(f"tree node '{node}': pin (a cluster name) {shown(value)} {problem}")
    return str(value)


def tree_commands(data: dict[str, Any], reason: str) -> list[SetAllocations]:
    """One SetAllocations per parent, top-down. A child is `name: share` or `name: {share, children,
    debug_quota, name, pin}` (`debug_quota`: GPUs of debug work ahead of the fair-share order, DESIGN.md "Debug
    quota"; `name`: what people call it, ADR 0055; `pin`: the cluster its subtree's jobs run on, ADR 0067)."""
    tree = data.get("tree")
    if not isinstance(tree, dict) or not tree:
        raise ScenarioFileError("the file has no 'tree:' section (a mapping of node name to share)")
    out: list[SetAllocations] = []

    def walk(parent: str, children: dict[str, Any]) -> None:
        shares: dict[str, float] = {}
        quotas: dict[str, int | None] = {}
        names: dict[str, str | None] = {}
        pins: dict[str, str | None] = {}
        nested: list[tuple[str, dict[str, Any]]] = []
        for name, spec in children.items():
            name = str(name)
            if isinstance(spec, dict):
                unknown = set(spec) - {"share", "children", "debug_quota", "name", "pin"}
                if unknown:
                    raise ScenarioFileError(f"tree node '{name}': unknown key(s) {', '.join(sorted(unknown))}")
                if "share" not in spec:
                    raise ScenarioFileError(f"tree node '{name}': missing 'share'")
                shares[name] = _share(spec["share"], name)
                if spec.get("debug_quota") is not None:
                    quotas[name] = _debug_quota(spec["debug_quota"], name)
                if spec.get("name") is not None:
                    names[name] = _display_name(spec["name"], name)
                if spec.get("pin") is not None:
                    pins[name] = _pin(spec["pin"], name)
                kids = spec.get("children") or {}
                if not isinstance(kids, dict):
                    raise ScenarioFileError(f"tree node '{name}': 'children' must be a mapping")
                if kids:
                    nested.append((name, kids))
            else:
                shares[name] = _share(spec, name)
        out.append(SetAllocations(parent=parent, shares=shares, reason=reason, debug_quotas=quotas,
                                  display_names=names, pins=pins))
        for name, kids in nested:
            walk(name, kids)

    walk(ROOT, tree)
    return out


def cluster_commands(data: dict[str, Any], executor: str) -> list[RegisterNode]:
    """The nodes of a scenario's `cluster:` section (the default cluster), or of each cluster of its `clusters:`
    section (name -> the same fields; ADR 0057: node `NAME-node-K`, topology path under the cluster's name).
    A cluster's `executor:` names the executor that runs its nodes' jobs (ADR 0068: a cluster with its own
    executor); `executor` is the one for a cluster that names none."""
    several = data.get("clusters")
    if several is not None:
        if "cluster" in data:
            raise ScenarioFileError("give either 'cluster:' (one) or 'clusters:' (several), not both")
        if not isinstance(several, dict) or not several:
            raise ScenarioFileError("clusters: expected a mapping of cluster name to its nodes")
        out: list[RegisterNode] = []
        for name, spec in several.items():
            if not isinstance(spec, dict) or isinstance(spec.get("nodes"), list):
                raise ScenarioFileError(f"clusters.{name}: expected nodes, gpus_per_node, gpu_model, topology "
                                        "(a count of nodes, not a list)")
            out += [RegisterNode(node_id=f"{name}-{c.node_id}", gpus=c.gpus, gpu_model=c.gpu_model,
                                 path=[str(name), *c.path[:-1], f"{name}-{c.node_id}"], executor=c.executor,
                                 cluster=str(name))
                    for c in _one_cluster(f"clusters.{name}", spec, executor)]
        return out
    cluster = data.get("cluster")
    if not isinstance(cluster, dict):
        raise ScenarioFileError("the file has no 'cluster:' section")
    return _one_cluster("cluster", cluster, executor)


def weight_settings(data: dict[str, Any]) -> dict[str, float]:
    """A scenario's `gpu_models:` section (model -> weight, budget units per GPU-hour; ADR 0057)."""
    raw = data.get("gpu_models")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ScenarioFileError("gpu_models: expected a mapping of GPU model to its weight")
    out = {}
    for model, w in raw.items():
        if isinstance(w, bool) or not isinstance(w, int | float):
            raise ScenarioFileError(f"gpu_models.{model}: the weight must be a number, got {w!r}")
        out[str(model)] = float(w)
    return out


def _one_cluster(where: str, cluster: dict[str, Any], executor: str) -> list[RegisterNode]:
    try:
        count = int(cluster["nodes"])
        gpus = int(cluster["gpus_per_node"])
    except KeyError as err:
        raise ScenarioFileError(f"{where}: missing '{err.args[0]}'") from None
    except (TypeError, ValueError):
        raise ScenarioFileError(f"{where}: 'nodes' and 'gpus_per_node' must be integers") from None
    if count < 1 or gpus < 1:
        raise ScenarioFileError(f"{where}: needs at least one node and one GPU, got {count} x {gpus}")
    model = str(cluster.get("gpu_model", "generic"))
    own = cluster.get("executor", executor)
    if not isinstance(own, str) or not own:
        raise ScenarioFileError(f"{where}.executor: expected the id of the executor that runs its nodes' jobs, "
                                f"got {own!r}")
    topo = cluster.get("topology") or {}
    per_block = int(topo.get("nodes_per_block", count))
    if per_block < 1:
        raise ScenarioFileError(f"{where}.topology: 'nodes_per_block' must be at least 1")
    width = len(str(count - 1))
    return [
        RegisterNode(node_id=f"node-{i:0{width}d}", gpus=gpus, gpu_model=model,
                     path=[f"block-{i // per_block}", f"node-{i:0{width}d}"], executor=own)
        for i in range(count)
    ]


def check_locally(state: LedgerState, commands: list[SetAllocations] | list[RegisterNode]) -> None:
    """Run the same pure guards the ledger runs, so a bad file is refused before anything is sent."""
    for cmd in commands:
        try:
            for ev in decide(state, cmd, 0.0):
                state = evolve(state, ev, 0.0)
        except DomainError as err:
            raise ScenarioFileError(err.message) from None
