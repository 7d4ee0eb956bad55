"""Clusters and GPU models in the ledger (DESIGN.md "Clusters and GPU models"; ADR 0057).

A cluster is a named set of nodes (`RegisterNode.cluster`; "" is the default cluster, where every node
registered before clusters had names stays). An admin weighs GPU models (budget units per GPU-hour) with
`SetGpuModelWeights`; the weights are the policy setting `gpu_model_weights`, so the command records a
`PolicySet` changing that one setting, and every reader of the policy (the scheduler's usage window, the
simulator, the what-if, the workflows) sees them as it sees any other setting. A job may name the GPU
models and clusters it accepts (`SubmitJob.gpu_models`, `clusters`; empty: any); this module says which
nodes a job may run on, and refuses a request no registered node could ever satisfy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from steward.domain.commands import RegisterNode, SetGpuModelWeights, SubmitJob, command_to_dict, submitted_fields
from steward.domain.errors import InvalidCommand
from steward.domain.ids import id_problem

DEFAULT_CLUSTER = "default"
"""The cluster of a node registered without one (and of every node registered before clusters had names)."""

WEIGHTS_SETTING = "gpu_model_weights"


def cluster_name(cluster: str) -> str:
    """A node's cluster: its own name, or the default cluster's."""
    return cluster or DEFAULT_CLUSTER


def cluster_problem(name: object) -> str | None:
    """Why `name` cannot name a cluster, in a few words (None when it can): a cluster's name is an id (ADR 0057:
    the id pattern, steward.domain.ids), the rule every place that takes a cluster's name reads (an executor's
    setting, a pin, a scenario file)."""
    return id_problem(name)


def admits(gpu_models: Iterable[str], clusters: Iterable[str], model: str, cluster: str) -> bool:
    """DESIGN.md "a job asks for GPUs as count plus an optional set of acceptable models and/or clusters; no
    request means any": may a job with this request run on a node of `model` in `cluster`?"""
    models, names = tuple(gpu_models), tuple(clusters)
    return (not models or model in models) and (not names or cluster_name(cluster) in names)


class NodeCatalogue:
    """What the registered nodes offer, summed by cluster and GPU model: the rules of a submission ask only
    this (which models and clusters exist; the largest gang a request admits), so each submission reads a
    few pools instead of every node. `pools`: (GPUs, nodes, model, cluster name), one per (cluster, model).
    (A plain class, immutable by convention.)"""

    __slots__ = ("clusters", "models", "pools")

    def __init__(self, pools: tuple[tuple[int, int, str, str], ...]) -> None:
        self.pools = pools
        self.models = tuple(sorted({m for _, _, m, _ in pools}))
        self.clusters = tuple(sorted({c for _, _, _, c in pools}))


def catalogue(nodes: Iterable[tuple[int, str, str]]) -> NodeCatalogue:
    """The catalogue of nodes given as (gpus, model, cluster) of every registered node."""
    per: dict[tuple[str, str], tuple[int, int]] = {}
    for gpus, model, cluster in nodes:
        key = (cluster_name(cluster), model)
        total, count = per.get(key, (0, 0))
        per[key] = (total + gpus, count + 1)
    return NodeCatalogue(tuple((g, n, m, c) for (c, m), (g, n) in sorted(per.items())))


class _NodeLike(Protocol):
    @property
    def gpus(self) -> int: ...
    @property
    def gpu_model(self) -> str: ...
    @property
    def cluster(self) -> str: ...


# (the node table last read, its catalogue): one tuple, swapped whole, so a reader in another thread sees a
# table with its own catalogue or a miss, never a table with another table's catalogue
_LAST: list[tuple[object, NodeCatalogue | None]] = [(None, None)]


def registered_catalogue(nodes: Mapping[str, _NodeLike]) -> NodeCatalogue:
    """The catalogue of a ledger state's node table, read once per table: a node table is never changed in
    place (every fold that changes a node makes a new table, which the projector's undo of a failed batch
    relies on too; only job tables are changed in place, by the projector and the scheduler's view), so the
    same table object has the same catalogue. A heartbeat or a registration makes a new table, read
    again at the next submission; every submission in between asks the catalogue, not the nodes."""
    held, known = _LAST[0]
    if held is nodes and known is not None:
        return known
    cat = catalogue((n.gpus, n.gpu_model, n.cluster) for n in nodes.values())
    _LAST[0] = (nodes, cat)
    return cat


def largest_gang(nodes: Iterable[tuple[int, str, str]], gpu_models: Sequence[str] = (),
                 clusters: Sequence[str] = ()) -> tuple[int, int, str]:
    """The most GPUs one placement could ever give a job with this request, over how many nodes, and in
    which cluster: gangs never span clusters, so it is the largest sum over one cluster of the admissible
    nodes (`nodes`: (gpus, model, cluster) of every registered node). (0, 0, "") when none is admissible."""
    return largest_in(catalogue(nodes), gpu_models, clusters)


def largest_in(cat: NodeCatalogue, gpu_models: Sequence[str] = (),
               clusters: Sequence[str] = ()) -> tuple[int, int, str]:
    """`largest_gang` over a catalogue: the largest sum over one cluster of the pools the request admits."""
    per: dict[str, tuple[int, int]] = {}
    for gpus, count, model, cluster in cat.pools:
        if admits(gpu_models, clusters, model, cluster):
            total, nodes = per.get(cluster, (0, 0))
            per[cluster] = (total + gpus, nodes + count)
    if not per:
        return 0, 0, ""
    name = min(per, key=lambda c: (-per[c][0], c))
    return per[name][0], per[name][1], name


def require_known_request(cmd: SubmitJob, models: Iterable[str], clusters: Iterable[str]) -> None:
    """A job's acceptable models and clusters name ones some registered node has; an unknown one is refused
    by name, with the known ones (a typo would otherwise wait forever). Nothing is refused while no node is
    registered (the cluster is being set up)."""
    if not cmd.gpu_models and not cmd.clusters:
        return  # nothing asked, nothing unknown (most submissions): the known names are not sorted for nothing
    known_models, known_clusters = sorted(set(models)), sorted({cluster_name(c) for c in clusters})
    for field, asked, known in (("gpu_models", cmd.gpu_models, known_models),
                                ("clusters", cmd.clusters, known_clusters)):
        if any(not isinstance(x, str) or not x.strip() for x in asked):
            raise InvalidCommand(f"{field} must name each {field[:-1].replace('_', ' ')} (no empty names)")
        if len(set(asked)) != len(asked):
            raise InvalidCommand(f"{field} names one twice: {', '.join(asked)}")
        if not known:
            continue
        unknown = [x for x in asked if x not in known]
        if unknown:
            what = "GPU model" if field == "gpu_models" else "cluster"
            raise InvalidCommand(
                f"unknown {what}{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: the registered "
                f"{what}s are {', '.join(known)}")


def submitted_payload(cmd: SubmitJob, now: float) -> dict[str, Any]:
    """The `JobSubmitted` payload: the command's fields, `gpu_models` and `clusters` only when the job names
    any (a payload without them is the shape recorded before clusters, so old decisions replay to the same
    event, and a job without them accepts any model and cluster)."""
    payload = submitted_fields(cmd)  # a new dict: completed in place, not copied
    payload["submitted_at"] = now
    for key in ("gpu_models", "clusters"):
        if not payload[key]:
            del payload[key]
    return payload


MAX_NODE_GPUS = 1_024
"""The most GPUs one node may be registered with (ADR 0082). The largest servers hold 8 to 16 GPUs; a
Kubernetes node whose device plugin shares GPUs (time-slicing replicas, MIG instances) advertises more, e.g.
16 GPUs in 64 replicas each; beyond this a count is a typo (80,000) or a test's 2^31-1, and the scheduler's
placement index, sized by the largest node, would allocate and walk that many buckets every cycle."""


def node_gpus_problem(cmd: RegisterNode) -> str | None:
    """ADR 0082: why a node registered with more than `MAX_NODE_GPUS` GPUs is refused (the bound and why), or
    None (the executors log it for a node their inventory lists, whose registration the ledger will refuse)."""
    if cmd.gpus <= MAX_NODE_GPUS:
        return None
    return (f"node '{cmd.node_id}' has {cmd.gpus:,} GPUs: a node has at most {MAX_NODE_GPUS:,} GPUs (servers hold "
            f"8 to 16; GPU sharing may advertise more, up to this bound): check the count")


def require_node_gpus(cmd: RegisterNode) -> None:
    """ADR 0082: a node registered with more than `MAX_NODE_GPUS` GPUs is refused, naming the bound and why."""
    if (problem := node_gpus_problem(cmd)) is not None:
        raise InvalidCommand(problem)


def registered_payload(cmd: RegisterNode, kept: str | None = None, foreign: int = 0) -> dict[str, Any]:
    """The `NodeRegistered` payload: `cluster` only when the node names one (the default cluster otherwise,
    the shape recorded before clusters); `state` only when a registration of a node already registered keeps
    the state an operator gave it (draining, retiring: ADR 0082), so that every other registration records
    the shape it always had and the fold needs no rules version (a payload without `state` is a ready node);
    `foreign_gpus` only when it keeps foreign load (ADR 0091; none: the fold's 0, as before)."""
    payload = command_to_dict(cmd)
    if not payload["cluster"]:
        del payload["cluster"]
    if kept is not None:
        payload["state"] = kept
    if foreign > 0:
        payload["foreign_gpus"] = foreign
    return payload


class _ServedNode(Protocol):
    @property
    def node_id(self) -> str: ...
    @property
    def executor(self) -> str: ...
    @property
    def cluster(self) -> str: ...


SHOWN_NODES = 5
"""How many of the nodes in the way a refusal names (then how many in all)."""


def executor_conflict(nodes: Mapping[str, _ServedNode], cmd: RegisterNode) -> str | None:
    """ADR 0091: why `cmd` may not put its node into its cluster (None when it may). A cluster's nodes are served
    by one executor: a placement goes to the executor of its nodes (`JobPlaced.executor`), and a gang never spans
    clusters (`admits`, the policy's routing), so with one executor a cluster a gang never spans executors
    either. Refused: a node joining a cluster (a new node, or one from another cluster) where a node of another
    executor is registered, the default cluster as any other. Not refused: a node of the cluster registered again
    in it, with its executor or another: moving a cluster to another executor is an operator's act (an executor
    may not register another's node, `bus.identity`), done one registration at a time (`cluster apply --executor`
    of the whole file), the cluster mixed while it lasts; and a cluster mixed before this rule keeps taking its
    nodes' new GPU counts and paths. One executor may serve several clusters."""
    name = cluster_name(cmd.cluster)
    before = nodes.get(cmd.node_id)
    if before is not None and cluster_name(before.cluster) == name:
        return None
    others = sorted(n.node_id for n in nodes.values()
                    if n.executor != cmd.executor and n.node_id != cmd.node_id and cluster_name(n.cluster) == name)
    if not others:
        return None
    serving = sorted({nodes[n].executor for n in others})
    shown = ", ".join(others[:SHOWN_NODES]) + (f", ... ({len(others)} in all)" if len(others) > SHOWN_NODES else "")
    return (f"node '{cmd.node_id}' cannot join cluster '{name}' with executor '{cmd.executor}': executor"
            f"{'s' if len(serving) > 1 else ''} {', '.join(repr(e) for e in serving)} serve"
            f"{'' if len(serving) > 1 else 's'} its nodes ({shown}). A cluster has one executor, so that a gang, "
            f"which never spans clusters, never spans executors: register the node in a cluster of its own "
            f"(--cluster, STEWARD_EXECUTOR_CLUSTER, a `clusters:` section of the file), or with executor "
            f"'{serving[0]}', or retire those nodes first")


def require_one_executor(nodes: Mapping[str, _ServedNode], cmd: RegisterNode) -> None:
    """ADR 0091: `executor_conflict` as a refusal."""
    if (problem := executor_conflict(nodes, cmd)) is not None:
        raise InvalidCommand(problem)


def weight_problem(model: str, weight: Any) -> str | None:
    """Why `weight` is no weight of a GPU model (None: it is one): a finite number > 0 (a weight of 0 would make a
    model's hours free, so fair share could not see them). Also checked by the CLI before it sends (a NaN cannot
    even be sent as JSON)."""
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
        return f"the weight of {model!r} must be a finite number, got {weight!r}"
    if weight <= 0:
        return f"the weight of {model!r} must be > 0 (budget units per GPU-hour), got {weight}"
    return None


def require_valid_weights(weights: Mapping[str, Any], models: Iterable[str]) -> None:
    """A weight is budget units per GPU-hour of one registered GPU model: a finite number > 0 (a weight of 0
    would make a model's hours free, so fair share could not see them)."""
    if not weights:
        raise InvalidCommand("name at least one GPU model and its weight")
    known = sorted(set(models))
    for model, weight in sorted(weights.items()):
        if (problem := weight_problem(model, weight)) is not None:
            raise InvalidCommand(problem)
        if known and model not in known:
            raise InvalidCommand(f"unknown GPU model {model!r}: the registered GPU models are {', '.join(known)}")
        if not known:
            raise InvalidCommand(f"unknown GPU model {model!r}: no node is registered yet")


def weights_after(cmd: SetGpuModelWeights, policy: Mapping[str, Any], models: Iterable[str]) -> dict[str, float]:
    """The whole weights setting after `cmd`: the recorded weights, with the models it names set."""
    if not cmd.reason.strip():
        raise InvalidCommand("a change of GPU model weights needs a reason")
    require_valid_weights(cmd.weights, models)
    before: Mapping[str, Any] = policy.get(WEIGHTS_SETTING) or {}
    return {**{str(k): float(v) for k, v in before.items()}, **{k: float(v) for k, v in cmd.weights.items()}}


# -- allocations pinned to a cluster (ADR 0067) ------------------------------------------------------------

NO_CLUSTER = ""
"""A cluster name no node has (`cluster_name` never returns it): the clusters of a job that accepts none."""


def effective_pin(name: str, parents: Mapping[str, str], pins: Mapping[str, str]) -> str:
    """ADR 0067: the cluster an allocation is pinned to: its own pin, else its nearest pinned ancestor's
    (`parents`: node -> parent; `pins`: node -> its own pin); "" when none is pinned. A pin holds for the
    whole subtree: a lab's own hardware is its teams' too."""
    return nearest_pin(name, lambda node: (pins.get(node, ""), parents.get(node)))


def nearest_pin(name: str, step: Callable[[str], tuple[str | None, str | None]]) -> str:
    """`effective_pin` over any tree: `step(node)` gives the node's own pin and its parent (None above the
    root or for an unknown node); walks up at most 64 levels."""
    seen = 0
    node: str | None = name
    while node is not None and seen <= 64:
        pin, parent = step(node)
        if pin:
            return pin
        node = parent
        seen += 1
    return ""


def pinned_clusters(clusters: Sequence[str], pin: str) -> tuple[str, ...]:
    """ADR 0067: the clusters a job of an allocation pinned to `pin` may run on: the pin alone when the job
    accepts it (or any cluster), none (`NO_CLUSTER`) when the job names only others; unchanged when unpinned.
    The one rule the ledger, the policy's routing and the books read (with `admits`)."""
    if not pin:
        return tuple(clusters)
    return (pin,) if not clusters or pin in clusters else (NO_CLUSTER,)


def pin_conflict(project: str, pin: str, clusters: Sequence[str]) -> str | None:
    """Why a job of `project`, pinned to `pin`, asking for `clusters`, can never be placed (None if it can)."""
    if pin and clusters and pin not in clusters:
        asked = ", ".join(clusters)
        return (f"allocation {project!r} is pinned to cluster {pin!r} (its jobs run only there), but the job "
                f"asks for cluster{'s' if len(clusters) > 1 else ''} {asked}: ask for {pin!r} or for no cluster")
    return None
