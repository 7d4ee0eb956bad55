"""Topology input (DESIGN.md "Placement": "a topology path ... as published by NVIDIA Topograph in
Slurm `topology.conf` tree/block form or Kubernetes labels"), normalised into node paths.

A node path lists the enclosing domains outermost first, the node itself not included.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from steward.policy.errors import TopologyError
from steward.policy.model import Node


@dataclass(frozen=True, slots=True)
class Topology:
    """Paths per node name and the names of the path levels (outermost first)."""

    paths: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    levels: tuple[str, ...] = ()

    def apply(self, nodes: Iterable[Node]) -> tuple[Node, ...]:
        """The nodes with their paths set from this topology (nodes it does not name keep theirs)."""
        return tuple(replace(n, path=self.paths[n.id]) if n.id in self.paths else n for n in nodes)


# --- hostlists ---------------------------------------------------------------------------------------

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top_level(expr: str, where: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in expr:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise TopologyError(where, f"nested brackets in hostlist {expr!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise TopologyError(where, f"unbalanced ']' in hostlist {expr!r}")
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth != 0:
        raise TopologyError(where, f"unbalanced '[' in hostlist {expr!r}")
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _expand_brackets(ranges: str, where: str) -> list[str]:
    out: list[str] = []
    for item in ranges.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise TopologyError(where, f"bad range {item!r} in hostlist")
        lo_s, hi_s = m.group(1), m.group(2) or m.group(1)
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise TopologyError(where, f"range {item!r} runs backwards")
        width = len(lo_s) if lo_s.startswith("0") or len(lo_s) == len(hi_s) else 0
        out.extend(str(i).zfill(width) for i in range(lo, hi + 1))
    return out


def expand_hostlist(expr: str, where: str = "hostlist") -> list[str]:
    """Slurm hostlist expansion: `node[01-03,07],gpu-a[1-2]b[1-2]` → node01, node02, node03, node07,
    gpu-a1b1, gpu-a1b2, gpu-a2b1, gpu-a2b2 (zero padding kept, several bracket groups multiply)."""
    names: list[str] = []
    for part in _split_top_level(expr, where):
        expansions = [""]
        for piece in re.split(r"(\[[^\]]*\])", part):
            if piece.startswith("["):
                options = _expand_brackets(piece[1:-1], where)
                expansions = [e + o for e in expansions for o in options]
            elif piece:
                expansions = [e + piece for e in expansions]
        names.extend(expansions)
    return names


# --- Slurm topology.conf -----------------------------------------------------------------------------


def _conf_lines(text: str) -> Iterable[tuple[int, dict[str, str]]]:
    """(line number, {lowercase key: value}) for every non-empty line, comments removed."""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields: dict[str, str] = {}
        for token in line.split():
            if "=" not in token:
                raise TopologyError(f"line {number}", f"expected Key=Value, got {token!r}")
            key, value = token.split("=", 1)
            fields[key.lower()] = value
        yield number, fields


def _tree_level_names(depth: int) -> tuple[str, ...]:
    names = ("core", "spine", "leaf")
    if depth <= len(names):
        return names[len(names) - depth :]
    return tuple(f"tier-{i}" for i in range(depth - 1, -1, -1))


def parse_slurm_tree(text: str) -> Topology:
    """Slurm `topology.conf`, tree form (topology/tree):

        SwitchName=leaf1 Nodes=node[01-08]
        SwitchName=spine1 Switches=leaf[1-2]

    Each node's path is its switches from the top switch down to its leaf switch."""
    switch_nodes: dict[str, list[str]] = {}
    switch_parent: dict[str, str] = {}
    switch_line: dict[str, int] = {}
    children: dict[str, list[str]] = {}
    for number, fields in _conf_lines(text):
        where = f"line {number}"
        if "switchname" not in fields:
            raise TopologyError(where, "tree form needs SwitchName= on every line")
        name = fields["switchname"]
        if name in switch_line:
            raise TopologyError(where, f"switch {name!r} defined twice (first on line {switch_line[name]})")
        switch_line[name] = number
        if "nodes" in fields:
            switch_nodes[name] = expand_hostlist(fields["nodes"], where)
        if "switches" in fields:
            children[name] = expand_hostlist(fields["switches"], where)
    for parent, kids in children.items():
        for kid in kids:
            if kid not in switch_line:
                raise TopologyError(f"line {switch_line[parent]}", f"switch {parent!r} names unknown switch {kid!r}")
            if kid in switch_parent:
                raise TopologyError(
                    f"line {switch_line[parent]}",
                    f"switch {kid!r} has two parents ({switch_parent[kid]!r} and {parent!r})",
                )
            switch_parent[kid] = parent

    def switch_path(sw: str) -> tuple[str, ...]:
        chain = [sw]
        seen = {sw}
        while chain[-1] in switch_parent:
            up = switch_parent[chain[-1]]
            if up in seen:
                raise TopologyError(f"line {switch_line[sw]}", f"switch {sw!r} is inside a loop")
            seen.add(up)
            chain.append(up)
        return tuple(reversed(chain))

    paths: dict[str, tuple[str, ...]] = {}
    for sw, nodes in switch_nodes.items():
        p = switch_path(sw)
        for node in nodes:
            if node in paths:
                raise TopologyError(f"line {switch_line[sw]}", f"node {node!r} is under two leaf switches")
            paths[node] = p
    depth = max((len(p) for p in paths.values()), default=0)
    return Topology(MappingProxyType(paths), _tree_level_names(depth))


def parse_slurm_block(text: str) -> Topology:
    """Slurm `topology.conf`, block form (topology/block):

        BlockName=block1 Nodes=node[01-18]
        BlockSizes=4,16

    Each node's path is its block. `BlockSizes` is accepted (and ignored: aggregated blocks are
    formed by the scheduler from adjacent blocks, which the path cannot express)."""
    paths: dict[str, tuple[str, ...]] = {}
    seen: dict[str, int] = {}
    for number, fields in _conf_lines(text):
        where = f"line {number}"
        if "blocksizes" in fields and "blockname" not in fields:
            for size in fields["blocksizes"].split(","):
                if not size.strip().isdigit():
                    raise TopologyError(where, f"bad block size {size!r}")
            continue
        if "blockname" not in fields:
            raise TopologyError(where, "block form needs BlockName= (or BlockSizes=)")
        name = fields["blockname"]
        if name in seen:
            raise TopologyError(where, f"block {name!r} defined twice (first on line {seen[name]})")
        seen[name] = number
        for node in expand_hostlist(fields.get("nodes", ""), where):
            if node in paths:
                raise TopologyError(where, f"node {node!r} is in two blocks")
            paths[node] = (name,)
    return Topology(MappingProxyType(paths), ("block",))


def parse_slurm_topology(text: str) -> Topology:
    """Either form, told apart by the first line's key."""
    for _number, fields in _conf_lines(text):
        if "switchname" in fields:
            return parse_slurm_tree(text)
        return parse_slurm_block(text)
    return Topology()


# --- Kubernetes node labels --------------------------------------------------------------------------

NVIDIA_PREFIX = "network.topology.nvidia.com/"
K8S_LEVELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("datacenter", (NVIDIA_PREFIX + "datacenter", NVIDIA_PREFIX + "core")),
    ("spine", (NVIDIA_PREFIX + "spine",)),
    ("block", (NVIDIA_PREFIX + "block", NVIDIA_PREFIX + "leaf")),
    ("accelerator", (NVIDIA_PREFIX + "accelerator", "nvidia.com/gpu.clique")),
)
"""Topograph's label families, outermost first; each level accepts the older and newer key names."""

_TIER = re.compile(r"^fabric\.topograph\.run/tier-(\d+)$")
ACCELERATOR_DOMAIN = "accelerator.topograph.run/domain"
ACCELERATOR_SUBDOMAIN = "accelerator.topograph.run/sub-domain"
MISSING = "?"


def parse_k8s_labels(labels: Mapping[str, Mapping[str, str]]) -> Topology:
    """Kubernetes node labels written by Topograph → paths. Two label families are understood:
    `network.topology.nvidia.com/{datacenter|core, spine, block|leaf, accelerator}` and
    `fabric.topograph.run/tier-N` (tier 0 innermost) with `accelerator.topograph.run/domain` and
    `/sub-domain`. Only levels present on some node are kept; a node missing a level other nodes
    have gets `?` there (so levels stay aligned). A domain is a path prefix, so equal leaf names under
    different spines stay different domains."""
    tiers = sorted(
        {int(m.group(1)) for node_labels in labels.values() for k in node_labels if (m := _TIER.match(k))},
        reverse=True,
    )
    level_keys: list[tuple[str, tuple[str, ...]]]
    if tiers:
        level_keys = [(f"tier-{t}", (f"fabric.topograph.run/tier-{t}",)) for t in tiers]
        level_keys += [("accelerator", (ACCELERATOR_DOMAIN,)), ("sub-domain", (ACCELERATOR_SUBDOMAIN,))]
    else:
        level_keys = list(K8S_LEVELS)
    present = [
        (name, keys)
        for name, keys in level_keys
        if any(k in node_labels for node_labels in labels.values() for k in keys)
    ]
    paths: dict[str, tuple[str, ...]] = {}
    for node, node_labels in labels.items():
        values: list[str] = []
        for _name, keys in present:
            value = next((node_labels[k] for k in keys if node_labels.get(k)), MISSING)
            values.append(value)
        while values and values[-1] == MISSING:  # trailing missing levels are dropped
            values.pop()
        paths[node] = tuple(values)
    return Topology(MappingProxyType(paths), tuple(name for name, _ in present))
