"""Org tree and allocations (DESIGN.md "Org tree and allocations")."""

from __future__ import annotations

import pytest

from steward.policy.errors import (
    ChildrenOverAllocated,
    CycleInTree,
    DuplicateNode,
    PolicyError,
    ShareOutOfRange,
    TreeError,
    TreeTooDeep,
    UnknownAllocation,
    UnknownParent,
)
from steward.policy.tree import AllocationTree


@pytest.mark.parametrize(
    ("triples", "error", "node"),
    [
        ([("a", None, 1.2)], ShareOutOfRange, "a"),
        ([("a", None, -0.1)], ShareOutOfRange, "a"),
        ([("a", None, float("nan"))], ShareOutOfRange, "a"),
        ([("a", "ghost", 0.5)], UnknownParent, "a"),
        ([("a", None, 0.6), ("b", None, 0.6)], ChildrenOverAllocated, "<cluster>"),
        ([("a", None, 1.0), ("a1", "a", 0.7), ("a2", "a", 0.4)], ChildrenOverAllocated, "a"),
        ([("a", "b", 0.5), ("b", "a", 0.5)], CycleInTree, "a"),
        ([("a", "a", 0.5)], CycleInTree, "a"),
        ([("a", None, 0.5), ("a", None, 0.2)], DuplicateNode, "a"),
        ([(f"l{i}", f"l{i - 1}" if i else None, 1.0) for i in range(9)], TreeTooDeep, "l8"),
    ],
    ids=[
        "share>1",
        "share<0",
        "share-nan",
        "unknown-parent",
        "top-over",
        "children-over",
        "cycle",
        "self-parent",
        "duplicate",
        "depth-9",
    ],
)
def test_invalid_trees_are_refused_naming_the_node(triples, error, node):
    with pytest.raises(error) as info:
        AllocationTree.build(triples)
    assert isinstance(info.value, TreeError) and isinstance(info.value, PolicyError)
    assert info.value.node == node
    assert node in str(info.value) or node == "<cluster>"


def test_depth_eight_is_allowed():
    tree = AllocationTree.build([(f"l{i}", f"l{i - 1}" if i else None, 1.0) for i in range(8)])
    assert tree.depth("l7") == 8


@pytest.mark.parametrize(
    ("node", "entitlement"),
    [("research", 0.5), ("ee9e8c", 0.225), ("7f04ca", 0.15), ("b436b2", 0.12), ("nobody", 0.0)],
)
def test_entitlement_is_the_product_of_shares_on_the_path(node, entitlement):
    tree = AllocationTree.from_nested(
        {
            "research": {"share": 0.5, "children": {"ee9e8c": 0.45, "7f04ca": 0.30}},
            "product": {"share": 0.30, "children": {"b436b2": 0.40}},
        }
    )
    assert tree.entitlement(node) == pytest.approx(entitlement)


def test_queries_paths_leaves_and_roundtrip():
    spec = {"d": {"share": 0.8, "children": {"t": {"share": 1.0, "children": {"p": 0.5, "q": 0.5}}}}}
    tree = AllocationTree.from_nested(spec)
    assert tree.path("p") == ("d", "t", "p")
    assert tree.leaves() == ("p", "q")
    assert tree.children(None) == ("d",)
    assert tree.parent("t") == "d"
    assert tree.is_leaf("p") and not tree.is_leaf("t")
    assert AllocationTree.from_nested(tree.to_nested()) == tree


def test_with_share_revalidates_and_adds():
    tree = AllocationTree.flat({"a": 0.5, "b": 0.5})
    assert tree.with_share("a", 0.3).entitlement("a") == pytest.approx(0.3)
    assert tree.with_share("c", 0.0, parent=None).entitlement("c") == 0.0
    with pytest.raises(ChildrenOverAllocated):
        tree.with_share("a", 0.6)
    with pytest.raises(UnknownAllocation):
        tree.with_share("zzz", 0.1)
    assert "b" not in tree.without("b")


def test_tree_is_hashable_and_comparable():
    a = AllocationTree.flat({"a": 0.5})
    assert a == AllocationTree.flat({"a": 0.5})
    assert hash(a) == hash(AllocationTree.flat({"a": 0.5}))
