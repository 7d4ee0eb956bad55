"""ADR 0089: each node's cluster (ADR 0085) has its own memory (`clusters.json`), apart from the retirements
(`retired.json`, ADR 0078); a folder written before reads its clusters from `retired.json` once, a restart agrees,
and `retired.json` keeps what it held (an older executor started on the folder still reads its clusters)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from steward.domain.commands import RegisterNode
from steward.executor.node_clusters import NodeClusters
from steward.executor.retirement import Retirements


def node(node_id: str, cluster: str = "") -> RegisterNode:
    return RegisterNode(node_id, 8, "h100", ["spine", node_id], "hpc", cluster)


FOLDERS: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None, dict[str, str]]] = [
    # (case, retired.json, clusters.json, the clusters read)
    ("a new folder", None, None, {}),
    ("written before ADR 0089: read from retired.json", {"counts": {"n1": 1}, "known": ["n1", "n2"],
                                                         "clusters": {"n1": "ceres"}}, None, {"n1": "ceres"}),
    ("clusters.json wins once it exists", {"clusters": {"n1": "ceres"}}, {"clusters": {"n1": "vesta"}},
     {"n1": "vesta"}),
    ("an unreadable clusters.json reads as none", None, {"clusters": "garbage"}, {}),
]


@pytest.mark.parametrize(("case", "retired", "clusters", "read"), FOLDERS, ids=[f[0] for f in FOLDERS])
def test_a_folder_s_clusters_are_read_and_a_restart_agrees(tmp_path: Path, case: str, retired: dict[str, Any] | None,
                                                            clusters: dict[str, Any] | None,
                                                            read: dict[str, str]) -> None:
    if retired is not None:
        (tmp_path / "retired.json").write_text(json.dumps(retired))
    if clusters is not None:
        (tmp_path / "clusters.json").write_text(json.dumps(clusters))
    first = NodeClusters(tmp_path)
    assert first.clusters == read
    assert NodeClusters(tmp_path).clusters == read  # a restart agrees (the migration was written at once)
    assert [n.cluster for n in first.placed([node("n1"), node("n2")], "")] == [read.get("n1", ""), ""]


def test_registering_keeps_each_memory_in_its_own_file_and_retired_json_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "retired.json").write_text(json.dumps({"counts": {}, "known": [], "clusters": {"n1": "ceres"}}))
    clusters, retirements = NodeClusters(tmp_path), Retirements(tmp_path / "retired.json")
    sent = clusters.placed([node("n1"), node("n2")], "vesta")
    clusters.sent(sent)
    retirements.registered(n.node_id for n in sent)
    assert NodeClusters(tmp_path).clusters == {"n1": "vesta", "n2": "vesta"}
    assert Retirements(tmp_path / "retired.json").known == {"n1", "n2"}
    legacy = json.loads((tmp_path / "retired.json").read_text())
    assert legacy["clusters"] == {"n1": "ceres"} and legacy["known"] == ["n1", "n2"]  # an older executor reads it
    assert "known" not in json.loads((tmp_path / "clusters.json").read_text())
