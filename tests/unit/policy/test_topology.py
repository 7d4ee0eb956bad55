"""Topology input in the forms NVIDIA Topograph publishes (DESIGN.md "Placement")."""

from __future__ import annotations

import pytest

from steward.policy.errors import TopologyError
from steward.policy.topology import (
    expand_hostlist,
    parse_k8s_labels,
    parse_slurm_block,
    parse_slurm_topology,
    parse_slurm_tree,
)
from tests.unit.policy.builders import node


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("node01", ["node01"]),
        ("node[01-03]", ["node01", "node02", "node03"]),
        ("node[1-2,7]", ["node1", "node2", "node7"]),
        ("a[1-2],b3", ["a1", "a2", "b3"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("gpu[008-010]", ["gpu008", "gpu009", "gpu010"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
    ],
)
def test_hostlist_expansion(expr, expected):
    assert expand_hostlist(expr) == expected


@pytest.mark.parametrize("expr", ["node[1-", "node]", "node[a-b]", "node[5-3]", "n[[1]]"])
def test_bad_hostlists(expr):
    with pytest.raises(TopologyError):
        expand_hostlist(expr)


TREE = """
# Topograph, tree form
SwitchName=core Switches=spine[1-2]
SwitchName=spine1 Switches=leaf[1-2] LinkSpeed=100
SwitchName=spine2 Switches=leaf3
SwitchName=leaf1 Nodes=node[01-02]
SwitchName=leaf2 Nodes=node03
SwitchName=leaf3 Nodes=node[04-05]
"""


def test_slurm_tree_form():
    topo = parse_slurm_tree(TREE)
    assert topo.paths["node01"] == ("core", "spine1", "leaf1")
    assert topo.paths["node05"] == ("core", "spine2", "leaf3")
    assert topo.levels == ("core", "spine", "leaf")
    assert parse_slurm_topology(TREE) == topo
    out = topo.apply([node("node03", path=()), node("other", path=("x",))])
    assert out[0].path == ("core", "spine1", "leaf2") and out[1].path == ("x",)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("SwitchName=s1 Switches=ghost", "line 1"),
        ("SwitchName=s1 Nodes=n1\nSwitchName=s1 Nodes=n2", "line 2"),
        ("SwitchName=a Switches=b\nSwitchName=b Switches=a\nSwitchName=c Switches=a", "line"),
        ("SwitchName=l1 Nodes=n1\nSwitchName=l2 Nodes=n1", "line 2"),
        ("Nodes=n1", "line 1"),
        ("SwitchName=s1 garbage", "line 1"),
    ],
    ids=["unknown-switch", "twice", "two-parents", "node-twice", "no-switchname", "not-key-value"],
)
def test_slurm_tree_errors_name_the_line(text, where):
    with pytest.raises(TopologyError) as info:
        parse_slurm_tree(text)
    assert info.value.where.startswith(where)


BLOCK = """
BlockName=block1 Nodes=node[01-04]
BlockName=block2 Nodes=node[05-08]
BlockSizes=4,8
"""


def test_slurm_block_form():
    topo = parse_slurm_block(BLOCK)
    assert topo.paths["node02"] == ("block1",) and topo.paths["node08"] == ("block2",)
    assert topo.levels == ("block",)
    assert parse_slurm_topology(BLOCK) == topo
    with pytest.raises(TopologyError):
        parse_slurm_block("BlockName=b1 Nodes=n1\nBlockName=b2 Nodes=n1")
    with pytest.raises(TopologyError):
        parse_slurm_block("BlockSizes=4,x")


def test_kubernetes_labels_nvidia_keys():
    p = "network.topology.nvidia.com/"
    labels = {
        "n1": {p + "accelerator": "nvl1", p + "leaf": "s1", p + "spine": "s2", p + "core": "s3"},
        "n2": {p + "accelerator": "nvl2", p + "block": "s4", p + "spine": "s2", p + "datacenter": "s3"},
        "n3": {p + "leaf": "s5", p + "core": "s3"},
    }
    topo = parse_k8s_labels(labels)
    assert topo.levels == ("datacenter", "spine", "block", "accelerator")
    assert topo.paths["n1"] == ("s3", "s2", "s1", "nvl1")
    assert topo.paths["n2"] == ("s3", "s2", "s4", "nvl2")
    assert topo.paths["n3"] == ("s3", "?", "s5")


def test_kubernetes_labels_fabric_tiers():
    labels = {
        "n1": {
            "fabric.topograph.run/tier-0": "leaf1",
            "fabric.topograph.run/tier-1": "spine1",
            "accelerator.topograph.run/domain": "d1",
        },
        "n2": {"fabric.topograph.run/tier-0": "leaf2", "fabric.topograph.run/tier-1": "spine1"},
    }
    topo = parse_k8s_labels(labels)
    assert topo.levels == ("tier-1", "tier-0", "accelerator")
    assert topo.paths == {"n1": ("spine1", "leaf1", "d1"), "n2": ("spine1", "leaf2")}
