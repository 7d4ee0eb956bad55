"""The org tree and its allocations (DESIGN.md "Org tree and allocations").

A tree of allocations (cluster → division → team → project, any depth up to 8). Each allocation
holds a share of its parent's allocation; top-level allocations (parent `None`) hold a share of the
cluster. A project's entitlement is the product of the shares on its path. Jobs belong to leaves
(projects); an internal node funds nothing directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from steward.policy.errors import (
    ChildrenOverAllocated,
    CycleInTree,
    DuplicateNode,
    ShareOutOfRange,
    TreeError,
    TreeTooDeep,
    UnknownAllocation,
    UnknownParent,
)

MAX_DEPTH = 8
SHARE_EPSILON = 1e-9
"""Tolerance on "children's shares sum to at most 1" (shares are decimal fractions in floats)."""


@dataclass(frozen=True, slots=True)
class Allocation:
    """One node of the org tree: its share (a fraction) of its parent's allocation."""

    id: str
    parent: str | None
    share: float


# --- validation rules --------------------------------------------------------------------------------


def check_share_in_range(a: Allocation) -> None:
    """DESIGN.md "Org tree": a share is a fraction of the parent's allocation, in [0, 1]."""
    if not (0.0 <= a.share <= 1.0):  # also rejects NaN
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
    if total > 1.0 + SHARE_EPSILON:
        raise ChildrenOverAllocated(parent, total)


# --- the tree ----------------------------------------------------------------------------------------

CLUSTER = "<cluster>"
"""Name used for the implicit root in errors and evidence."""


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

    def __hash__(self) -> int:
        return hash(tuple(sorted((a.id, a.parent or "", a.share) for a in self.allocations.values())))

    @classmethod
    def build(
        cls,
        allocations: Iterable[Allocation | tuple[str, str | None, float]],
        max_depth: int = MAX_DEPTH,
    ) -> AllocationTree:
        """Validate and index a tree given as (id, parent, share) triples.

        Raises a `TreeError` subclass naming the offending node: duplicate id, share outside
        [0, 1], unknown parent, cycle, deeper than `max_depth`, children summing above 1.
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
        entitlement: dict[str, float] = {}
        path: dict[str, tuple[str, ...]] = {}

        def visit(parent: str | None, ent: float, prefix: tuple[str, ...]) -> None:
            for child in children.get(parent, ()):
                e = ent * ids[child].share
                entitlement[child] = e
                path[child] = (*prefix, child)
                visit(child, e, path[child])

        visit(None, 1.0, ())
        return cls(
            MappingProxyType(dict(sorted(ids.items()))),
            MappingProxyType(children),
            MappingProxyType(entitlement),
            MappingProxyType(path),
        )

    @classmethod
    def from_nested(cls, nested: Mapping[str, Any], max_depth: int = MAX_DEPTH) -> AllocationTree:
        """Build from the scenario form: `{name: {share: s, children: {...}}}` where a child may
        also be a bare share (`{name: 0.35}`), as in data/scenarios/philly.yaml."""
        triples: list[tuple[str, str | None, float]] = []

        def walk(parent: str | None, mapping: Mapping[str, Any]) -> None:
            for name, spec in mapping.items():
                if isinstance(spec, Mapping):
                    if "share" not in spec:
                        raise TreeError(str(name), f"allocation {name!r} has no share")
                    triples.append((str(name), parent, float(spec["share"])))
                    walk(str(name), spec.get("children") or {})
                else:
                    triples.append((str(name), parent, float(spec)))

        walk(None, nested)
        return cls.build(triples, max_depth=max_depth)

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
        return AllocationTree.build(updated.values())

    def without(self, node: str) -> AllocationTree:
        """A new tree without the leaf `node`."""
        if node not in self.allocations:
            raise UnknownAllocation(node)
        if self._children.get(node):
            raise TreeError(node, f"allocation {node!r} still has children")
        return AllocationTree.build(a for a in self.allocations.values() if a.id != node)

    def to_nested(self) -> dict[str, Any]:
        """Inverse of `from_nested` (every node as `{share, children}`)."""

        def build(parent: str | None) -> dict[str, Any]:
            return {c: {"share": self.allocations[c].share, "children": build(c)} for c in self.children(parent)}

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
