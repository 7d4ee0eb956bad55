"""Scenarios: a scenario YAML (cluster, allocation tree, policy settings) plus a generic trace CSV.

The format is ../shared/data/scenarios/README.md. Everything is validated before anything runs; a bad
file is refused with a `ScenarioError` whose one-line message names the file and the line (CSV) or
the node (YAML), so a person can fix it without reading a traceback.

`--set KEY=VALUE` overrides (the what-if) are applied to the parsed YAML *before* validation, so an
override that breaks the tree is refused the same way a bad file is.
"""

from __future__ import annotations

import csv
import itertools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from steward.domain import budget, org_tree
from steward.domain.clusters import MAX_NODE_GPUS, effective_pin, largest_gang, pin_conflict, pinned_clusters
from steward.domain.ids import id_problem
from steward.sim.errors import OverrideError, ScenarioError, not_utf8

JOB_CLASSES = ("debug", "batch", "interactive")
REQUIRED_COLUMNS = (
    "job_id", "submit_s", "duration_s", "gpus", "tenant", "class", "min_runtime_s", "resumable",
)
OPTIONAL_COLUMNS = ("priority", "gpu_models", "clusters")  # the last two: "|"-separated names (empty: any)
DEFAULT_GPU_MODEL = "generic"  # a cluster that names no model (as `steward node register` without --gpu-model)

TOP_LEVEL_KEYS = frozenset({"name", "trace", "cluster", "clusters", "gpu_models", "policy", "tree", "metrics", "sim"})
# `executor`: the live stack's executor of the cluster (`steward cluster apply`, ADR 0068); the simulator runs every
# node itself and ignores it. One parser for the simulator, the what-if and `steward tree/cluster apply`: the same
# file names the same nodes and allocations everywhere.
CLUSTER_KEYS = frozenset({"nodes", "gpus_per_node", "gpu_model", "topology", "executor"})
TOPOLOGY_KEYS = frozenset({"levels"})
NODE_KEYS = frozenset({"name", "gpus", "gpu_model", "path"})
# `name` (a display name, ADR 0055) is for `steward tree apply`, which reads the same file; the simulator ignores it
TREE_NODE_KEYS = frozenset({"share", "children", "debug_quota", "pin", "name"})
METRICS_KEYS = frozenset({"large_job_gpus", "owed_period_days"})
SIM_KEYS = frozenset({"max_jobs", "cycle_interval_s", "exact", "priority_by_class", "max_cycles_per_job"})
DEFAULT_MAX_CYCLES_PER_JOB = 200.0
# What a scenario may ask of the simulator, which builds every node and keeps hourly books over the trace's span:
# a cluster of at most this many nodes; a duration or protection, and the span from the first submit to the last,
# of at most ten years; a submit time of at most 1e13 s (an outside trace keeps its epoch: seconds are ~1.7e9,
# milliseconds read as seconds ~1.7e12, and the books begin at the first submit's owed period)
MAX_SCENARIO_NODES = 100_000
MAX_TRACE_S = 10 * 365 * 86_400.0
MAX_SUBMIT_S = 1e13
MAX_CYCLE_INTERVAL_S = 86_400.0  # a scheduler that decides less than once a day is not one the simulator models
"""The storm cut-off (`SimOptions.max_cycles_per_job`): a run needs 1-5 cycles per job on every shape measured
(docs/results.md), so 200 is a policy that preempts in a loop, not a busy trace."""


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One row of the generic trace."""

    job_id: str
    submit_s: float
    duration_s: float
    gpus: int
    tenant: str
    job_class: str
    min_runtime_s: float
    resumable: bool
    priority: int = 0
    line: int = 0
    gpu_models: tuple[str, ...] = ()  # the GPU models and clusters it accepts (ADR 0057; empty: any)
    clusters: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    gpus: int
    gpu_model: str
    path: tuple[str, ...]
    cluster: str = "default"
    executor: str = ""
    """The executor that runs its jobs on the live stack (its cluster's `executor:`, ADR 0068; "": the one
    `steward cluster apply` is given). The simulator runs every node itself."""


@dataclass(frozen=True, slots=True)
class AllocationSpec:
    """One node of the allocation tree. `parent` is None under the cluster root."""

    name: str
    parent: str | None
    share: float
    entitlement: float
    depth: int
    children: tuple[str, ...]
    debug_quota: int | None = None
    """The manager-set debug quota (whole GPUs >= 0, `org_tree.debug_quota_problem`); None: the default (ADR 0029)."""
    pin: str = ""
    """The cluster this node's subtree runs on ("": none; ADR 0067), its own pin as written."""
    display_name: str | None = None
    """What people call it (`name:`, ADR 0055; `steward tree apply` records it, the simulator ignores it)."""

    @property
    def is_project(self) -> bool:
        return not self.children


@dataclass(frozen=True, slots=True)
class ScenarioPolicy:
    """The scenario's `policy:` section. Unknown keys are refused."""

    window_days: float = 7.0
    half_life_days: float | None = None
    max_min_runtime_s: float = 8 * 3600.0
    session_cap_s: float = 8 * 3600.0
    checkpoint_interval_s: float = 1800.0
    restart_overhead_s: float = 60.0
    preemption_grace_s: float = 120.0


POLICY_KEYS = frozenset(ScenarioPolicy.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class MetricsSpec:
    large_job_gpus: int = 32
    owed_period_days: float = 30.0


@dataclass(frozen=True)
class SimOptions:
    """The optional `sim:` section: a job limit (first N by submit time), a minimum spacing of cycles
    (0: a cycle at every schedulable moment), and `exact` (no trimming of the queue handed to the
    cycle, no skipped arrivals; slower, for checking that trimming changes no decision)."""

    max_jobs: int | None = None
    cycle_interval_s: float = 0.0
    exact: bool = False
    priority_by_class: Mapping[str, int] = field(default_factory=dict)
    """Added to a job's priority by class: a submission-side what-if ("debug jobs marked urgent
    inside their project"); priority only orders jobs inside one project."""
    max_cycles_per_job: float | None = DEFAULT_MAX_CYCLES_PER_JOB
    """The storm cut-off: a run stops after this many cycles per job of the trace (at least 1,000
    cycles) and reports `cut_off` with its figures up to that instant; `null` runs to the end
    whatever it costs. A policy that preempts in a loop makes a cycle at every grace end, and its
    run would otherwise take hours (docs/results.md "The tiresias baseline")."""


@dataclass(frozen=True)
class Scenario:
    name: str
    source: str
    trace_path: str
    nodes: tuple[NodeSpec, ...]
    allocations: Mapping[str, AllocationSpec]
    policy: ScenarioPolicy
    metrics: MetricsSpec
    sim: SimOptions
    jobs: tuple[TraceJob, ...]
    settings_overrides: Mapping[str, Any] = field(default_factory=dict)

    @property
    def capacity(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def projects(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.allocations.values() if a.is_project)


# --------------------------------------------------------------------------------------------- YAML


class _StringKeyLoader(yaml.SafeLoader):
    """A safe loader whose mapping keys stay the text written (`103959` is a tenant, not an int)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else loader.construct_object(key_node)
        if key in out:
            line = key_node.start_mark.line + 1
            raise ScenarioError(f"line {line}: duplicate key {key!r}")
        out[key] = loader.construct_object(value_node, deep=True)
    return out


_StringKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
# PyYAML reads YAML 1.1, where a float needs a dot: `checkpoint_interval_s: 1e-6` or `--set window_days=1e3` was the
# text '1e-6' and refused as "expected a number"; YAML 1.2 (and JSON, and every other tool) reads a number there
_EXPONENT_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
_StringKeyLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789"))


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise not_utf8(path.name, exc) from None
    try:
        data = yaml.load(text, Loader=_StringKeyLoader)
    except ScenarioError as exc:
        raise ScenarioError(f"{path.name}: {exc.message}") from None
    except RecursionError:
        raise ScenarioError(f"{path.name}: nested too deeply to read (an allocation tree is at most 8 levels "
                            "deep)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(f"{path.name}{where}: not valid YAML ({problem})") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{path.name}: a scenario is a YAML mapping (name, trace, cluster, tree, ...)")
    return data


def _unknown_keys(where: str, got: Mapping[str, Any], known: Iterable[str]) -> None:
    extra = sorted(str(k) for k in got if k not in set(known))
    if extra:
        raise ScenarioError(f"{where}: unknown field {extra[0]!r} (known: {', '.join(sorted(known))})")


def _number(where: str, value: Any, *, minimum: float | None = 0.0, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(f"{where}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise ScenarioError(f"{where}: expected a finite number, got {value!r}")
    if integer and float(value) != int(value):
        raise ScenarioError(f"{where}: expected a whole number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ScenarioError(f"{where}: must be >= {minimum:g}, got {value!r}")
    return float(value)


def _node_gpus(where: str, value: Any) -> int:
    """A node's GPUs: a whole number from 1 to the ledger's bound (ADR 0082), so a file the simulator runs is one
    `steward cluster apply` registers (and no node's count sizes the placement index beyond it)."""
    gpus = int(_number(where, value, minimum=1, integer=True))
    if gpus > MAX_NODE_GPUS:
        raise ScenarioError(f"{where}: a node has at most {MAX_NODE_GPUS:,} GPUs, got {gpus:,}")
    return gpus


def _model_name(where: str, value: Any) -> str:
    """A GPU model's name is text (`H100`): a list or a mapping written there is refused, not registered as its
    Python spelling."""
    if isinstance(value, bool) or not isinstance(value, str | int | float) or not str(value).strip():
        raise ScenarioError(f"{where}: expected a GPU model name, got {value!r}")
    return str(value).strip()


def check_top_level(fname: str, raw: Mapping[str, Any], known: Iterable[str] = TOP_LEVEL_KEYS) -> None:
    """The sections of a scenario file (`name`, `cluster`, `tree`, ...): one misspelt is named, never skipped, by
    the simulator and by `steward tree apply` / `cluster apply` alike."""
    _unknown_keys(fname, raw, known)


def _mapping(where: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ScenarioError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _parse_cluster(fname: str, raw: Any, label: str = "cluster") -> tuple[NodeSpec, ...]:
    where = f"{fname}: {label}"
    cluster = _mapping(where, raw)
    if not cluster:
        raise ScenarioError(f"{where}: missing (nodes, gpus_per_node)")
    _unknown_keys(where, cluster, CLUSTER_KEYS)
    model = _model_name(f"{where}.gpu_model", cluster.get("gpu_model", DEFAULT_GPU_MODEL))
    executor = cluster.get("executor", "")
    if not isinstance(executor, str) or (not executor and "executor" in cluster):
        raise ScenarioError(f"{where}.executor: expected the id of the executor that runs its nodes' jobs, "
                            f"got {executor!r}")
    nodes_raw = cluster.get("nodes")
    if isinstance(nodes_raw, list):
        return tuple(replace(n, executor=executor) for n in _explicit_nodes(where, nodes_raw, model))
    count = int(_number(f"{where}.nodes", nodes_raw, minimum=1, integer=True))
    if count > MAX_SCENARIO_NODES:
        raise ScenarioError(f"{where}.nodes: a cluster has at most {MAX_SCENARIO_NODES:,} nodes, got {count:,}")
    per_node = _node_gpus(f"{where}.gpus_per_node", cluster.get("gpus_per_node"))
    topo = _mapping(f"{where}.topology", cluster.get("topology"))
    # `nodes_per_block` alone: blocks of nodes (the short form `steward cluster apply` has always read)
    levels_raw = topo.get("levels", ["block", "node"] if "nodes_per_block" in topo else ["node"])
    if not isinstance(levels_raw, list) or not levels_raw or not all(isinstance(x, str) for x in levels_raw):
        raise ScenarioError(f"{where}.topology.levels: expected a list of level names ending with the node")
    levels: list[str] = levels_raw
    group_keys = {f"nodes_per_{lvl}" for lvl in levels[:-1]}
    _unknown_keys(f"{where}.topology", topo, TOPOLOGY_KEYS | group_keys)
    sizes: list[int] = []
    for lvl in levels[:-1]:
        key = f"nodes_per_{lvl}"
        if key not in topo:
            raise ScenarioError(f"{where}.topology: missing {key} (how many nodes one {lvl} holds)")
        sizes.append(int(_number(f"{where}.topology.{key}", topo[key], minimum=1, integer=True)))
    if any(b > a for a, b in itertools.pairwise(sizes)):
        raise ScenarioError(f"{where}.topology: an inner level cannot hold more nodes than its parent level")
    nodes = []
    width = max(3, len(str(count - 1)))
    for i in range(count):
        path = tuple(f"{lvl}{i // size}" for lvl, size in zip(levels[:-1], sizes, strict=True))
        name = f"{levels[-1]}{i:0{width}d}"
        nodes.append(NodeSpec(name=name, gpus=per_node, gpu_model=model, path=(*path, name), executor=executor))
    return tuple(nodes)


def parse_clusters(fname: str, raw: Mapping[str, Any]) -> tuple[NodeSpec, ...]:
    """`cluster:` (one cluster, "default") or `clusters:` (name -> the same fields as `cluster:`; ADR 0057).
    Each cluster's nodes are named and placed under the cluster's name (`ceres-node000`, path `ceres/...`),
    so no topology domain spans two clusters."""
    if "clusters" not in raw:
        return _parse_cluster(fname, raw.get("cluster"))
    if "cluster" in raw:
        raise ScenarioError(f"{fname}: give either cluster (one) or clusters (several), not both")
    named = _mapping(f"{fname}: clusters", raw.get("clusters"))
    if not named:
        raise ScenarioError(f"{fname}: clusters: name at least one cluster")
    out: list[NodeSpec] = []
    for cname, spec in named.items():
        problem = id_problem(cname)
        if problem is not None:
            raise ScenarioError(f"{fname}: clusters: the name {cname!r} {problem}")
        for n in _parse_cluster(fname, spec, label=f"clusters.{cname}"):
            name = f"{cname}-{n.name}"
            out.append(NodeSpec(name=name, gpus=n.gpus, gpu_model=n.gpu_model, path=(cname, *n.path[:-1], name),
                                cluster=cname, executor=n.executor))
    return tuple(out)


def parse_weights(fname: str, raw: Any, nodes: tuple[NodeSpec, ...]) -> dict[str, float]:
    """`gpu_models:` model -> weight (budget units per GPU-hour; ADR 0057), each a registered model, > 0."""
    weights = _mapping(f"{fname}: gpu_models", raw)
    known = {n.gpu_model for n in nodes}
    out: dict[str, float] = {}
    for model, w in weights.items():
        if model not in known:
            raise ScenarioError(f"{fname}: gpu_models: no node has the model {model!r} "
                                f"(the scenario has {', '.join(sorted(known))})")
        value = _number(f"{fname}: gpu_models.{model}", w)
        if value <= 0:
            raise ScenarioError(f"{fname}: gpu_models.{model}: a weight must be > 0, got {w!r}")
        out[str(model)] = value
    return out


def _explicit_nodes(where: str, raw: list[Any], model: str) -> tuple[NodeSpec, ...]:
    nodes: list[NodeSpec] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        w = f"{where}.nodes[{i}]"
        entry = _mapping(w, item)
        _unknown_keys(w, entry, NODE_KEYS)
        name = str(entry.get("name", f"node{i:03d}"))
        if name in seen:
            raise ScenarioError(f"{w}: duplicate node name {name!r}")
        seen.add(name)
        gpus = _node_gpus(f"{w}.gpus", entry.get("gpus"))
        path_raw = entry.get("path", [])
        if isinstance(path_raw, str):
            path_raw = [p for p in path_raw.split("/") if p]
        if not isinstance(path_raw, list):
            raise ScenarioError(f"{w}.path: expected a list or a 'block/node' string")
        path = tuple(str(p) for p in path_raw)
        if not path or path[-1] != name:
            path = (*path, name)
        gpu_model = _model_name(f"{w}.gpu_model", entry.get("gpu_model", model))
        nodes.append(NodeSpec(name=name, gpus=gpus, gpu_model=gpu_model, path=path))
    if not nodes:
        raise ScenarioError(f"{where}.nodes: the cluster has no nodes")
    return tuple(nodes)


def _debug_quota(where: str, raw: Any) -> int | None:
    if raw is None:
        return None
    problem = org_tree.debug_quota_problem(raw)
    if problem is not None:
        raise ScenarioError(f"{where}: debug_quota {problem}, got {raw!r}")
    return int(raw)


def parse_tree(fname: str, raw: Any) -> dict[str, AllocationSpec]:
    """Validate the allocation tree and compute entitlements (product of shares along the path)."""
    top = _mapping(f"{fname}: tree", raw)
    out: dict[str, AllocationSpec] = {}

    def walk(parent: str | None, children: Mapping[str, Any], where: str, depth: int) -> None:
        if depth > org_tree.MAX_TREE_DEPTH:
            raise ScenarioError(f"{where}: the tree is deeper than {org_tree.MAX_TREE_DEPTH} levels")
        total = 0.0
        pending: list[tuple[str, float, Mapping[str, Any], str, int | None, str, str | None]] = []
        for name, value in children.items():
            here = f"{where}.{name}" if where != f"{fname}: tree" else f"{fname}: tree.{name}"
            if not isinstance(name, str) or not name.strip():
                raise ScenarioError(f"{here}: a node needs a non-empty name")
            if name in out or any(p[0] == name for p in pending):
                raise ScenarioError(f"{here}: node {name!r} appears twice in the tree")
            if isinstance(value, dict):
                _unknown_keys(here, value, TREE_NODE_KEYS)
                if "share" not in value:
                    raise ScenarioError(f"{here}: missing share")
                share_raw: Any = value["share"]
                grand = _mapping(f"{here}.children", value.get("children"))
                quota = _debug_quota(here, value.get("debug_quota"))
                pin = _pin(here, value.get("pin"))
                shown_as = value.get("name")
                if shown_as is not None and not isinstance(shown_as, str):
                    raise ScenarioError(f"{here}: name (what people call it) must be text, got {shown_as!r}")
            else:
                share_raw, grand, quota, pin, shown_as = value, {}, None, "", None
            share = _number(f"{here}: share", share_raw, minimum=None)
            if not org_tree.share_in_unit_interval(share):
                raise ScenarioError(f"{here}: share {share:g} is not in [0, 1]")
            total += share
            pending.append((name, share, grand, here, quota, pin, shown_as))
        if not org_tree.children_shares_fit(total):
            owner = "the cluster" if parent is None else repr(parent)
            raise ScenarioError(f"{where}: the shares of {owner}'s children sum to {total:g} > 1")
        for name, share, kids, here, quota, pin, shown_as in pending:
            out[name] = AllocationSpec(
                name=name, parent=parent, share=share, entitlement=0.0, depth=depth,
                children=tuple(str(k) for k in kids), debug_quota=quota, pin=pin, display_name=shown_as,
            )
            if kids:
                walk(name, kids, f"{here}.children", depth + 1)

    walk(None, top, f"{fname}: tree", 1)
    if not out:
        raise ScenarioError(f"{fname}: tree: no allocations (every job would run unfunded)")
    # the entitlements are steward.domain.budget's (the ledger's, the API's and the scheduler's rule)
    root = "\x00root"
    ents = budget.entitlements({n: (a.parent if a.parent is not None else root, a.share) for n, a in out.items()},
                               root=root)
    return {n: replace(a, entitlement=ents[n]) for n, a in out.items()}


def _pin(where: str, raw: Any) -> str:
    """A tree node's `pin:` (ADR 0067): a cluster's name, or absent / empty for none."""
    if raw is None or raw == "":
        return ""
    if not isinstance(raw, str):
        raise ScenarioError(f"{where}: pin must be a cluster's name, got {raw!r}")
    problem = id_problem(raw)
    if problem is not None:
        raise ScenarioError(f"{where}: pin: the cluster name {raw!r} {problem}")
    return raw


def scenario_pins(allocations: Mapping[str, AllocationSpec]) -> dict[str, str]:
    """Each tree node's effective pin (its own or its nearest pinned ancestor's, `clusters.effective_pin`);
    only pinned nodes are in it."""
    parents = {n: a.parent for n, a in allocations.items() if a.parent is not None}
    own = {n: a.pin for n, a in allocations.items() if a.pin}
    if not own:
        return {}
    return {n: pin for n in allocations if (pin := effective_pin(n, parents, own))}


def _check_pins(fname: str, allocations: Mapping[str, AllocationSpec], nodes: tuple[NodeSpec, ...]) -> None:
    """The ledger's rules for pins (`domain.pins.require_valid_pins`), on a scenario's tree: a pin names one
    of the scenario's clusters, and a subtree runs on one cluster (a node under a pinned one is pinned to
    the same cluster or not at all)."""
    known = sorted({n.cluster for n in nodes})
    for name, a in allocations.items():
        if not a.pin:
            continue
        if a.pin not in known:
            raise ScenarioError(f"{fname}: tree.{name}: pin: unknown cluster {a.pin!r}; the scenario's clusters "
                                f"are {', '.join(known)}")
        up = a.parent
        while up is not None:
            above = allocations[up]
            if above.pin and above.pin != a.pin:
                raise ScenarioError(f"{fname}: tree.{name}: pin: {up!r} is pinned to cluster {above.pin!r}, so "
                                    f"its subtree runs only there; {name!r} cannot be pinned to {a.pin!r}")
            up = above.parent


def _parse_policy(fname: str, raw: Any) -> ScenarioPolicy:
    where = f"{fname}: policy"
    section = _mapping(where, raw)
    _unknown_keys(where, section, POLICY_KEYS)
    values: dict[str, Any] = {}
    for key, value in section.items():
        if key == "half_life_days" and value is None:
            values[key] = None
            continue
        values[key] = _number(f"{where}.{key}", value, minimum=0.0)
    policy = ScenarioPolicy(**values)
    if policy.window_days <= 0:
        raise ScenarioError(f"{where}.window_days: must be > 0")
    if policy.checkpoint_interval_s <= 0:
        raise ScenarioError(f"{where}.checkpoint_interval_s: must be > 0")
    return policy


def _parse_metrics(fname: str, raw: Any) -> MetricsSpec:
    where = f"{fname}: metrics"
    section = _mapping(where, raw)
    _unknown_keys(where, section, METRICS_KEYS)
    large = int(_number(f"{where}.large_job_gpus", section.get("large_job_gpus", 32), minimum=1, integer=True))
    period = _number(f"{where}.owed_period_days", section.get("owed_period_days", 30.0), minimum=0.0)
    if period <= 0:
        raise ScenarioError(f"{where}.owed_period_days: must be > 0")
    return MetricsSpec(large_job_gpus=large, owed_period_days=period)


def _parse_sim(fname: str, raw: Any) -> SimOptions:
    where = f"{fname}: sim"
    section = _mapping(where, raw)
    _unknown_keys(where, section, SIM_KEYS)
    max_jobs_raw = section.get("max_jobs")
    max_jobs = None if max_jobs_raw is None else int(
        _number(f"{where}.max_jobs", max_jobs_raw, minimum=1, integer=True))
    interval = _number(f"{where}.cycle_interval_s", section.get("cycle_interval_s", 0.0), minimum=0.0)
    if interval > MAX_CYCLE_INTERVAL_S:  # the run's span, and its hourly books, grow with it (one cycle in 31 years
        # ran out of memory)
        raise ScenarioError(f"{where}.cycle_interval_s: at most {MAX_CYCLE_INTERVAL_S:,.0f} s (a day), got "
                            f"{interval:g}")
    exact = section.get("exact", False)
    if not isinstance(exact, bool):
        raise ScenarioError(f"{where}.exact: expected true or false, got {exact!r}")
    bonus_raw = _mapping(f"{where}.priority_by_class", section.get("priority_by_class"))
    _unknown_keys(f"{where}.priority_by_class", bonus_raw, JOB_CLASSES)
    bonus = {k: int(_number(f"{where}.priority_by_class.{k}", v, minimum=None, integer=True))
             for k, v in bonus_raw.items()}
    limit_raw = section.get("max_cycles_per_job", DEFAULT_MAX_CYCLES_PER_JOB)
    limit = None if limit_raw is None else _number(f"{where}.max_cycles_per_job", limit_raw, minimum=0.0)
    if limit is not None and limit <= 0:
        raise ScenarioError(f"{where}.max_cycles_per_job: must be > 0, or null for no cut-off")
    return SimOptions(max_jobs=max_jobs, cycle_interval_s=interval, exact=exact, priority_by_class=bonus,
                      max_cycles_per_job=limit)


# ---------------------------------------------------------------------------------------------- CSV


def _bool_cell(value: str) -> bool | None:
    v = value.strip().lower()
    if v in ("1", "true", "yes"):
        return True
    if v in ("0", "false", "no"):
        return False
    return None


def read_trace(
    path: Path,
    allocations: Mapping[str, AllocationSpec],
    nodes: tuple[NodeSpec, ...],
    max_jobs: int | None = None,
) -> tuple[TraceJob, ...]:
    """Read and validate a generic trace CSV; jobs come back sorted by (submit_s, line)."""
    fname = path.name
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read trace ({exc.strerror or exc})") from None
    capacity = sum(n.gpus for n in nodes)
    per_node = max(n.gpus for n in nodes)
    jobs: list[TraceJob] = []
    seen: set[str] = set()
    with handle:
        reader = csv.reader(utf8_lines(fname, handle))
        header = next(reader, None)
        if header is None:
            raise ScenarioError(f"{fname} line 1: empty trace, expected a header row")
        header = [h.strip() for h in header]
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise ScenarioError(f"{fname} line 1: missing column(s) {', '.join(missing)}")
        unknown = [c for c in header if c not in REQUIRED_COLUMNS and c not in OPTIONAL_COLUMNS]
        if unknown:
            raise ScenarioError(f"{fname} line 1: unknown column {unknown[0]!r}")
        col = {name: header.index(name) for name in header}
        width = len(header)
        i_id, i_sub, i_dur, i_gpu = col["job_id"], col["submit_s"], col["duration_s"], col["gpus"]
        i_ten, i_cls, i_min, i_res = col["tenant"], col["class"], col["min_runtime_s"], col["resumable"]
        i_pri = col.get("priority")
        i_models, i_clusters = col.get("gpu_models"), col.get("clusters")
        known_models = {n.gpu_model for n in nodes}
        known_clusters = {n.cluster for n in nodes}
        pins = scenario_pins(allocations)
        for row in reader:
            line = reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) != width:
                raise ScenarioError(f"{fname} line {line}: {len(row)} fields, the header has {width}")
            job_id = row[i_id].strip()
            if not job_id:
                raise ScenarioError(f"{fname} line {line}: empty job_id")
            if job_id in seen:
                raise ScenarioError(f"{fname} line {line}: duplicate job_id {job_id!r}")
            seen.add(job_id)
            submit = _float_cell(fname, line, "submit_s", row[i_sub])
            duration = _float_cell(fname, line, "duration_s", row[i_dur])
            min_rt = _float_cell(fname, line, "min_runtime_s", row[i_min])
            gpus_f = _float_cell(fname, line, "gpus", row[i_gpu])
            if gpus_f != int(gpus_f) or gpus_f < 1:
                raise ScenarioError(f"{fname} line {line}: gpus must be a whole number >= 1, got {row[i_gpu]!r}")
            gpus = int(gpus_f)
            models = _names_cell(fname, line, "gpu_models", row, i_models, known_models)
            names = _names_cell(fname, line, "clusters", row, i_clusters, known_clusters)
            pin = pins.get(row[i_ten].strip(), "")
            if (conflict := pin_conflict(row[i_ten].strip(), pin, names)) is not None:
                raise ScenarioError(f"{fname} line {line}: job {job_id}: {conflict}")
            usable = pinned_clusters(names, pin)  # ADR 0067: a pinned allocation's jobs run on its pin only
            if models or usable or len(known_clusters) > 1:
                largest = largest_gang(((n.gpus, n.gpu_model, n.cluster) for n in nodes), models, usable)[0]
                if gpus > largest:
                    where = f" (its allocation is pinned to {pin!r})" if pin else ""
                    raise ScenarioError(f"{fname} line {line}: job {job_id} needs {gpus} GPUs, the largest "
                                        f"placement it accepts (in one cluster{where}) has {largest}")
            elif (gpus > per_node and math.ceil(gpus / per_node) > len(nodes)) or gpus > capacity:
                raise ScenarioError(
                    f"{fname} line {line}: job {job_id} needs {gpus} GPUs, the cluster has {capacity}")
            tenant = row[i_ten].strip()
            if not tenant:
                raise ScenarioError(f"{fname} line {line}: empty tenant")
            alloc = allocations.get(tenant)
            if alloc is not None and not alloc.is_project:
                raise ScenarioError(
                    f"{fname} line {line}: tenant {tenant!r} is an inner node of the tree; "
                    "jobs are submitted by projects (leaves)")
            cls = row[i_cls].strip()
            if cls not in JOB_CLASSES:
                raise ScenarioError(
                    f"{fname} line {line}: class {cls!r} is not one of {', '.join(JOB_CLASSES)}")
            resumable = _bool_cell(row[i_res])
            if resumable is None:
                raise ScenarioError(f"{fname} line {line}: resumable must be 0 or 1, got {row[i_res]!r}")
            priority = 0
            if i_pri is not None and row[i_pri].strip():
                p = _float_cell(fname, line, "priority", row[i_pri], allow_negative=True)
                if p != int(p):
                    raise ScenarioError(f"{fname} line {line}: priority must be a whole number")
                priority = int(p)
            jobs.append(TraceJob(
                job_id=job_id, submit_s=submit, duration_s=duration, gpus=gpus, tenant=tenant,
                job_class=cls, min_runtime_s=min_rt, resumable=resumable, priority=priority, line=line,
                gpu_models=models, clusters=names,
            ))
    if not jobs:
        raise ScenarioError(f"{fname}: the trace has no jobs")
    jobs.sort(key=lambda j: (j.submit_s, j.line))
    first, last = jobs[0], jobs[-1]
    if last.submit_s - first.submit_s > MAX_TRACE_S:
        raise ScenarioError(f"{fname}: the trace spans {(last.submit_s - first.submit_s) / 86_400:,.0f} days (line "
                            f"{first.line} submits at {first.submit_s:g} s, line {last.line} at {last.submit_s:g} "
                            "s), past the simulator's bound of ten years")
    if max_jobs is not None:
        jobs = jobs[:max_jobs]
    return tuple(jobs)


def utf8_lines(fname: str, handle: Iterable[bytes]) -> Iterator[str]:
    """The lines of a file opened in binary, each decoded as UTF-8: a line that is not UTF-8 is named by its number
    (a ScenarioError), not a UnicodeDecodeError out of the reader."""
    for line, raw in enumerate(handle, start=1):
        try:  # a spreadsheet's export starts with a BOM ("utf-8-sig" drops it): it was read into the first header
            yield raw.decode("utf-8-sig" if line == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise not_utf8(f"{fname} line {line}", exc) from None


def _names_cell(fname: str, line: int, column: str, row: list[str], i: int | None,
                known: set[str]) -> tuple[str, ...]:
    """A "|"-separated list of GPU models or clusters a job accepts (ADR 0057); an unknown one is named."""
    if i is None or not row[i].strip():
        return ()
    names = tuple(x.strip() for x in row[i].split("|") if x.strip())
    unknown = [x for x in names if x not in known]
    if unknown:
        raise ScenarioError(f"{fname} line {line}: {column}: unknown {unknown[0]!r} "
                            f"(the scenario has {', '.join(sorted(known))})")
    return names


def _float_cell(fname: str, line: int, column: str, value: str, allow_negative: bool = False) -> float:
    try:
        x = float(value)
    except ValueError:
        raise ScenarioError(f"{fname} line {line}: {column} is not a number: {value!r}") from None
    if not math.isfinite(x):
        raise ScenarioError(f"{fname} line {line}: {column} must be finite, got {value!r}")
    if x < 0 and not allow_negative:
        raise ScenarioError(f"{fname} line {line}: {column} is negative ({value})")
    bound, words = (MAX_SUBMIT_S, "1e13 s") if column == "submit_s" else (MAX_TRACE_S, "ten years")
    if column.endswith("_s") and x > bound:
        raise ScenarioError(f"{fname} line {line}: {column} is past the simulator's bound of {words} "
                            f"({bound:,.0f} s), got {value}")
    return x


# ----------------------------------------------------------------------------------------- overrides


def parse_set_args(items: Iterable[str]) -> dict[str, str]:
    """`["a=1", "share.x=0.2"]` -> `{"a": "1", "share.x": "0.2"}`; refuses items without `=`."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise OverrideError(f"--set {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def _yaml_value(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_StringKeyLoader) if text != "" else None
    except yaml.YAMLError:
        return text


def _find_tree_node(tree: dict[str, Any], name: str) -> tuple[dict[str, Any], str] | None:
    """The mapping that holds `name` (and the key), searching the whole tree."""
    for key, value in tree.items():
        if key == name:
            return tree, key
        if isinstance(value, dict) and isinstance(value.get("children"), dict):
            found = _find_tree_node(value["children"], name)
            if found is not None:
                return found
    return None


def apply_overrides(raw: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Apply what-if overrides to a parsed scenario; returns the policy-settings overrides left over.

    Keys:
      `share.NODE=X`                  the share of allocation NODE (anywhere in the tree)
      `policy.K=V` or bare `K=V`      a scenario policy setting (window_days, max_min_runtime_s, ...)
      `cluster.K`, `metrics.K`, `sim.K`, `max_jobs`, `cycle_interval_s`   those sections
      `settings.K=V` or any other bare key   a policy-settings knob (ordering, reservations, ...)
    """
    settings: dict[str, Any] = {}
    for key, text in overrides.items():
        value = _yaml_value(text) if isinstance(text, str) else text
        head, _, rest = key.partition(".")
        if head == "share" and rest:
            tree = raw.get("tree")
            found = _find_tree_node(tree, rest) if isinstance(tree, dict) else None
            if found is None:
                raise OverrideError(f"--set {key}: no allocation named {rest!r} in the tree")
            holder, k = found
            if isinstance(holder[k], dict):
                holder[k]["share"] = value
            else:
                holder[k] = value
        elif head in ("policy", "cluster", "metrics", "sim") and rest:
            section = raw.setdefault(head, {})
            if not isinstance(section, dict):
                raise OverrideError(f"--set {key}: the scenario's {head} section is not a mapping")
            parts = rest.split(".")
            for part in parts[:-1]:
                section = section.setdefault(part, {})
                if not isinstance(section, dict):
                    raise OverrideError(f"--set {key}: {part} is not a mapping")
            section[parts[-1]] = value
        elif head == "settings" and rest:
            settings[rest] = value
        elif not rest and key in POLICY_KEYS:
            raw.setdefault("policy", {})[key] = value
        elif not rest and key in SIM_KEYS:
            raw.setdefault("sim", {})[key] = value
        elif not rest and key in ("name", "trace"):
            raw[key] = value
        elif not rest:
            settings[key] = value
        else:
            raise OverrideError(
                f"--set {key}: unknown key (use share.NODE, policy.KEY, cluster.KEY, metrics.KEY, "
                "sim.KEY or settings.KEY)")
    return settings


# ------------------------------------------------------------------------------------------- loading


def load_scenario(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Scenario:
    """Parse, override and validate a scenario YAML and its trace. Raises `ScenarioError`."""
    p = Path(path)
    raw = read_yaml(p)
    settings = apply_overrides(raw, overrides or {})
    return scenario_from_mapping(raw, p, settings)


def scenario_from_mapping(
    raw: dict[str, Any], source: Path, settings_overrides: Mapping[str, Any] | None = None,
    trace: Path | None = None,
) -> Scenario:
    fname = source.name
    check_top_level(fname, raw)
    name = _scenario_name(fname, raw.get("name"), source)
    nodes = parse_clusters(fname, raw)
    settings_overrides = _with_weights(fname, raw, nodes, settings_overrides)
    allocations = parse_tree(fname, raw.get("tree"))
    _check_pins(fname, allocations, nodes)
    policy = _parse_policy(fname, raw.get("policy"))
    metrics = _parse_metrics(fname, raw.get("metrics"))
    sim = _parse_sim(fname, raw.get("sim"))
    if trace is None:
        trace_rel = raw.get("trace")
        if trace_rel is not None and not isinstance(trace_rel, str):
            raise ScenarioError(f"{fname}: trace: expected the path of the trace CSV, got {trace_rel!r}")
        if not trace_rel or not trace_rel.strip():
            raise ScenarioError(f"{fname}: trace: missing (path of the trace CSV, relative to the YAML)")
        trace = (source.parent / trace_rel.strip()).resolve()
    jobs = read_trace(trace, allocations, nodes, sim.max_jobs)
    return Scenario(
        name=name, source=str(source), trace_path=str(trace), nodes=nodes, allocations=allocations,
        policy=policy, metrics=metrics, sim=sim, jobs=jobs, settings_overrides=dict(settings_overrides or {}),
    )


def _scenario_name(fname: str, value: Any, source: Path) -> str:
    """The scenario's `name:` (text; the file's stem when absent), shown in every table and file it writes."""
    if value is None or value == "":
        return source.stem
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ScenarioError(f"{fname}: name: expected text, got {value!r}")
    return str(value)


def _with_weights(fname: str, raw: Mapping[str, Any], nodes: tuple[NodeSpec, ...],
                  settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The scenario's GPU model weights as the policy setting `gpu_model_weights` (an override of the
    setting itself, `--set gpu_model_weights=...`, wins)."""
    out = dict(settings or {})
    weights = parse_weights(fname, raw.get("gpu_models"), nodes)
    if weights and "gpu_model_weights" not in out:
        out["gpu_model_weights"] = weights
    return out


def scenario_from_jobs(
    raw: dict[str, Any], source: Path, jobs: Iterable[TraceJob], settings_overrides: Mapping[str, Any] | None = None,
) -> Scenario:
    """A scenario whose jobs come from somewhere other than a trace CSV (an exported event log,
    history.py); `job.line` is the source line each job came from, named in errors."""
    fname = source.name
    check_top_level(fname, raw, TOP_LEVEL_KEYS - {"trace"})
    name = _scenario_name(fname, raw.get("name"), source)
    nodes = parse_clusters(fname, raw)
    settings_overrides = _with_weights(fname, raw, nodes, settings_overrides)
    allocations = parse_tree(fname, raw.get("tree"))
    _check_pins(fname, allocations, nodes)
    policy = _parse_policy(fname, raw.get("policy"))
    metrics = _parse_metrics(fname, raw.get("metrics"))
    sim = _parse_sim(fname, raw.get("sim"))
    capacity = sum(n.gpus for n in nodes)
    per_node = max(n.gpus for n in nodes)
    out = sorted(jobs, key=lambda j: (j.submit_s, j.line))
    for job in out:
        where = f"{fname} line {job.line}"
        alloc = allocations.get(job.tenant)
        if alloc is not None and not alloc.is_project:
            raise ScenarioError(f"{where}: tenant {job.tenant!r} is an inner node of the tree; "
                                "jobs are submitted by projects (leaves)")
        if job.gpus < 1:  # the trace CSV's rules (read_trace); here InvalidJob escaped as an internal error
            raise ScenarioError(f"{where}: job {job.job_id}: gpus must be a whole number >= 1, got {job.gpus}")
        if job.min_runtime_s < 0:
            raise ScenarioError(f"{where}: job {job.job_id}: min_runtime_s is negative ({job.min_runtime_s:g})")
        if (job.gpus > per_node and math.ceil(job.gpus / per_node) > len(nodes)) or job.gpus > capacity:
            raise ScenarioError(f"{where}: job {job.job_id} needs {job.gpus} GPUs, the cluster has {capacity}")
    if not out:
        raise ScenarioError(f"{fname}: no job in the history ran (nothing to replay)")
    if sim.max_jobs is not None:
        out = out[: sim.max_jobs]
    return Scenario(
        name=name, source=str(source), trace_path=str(source), nodes=nodes, allocations=allocations,
        policy=policy, metrics=metrics, sim=sim, jobs=tuple(out), settings_overrides=dict(settings_overrides or {}),
    )

