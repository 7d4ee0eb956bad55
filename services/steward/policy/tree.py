"""The org tree and its allocations (DESIGN.md "Org tree and allocations").

A tree of allocations (cluster → division → team → project, any depth up to 8). Each allocation
holds a share of its parent's allocation; top-level allocations (parent `None`) hold a share of the
cluster. A project's entitlement is the product of the shares on its path. Jobs belong to leaves
(projects); an internal node funds nothing directly.

Debug quotas (DESIGN.md "Debug quota and the time-to-first-GPU SLO", ADR 0029): a manager may set,
on any allocation, the GPUs of debug work it may run ahead of the fair-share order. A quota set on
an inner allocation applies to each leaf below it that has none of its own (the nearest set quota on
the path wins; it is not a cap on the subtree's sum). Leaves with no set quota anywhere on their
path get the default of debug_quota.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from steward.domain import budget, org_tree
from steward.policy.errors import (
    ChildrenOverAllocated,
    CycleInTree,
    DuplicateNode,
    InvalidDebugQuota,
    ShareOutOfRange,
    TreeError,
    TreeTooDeep,
    UnknownAllocation,
    UnknownParent,
)

MAX_DEPTH = org_tree.MAX_TREE_DEPTH


@dataclass(frozen=True, slots=True)
class Allocation:
    """One node of the org tree: its share (a fraction) of its parent's allocation."""

    id: str
    parent: str | None
    share: float


# --- validation rules --------------------------------------------------------------------------------


def check_share_in_range(a: Allocation) -> None:
    """DESIGN.md "Org tree": a share is a fraction of the parent's allocation, in [0, 1]."""
    if not org_tree.share_in_unit_interval(a.share):
        raise ShareOutOfRange(a.id, a.share)


def check_known_parent(a: Allocation, ids: Mapping[str, Allocation]) -> None:
    """DESIGN.md "Org tree": every allocation hangs under a known parent (or the cluster)."""
    if a.parent is not None and a.parent not in ids:
        raise UnknownParent(a.id, a.parent)


def check_no_cycle_and_depth(a: Allocation, ids: Mapping[str, Allocation], max_depth: int) -> int:
    """DESIGN.md "Org tree": a tree (no node is its own ancestor), any depth up to 8.
    Returns the depth of `a` (top-level allocations are at depth 1)."""
    depth = 1
    seen = {a.id}
    parent = a.parent
    while parent is not None:
        if parent in seen:
            raise CycleInTree(a.id)
        seen.add(parent)
        depth += 1
        parent = ids[parent].parent
    if depth > max_depth:
        raise TreeTooDeep(a.id, depth, max_depth)
    return depth


def check_children_sum(parent: str, children: Iterable[Allocation]) -> None:
    """DESIGN.md "Org tree": the children's shares of one node sum to at most 1."""
    total = sum(c.share for c in children)
    if not org_tree.children_shares_fit(total):
        raise ChildrenOverAllocated(parent, total)


def check_debug_quota(node: str, value: object, ids: Mapping[str, Allocation]) -> int:
    """DESIGN.md "Debug quota": a quota is set on a known allocation, in whole GPUs, at least 0.
    Returns it as an int (a float with no fractional part is accepted, as YAML and JSON give)."""
    if node not in ids:
        raise UnknownAllocation(node)
    gpus = int(value) if isinstance(value, float) and value.is_integer() else value
    if org_tree.debug_quota_problem(gpus) is not None or not isinstance(gpus, int):
        raise InvalidDebugQuota(node, value)
    return gpus


# --- the tree ----------------------------------------------------------------------------------------

CLUSTER = "<cluster>"
"""Name used for the implicit root in errors and evidence."""
_ROOT = "\x00root"  # the tree's root for steward.domain.budget.entitlements (no allocation has this id)


@dataclass(frozen=True, slots=True)
class AllocationTree:
    """A validated org tree. Build with `AllocationTree.build(...)` or `from_nested(...)`."""

    allocations: Mapping[str, Allocation] = field(default_factory=lambda: MappingProxyType({}))
    _children: Mapping[str | None, tuple[str, ...]] = field(
        default_factory=lambda: MappingProxyType({}), repr=False, compare=False
    )
    _entitlement: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}), repr=False, compare=False)
    _path: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: MappingProxyType({}), repr=False, compare=False
    )
    debug_quotas: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """Manager-set debug quotas (GPUs) by the allocation they were set on (ADR 0029)."""

    def __hash__(self) -> int:
        return hash((tuple(sorted((a.id, a.parent or "", a.share) for a in self.allocations.values())),
                     tuple(sorted(self.debug_quotas.items()))))

    @classmethod
    def build(
        cls,
        allocations: Iterable[Allocation | tuple[str, str | None, float]],
        max_depth: int = MAX_DEPTH,
        debug_quotas: Mapping[str, int] | Mapping[str, object] | None = None,
    ) -> AllocationTree:
        """Validate and index a tree given as (id, parent, share) triples, with the manager-set
        debug quotas (GPUs by allocation; ADR 0029).

        Raises a `TreeError` subclass naming the offending node: duplicate id, share outside
        [0, 1], unknown parent, cycle, deeper than `max_depth`, children summing above 1, a debug
        quota on an unknown allocation or not a whole number >= 0.
        """
        ids: dict[str, Allocation] = {}
        for item in allocations:
            a = item if isinstance(item, Allocation) else Allocation(item[0], item[1], float(item[2]))
            if not a.id:
                raise TreeError(a.id, "an allocation needs a non-empty id")
            if a.id in ids:
                raise DuplicateNode(a.id, f"allocation {a.id!r} appears twice")
            check_share_in_range(a)
            ids[a.id] = a
        for a in ids.values():
            check_known_parent(a, ids)
        for a in ids.values():
            check_no_cycle_and_depth(a, ids, max_depth)
        grouped: dict[str | None, list[Allocation]] = {}
        for a in ids.values():
            grouped.setdefault(a.parent, []).append(a)
        for parent, kids in grouped.items():
            check_children_sum(parent if parent is not None else CLUSTER, kids)
        children = {p: tuple(sorted(k.id for k in kids)) for p, kids in grouped.items()}
        # DESIGN.md "a project's entitlement is the product of shares on its path": steward.domain.budget's rule
        ents = budget.entitlements({a.id: (a.parent if a.parent is not None else _ROOT, a.share)
                                    for a in ids.values()}, root=_ROOT)
        entitlement: dict[str, float] = {}  # in the depth-first order of the walk below
        path: dict[str, tuple[str, ...]] = {}

        def visit(parent: str | None, prefix: tuple[str, ...]) -> None:
            for child in children.get(parent, ()):
                entitlement[child] = ents[child]
                path[child] = (*prefix, child)
                visit(child, path[child])

        visit(None, ())
        quotas = {n: check_debug_quota(n, q, ids) for n, q in sorted((debug_quotas or {}).items())}
        return cls(
            MappingProxyType(dict(sorted(ids.items()))),
            MappingProxyType(children),
            MappingProxyType(entitlement),
            MappingProxyType(path),
            MappingProxyType(quotas),
        )

    @classmethod
    def from_nested(cls, nested: Mapping[str, Any], max_depth: int = MAX_DEPTH) -> AllocationTree:
        """Build from the scenario form: `{name: {share: s, children: {...}}}` where a child may
        also be a bare share (`{name: 0.35}`), as in data/scenarios/philly.yaml. A mapping may also
        carry `debug_quota: GPUs` (ADR 0029)."""
        triples: list[tuple[str, str | None, float]] = []
        quotas: dict[str, int] = {}

        def walk(parent: str | None, mapping: Mapping[str, Any]) -> None:
            for name, spec in mapping.items():
                if isinstance(spec, Mapping):
                    if "share" not in spec:
                        raise TreeError(str(name), f"allocation {name!r} has no share")
                    triples.append((str(name), parent, float(spec["share"])))
                    if spec.get("debug_quota") is not None:
                        quotas[str(name)] = spec["debug_quota"]
                    walk(str(name), spec.get("children") or {})
                else:
                    triples.append((str(name), parent, float(spec)))

        walk(None, nested)
        return cls.build(triples, max_depth=max_depth, debug_quotas=quotas)

    @classmethod
    def flat(cls, shares: Mapping[str, float]) -> AllocationTree:
        """A one-level tree: each project a direct share of the cluster."""
        return cls.build((p, None, s) for p, s in shares.items())

    # --- queries ----------------------------------------------------------------------------------

    def __contains__(self, node: object) -> bool:
        return node in self.allocations

    def __iter__(self) -> Iterator[str]:
        return iter(self.allocations)

    def __len__(self) -> int:
        return len(self.allocations)

    def entitlement(self, node: str) -> float:
        """Product of the shares on the path from the cluster to `node`; 0 for a name not in the
        tree (a project with no allocation runs unfunded)."""
        return self._entitlement.get(node, 0.0)

    def share(self, node: str) -> float:
        return self._get(node).share

    def parent(self, node: str) -> str | None:
        return self._get(node).parent

    def children(self, node: str | None = None) -> tuple[str, ...]:
        """Children of `node` (of the cluster for `None`), sorted by id."""
        return self._children.get(node, ())

    def path(self, node: str) -> tuple[str, ...]:
        """Allocations from the top level down to `node` inclusive; `()` when unknown."""
        return self._path.get(node, ())

    def depth(self, node: str) -> int:
        return len(self._get_path(node))

    def is_leaf(self, node: str) -> bool:
        return node in self.allocations and not self._children.get(node)

    def leaves(self) -> tuple[str, ...]:
        return tuple(n for n in self.allocations if not self._children.get(n))

    def debug_quota(self, node: str) -> int | None:
        """ADR 0029: the manager-set debug quota (GPUs) that applies to `node`: its own, else the
        nearest one set on an ancestor; None when none is set (the default applies) or `node` is
        unknown."""
        for a in reversed(self._path.get(node, ())):
            q = self.debug_quotas.get(a)
            if q is not None:
                return q
        return None

    def debug_quota_set_on(self, node: str) -> str | None:
        """The allocation whose manager set the quota `debug_quota(node)` returns (None: default)."""
        for a in reversed(self._path.get(node, ())):
            if a in self.debug_quotas:
                return a
        return None

    def with_debug_quota(self, node: str, gpus: int | None) -> AllocationTree:
        """A new tree where the manager of `node` set its debug quota to `gpus` (None: back to the
        default), validated again."""
        quotas = dict(self.debug_quotas)
        if gpus is None:
            if node not in self.allocations:
                raise UnknownAllocation(node)
            quotas.pop(node, None)
        else:
            quotas[node] = gpus
        return AllocationTree.build(self.allocations.values(), debug_quotas=quotas)

    def with_share(self, node: str, share: float, parent: str | object | None = ...) -> AllocationTree:
        """A new tree where `node` has `share` (and, when given, a new `parent`), validated again.
        Adds `node` when it is new (then `parent` is required)."""
        current = self.allocations.get(node)
        if parent is ...:
            if current is None:
                raise UnknownAllocation(node)
            new_parent = current.parent
        else:
            new_parent = parent if isinstance(parent, str) else None
        updated = dict(self.allocations)
        updated[node] = Allocation(node, new_parent, float(share))
        return AllocationTree.build(updated.values(), debug_quotas=self.debug_quotas)

    def without(self, node: str) -> AllocationTree:
        """A new tree without the leaf `node`."""
        if node not in self.allocations:
            raise UnknownAllocation(node)
        if self._children.get(node):
            raise TreeError(node, f"allocation {node!r} still has children")
        quotas = {n: q for n, q in self.debug_quotas.items() if n != node}
        return AllocationTree.build((a for a in self.allocations.values() if a.id != node), debug_quotas=quotas)

    def to_nested(self) -> dict[str, Any]:
        """Inverse of `from_nested` (every node as `{share, children}`, plus `debug_quota` where
        a manager set one)."""

        def one(c: str) -> dict[str, Any]:
            out: dict[str, Any] = {"share": self.allocations[c].share, "children": build(c)}
            if c in self.debug_quotas:
                out["debug_quota"] = self.debug_quotas[c]
            return out

        def build(parent: str | None) -> dict[str, Any]:
            return {c: one(c) for c in self.children(parent)}

        return build(None)

    def _get(self, node: str) -> Allocation:
        try:
            return self.allocations[node]
        except KeyError:
            raise UnknownAllocation(node) from None

    def _get_path(self, node: str) -> tuple[str, ...]:
        p = self._path.get(node)
        if p is None:
            raise UnknownAllocation(node)
        return p
