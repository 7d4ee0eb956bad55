"""Which project a Kubernetes namespace's pods charge (issue 26; ADR 0051, ADR 0054): a fact an admin records,
one namespace at a time (`MapNamespace` -> `NamespaceMapped` in the `k8s-namespaces-<executor>` stream), like
every other admin decision: through the ledger, in the hash chain, with a reason.

Namespaces are a cluster's, so a mapping names the Kubernetes executor (the cluster) it holds in. An empty
project unmaps the namespace (its pods then charge the project their `steward.io/project` label names).

The rules are pure: `mapping_problem` (what a mapping may say) and `in_force` (the mapping the recorded events
leave: the last word on each namespace)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from steward.domain.commands import MapNamespace
from steward.domain.errors import InvalidCommand
from steward.domain.events import Event
from steward.domain.ids import id_problem
from steward.domain.state import LedgerState

STREAM_PREFIX = "k8s-namespaces-"
# a Kubernetes namespace name: an RFC 1123 label (lower-case letters, digits, '-'; 63 at most)
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
MAX_REASON = 500


def stream_of(executor_id: str) -> str:
    """The stream that holds the namespace mappings of one Kubernetes executor (one cluster)."""
    return f"{STREAM_PREFIX}{executor_id}"


def mapping_problem(state: LedgerState, executor_id: str, namespace: str, project: str, reason: str) -> str | None:
    """Why this mapping may not be recorded (None: it may): a valid executor id, a namespace name Kubernetes
    accepts, a project that is a leaf of the org tree (or "" to unmap) and a reason."""
    if (why := id_problem(executor_id)) is not None:
        return f"executor id {why}"
    if _NAMESPACE.fullmatch(namespace) is None:
        return (f"'{namespace[:80]}' is no Kubernetes namespace name (lower-case letters, digits and '-', "
                "at most 63)")
    if project and not state.is_project(project):
        return f"unknown project '{project[:80]}' (a namespace charges a project: a leaf of the org tree)"
    if not reason.strip():
        return "a namespace mapping needs a reason"
    return None


def decide_map_namespace(state: LedgerState, cmd: MapNamespace, now: float) -> list[Event]:
    """One namespace mapped (or unmapped, project "") in one cluster; the other namespaces keep theirs."""
    problem = mapping_problem(state, cmd.executor_id, cmd.namespace, cmd.project, cmd.reason)
    if problem is not None:
        raise InvalidCommand(problem)
    return [Event(cmd.aggregate, "NamespaceMapped", {"executor_id": cmd.executor_id, "namespace": cmd.namespace,
                                                     "project": cmd.project, "reason": cmd.reason[:MAX_REASON]})]


def in_force(payloads: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The mapping the recorded `NamespaceMapped` payloads leave, in log order: namespace -> project (the last
    word on each namespace; an unmapped one is absent)."""
    out: dict[str, str] = {}
    for p in payloads:
        namespace, project = str(p.get("namespace", "")), str(p.get("project", ""))
        if project:
            out[namespace] = project
        else:
            out.pop(namespace, None)
    return out
