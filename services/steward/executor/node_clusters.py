"""The cluster each node was last registered in by a Slurm or Kubernetes executor (ADR 0085), kept in the executor's
folder (`clusters.json`), so that an executor without a cluster setting registers a node again in that cluster
(`cluster_for`), never back into the default one, across restarts.

Until ADR 0089 this memory lived in `retired.json` beside the retirements (`executor/retirement.py`), a second
concept in one file: a folder written before reads its `clusters` from there once (and keeps it in `clusters.json`
from then on); `retired.json` is left as it was, so an older executor started on the same folder still reads it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from steward.domain.commands import RegisterNode

FILE = "clusters.json"
LEGACY_FILE = "retired.json"  # where ADR 0085 kept them, beside the retirements


def cluster_for(setting: str, recorded: str | None, remembered: str) -> str:
    """ADR 0085: the cluster of a node's registration by a Slurm or Kubernetes executor: its cluster setting when
    it has one; else the cluster the ledger records for the node (`recorded`, as the API names it, None when the
    executor could not read it or the ledger has no such node), else the one its last registration named
    (`remembered`); "" (the default cluster) for a node never placed in one. The default cluster's name reads
    as "" so a node in it is registered as it always was (the same payload and message id)."""
    if setting:
        return setting
    chosen = recorded if recorded is not None else remembered
    return "" if chosen == "default" else chosen


def _read(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


class NodeClusters:
    """node -> the cluster its executor's last registration named (nodes of the default cluster left out), kept in
    `folder/clusters.json`; read from `folder/retired.json`'s `clusters` when the folder has no such file yet."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE
        data = _read(self.path)
        if not self.path.exists() and (legacy := _read(folder / LEGACY_FILE).get("clusters")):
            data = {"clusters": legacy}
            self.clusters = self._parse(data)
            self._save()  # at once: the retirements no longer write them
        self.clusters = self._parse(data)

    @staticmethod
    def _parse(data: Mapping[str, Any]) -> dict[str, str]:
        found = data.get("clusters")
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"clusters": dict(sorted(self.clusters.items()))}, sort_keys=True))
        tmp.replace(self.path)

    def placed(self, nodes: Iterable[RegisterNode], setting: str,
               recorded: Mapping[str, str] | None = None) -> list[RegisterNode]:
        """`nodes` (an inventory's registrations) each in its cluster by `cluster_for`: the setting, else the
        ledger's record of the node (`recorded`: node -> cluster, None when not read), else the cluster its last
        registration named."""
        return [replace(n, cluster=cluster_for(setting, None if recorded is None else recorded.get(n.node_id),
                                               self.clusters.get(n.node_id, "")))
                for n in nodes]

    def sent(self, nodes: Iterable[RegisterNode]) -> None:
        """The executor sent the registrations of `nodes`: each in the cluster it named."""
        clusters = {n.node_id: n.cluster for n in nodes if n.cluster or n.node_id in self.clusters}
        if any(self.clusters.get(k) != v for k, v in clusters.items()):
            self.clusters.update(clusters)
            self._save()
