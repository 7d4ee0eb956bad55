"""Nodes an executor's inventory no longer lists are retired (ADR 0078): the Kubernetes executor sees a node
deleted from the API server, the Slurm executor a node gone from `scontrol show node`. Until then the ledger
held them as registered (and, once the heartbeat named them down, unhealthy) forever.

The executor sends `RetireNode` for a node it registered (in this run or an earlier one: the nodes it
registered are kept in its folder, so a node removed while it was stopped is retired too) once the node has
been missing for `after_s` and none of its own attempts runs there any more: the pods or Slurm jobs of a
deleted node end and their JobRun workflows record the losses. The executor cannot tell when the ledger has
recorded them, so it asks `when_empty` (ADR 0081): a node an attempt still holds in the ledger is retiring (no
new work) and is retired by the decision that records the last loss; before, such a retirement was refused and
the node stayed unhealthy until an operator retired it. A retired node that comes back
is registered again under a new message id (the first one's is deduplicated), counted in the executor's folder
so a restart agrees.

The cluster each node was last registered in is `executor/node_clusters.py`'s (ADR 0085, ADR 0089); a registration's
message id names its cluster (`register_id`), so a changed setting is a new registration (not deduplicated).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from steward.domain.clusters import node_gpus_problem
from steward.domain.commands import RegisterNode, RetireNode

RETIRE_AFTER_S = 30.0  # how long a node must be missing (and idle) before its executor retires it


def warn_if_refused(node: RegisterNode, log: logging.Logger) -> None:
    """A registration the ledger will refuse for its count of GPUs (ADR 0082: at most 1,024 a node) is still sent
    (the refusal is recorded in the node's stream, where an auditor reads it), and said in the executor's log, which
    reads no answer: the node stays out of Steward until its inventory names a count within the bound."""
    if (problem := node_gpus_problem(node)) is not None:
        log.warning("%s; the ledger refuses its registration: the node takes no Steward work", problem)


class Retirements:
    """The nodes an executor registered (`known`), those it saw disappear (`missing`: since when, monotonic)
    and how many times it retired each (`counts`, so the message ids of its registrations differ after a
    retirement); `known` and `counts` are kept in `path`, so a restart agrees."""

    def __init__(self, path: Path, after_s: float = RETIRE_AFTER_S) -> None:
        self.path = path
        self.after_s = after_s
        self.missing: dict[str, float] = {}
        try:
            loaded = json.loads(path.read_text())
        except (OSError, ValueError):
            loaded = {}
        loaded = loaded if isinstance(loaded, dict) else {}
        self.counts: dict[str, int] = {str(k): int(v) for k, v in (loaded.get("counts") or {}).items()}
        self.known: set[str] = {str(n) for n in loaded.get("known") or ()}
        # what else the file holds (the nodes' clusters before ADR 0089 moved them to `node_clusters`): written back
        # as read, so an older executor started on this folder still finds them
        self._other: dict[str, Any] = {k: v for k, v in loaded.items() if k not in ("counts", "known")}

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._other | {"counts": self.counts, "known": sorted(self.known)},
                                  sort_keys=True))
        tmp.replace(self.path)

    def registered(self, node_ids: Iterable[str]) -> None:
        """The executor sent the registrations of `node_ids`."""
        new = set(node_ids) - self.known
        if new:
            self.known |= new
            self._save()

    def register_id(self, node: RegisterNode) -> str:
        """The message id of a registration: the same for the same node, path, GPUs and cluster (a restart's is
        deduplicated), and new after each retirement (so a node that comes back is registered again). A node in
        the default cluster ("") has the id it had before clusters had names."""
        base = f"register-{node.node_id}-{node.gpus}-{'/'.join(node.path)}"
        if node.cluster:
            base = f"{base}@{node.cluster}"  # '@' is in no id: no other id reads the same
        count = self.counts.get(node.node_id, 0)
        return f"{base}-r{count}" if count else base

    def due(self, listed: Iterable[str], busy: Iterable[str], now: float,
            source: str) -> list[tuple[RetireNode, str]]:
        """The retirements to send now, each with its message id: the `known` nodes missing from `listed` for
        `after_s` (since `now`, monotonic) on which no attempt runs (`busy`: the nodes of the executor's live
        attempts). The caller forgets them as registered; they are counted at once."""
        listed = set(listed)
        busy = set(busy)
        out = []
        for node_id in sorted(self.known):
            if node_id in listed:
                self.missing.pop(node_id, None)
                continue
            since = self.missing.setdefault(node_id, now)
            if node_id in busy or now - since < self.after_s:
                continue
            del self.missing[node_id]
            self.known.discard(node_id)
            self.counts[node_id] = self.counts.get(node_id, 0) + 1
            reason = f"gone from the {source} inventory for {now - since:.0f} s"
            out.append((RetireNode(node_id, reason, when_empty=True), f"retire-{node_id}-{uuid.uuid4().hex}"))
        if out:
            self._save()
        return out
