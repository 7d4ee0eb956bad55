"""Which project a Kubernetes namespace's pods charge (issue 26; ADR 0051, ADR 0054): a fact an admin records,
one namespace at a time (`MapNamespace` -> `NamespaceMapped` in the `k8s-namespaces-<executor>` stream), like
every other admin decision: through the ledger, in the hash chain, with a reason.

Namespaces are a cluster's, so a mapping names the Kubernetes executor (the cluster) it holds in. An empty
project unmaps the namespace (its pods then charge the project their `steward.io/project` label names).

The ledger enforces the mapping (ADR 0056): a job a Kubernetes executor submits names its pods' namespace
(`SubmitJob.from_executor`, `from_namespace`), and is refused (`NamespaceNotMapped`) unless the recorded mapping
of that namespace in that cluster is the project it charges; an unmapped namespace charges nothing.

The rules are pure: `mapping_problem` (what a mapping may say), `submission_problem` (what a cluster's
submission may charge) and `in_force` (the mapping the recorded events leave: the last word on each
namespace, `steward.domain.state.apply_namespace_mapped`, which the ledger's state folds)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from steward.domain.commands import MapNamespace, SubmitJob
from steward.domain.errors import InvalidCommand, NamespaceNotMapped
from steward.domain.events import Event
from steward.domain.ids import id_problem
from steward.domain.state import LedgerState, apply_namespace_mapped

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


def submission_problem(state: LedgerState, cmd: SubmitJob) -> str | None:
    """Why a job submitted from a Kubernetes namespace may not charge its project (None: it may, or the job
    was not submitted from a namespace). The namespace's recorded mapping in that cluster is the project its
    pods charge; an unmapped namespace charges none (its pods' labels are not trusted: who may create pods
    in a namespace is Kubernetes RBAC's answer, who may charge a project is the admin's mapping)."""
    if not cmd.from_executor and not cmd.from_namespace:
        return None
    if not cmd.from_executor or not cmd.from_namespace:
        return "a job submitted from a Kubernetes namespace names both its cluster (executor) and its namespace"
    mapped = state.namespaces.get((cmd.from_executor, cmd.from_namespace))
    cluster = f"namespace {cmd.from_namespace[:80]} of cluster {cmd.from_executor[:80]}"
    if mapped is None:
        return (f"{cluster} is not mapped to a project, so its pods charge none (an admin maps it: "
                f"steward k8s map {cmd.from_namespace[:80]} PROJECT --executor {cmd.from_executor[:80]})")
    if mapped != cmd.project:
        return f"{cluster} charges project {mapped[:80]}, not {cmd.project[:80]}"
    return None


def require_mapped_namespace(state: LedgerState, cmd: SubmitJob) -> None:
    """ADR 0056: the ledger refuses a cluster's submission whose namespace is not mapped to its project."""
    problem = submission_problem(state, cmd)
    if problem is not None:
        raise NamespaceNotMapped(problem)


def in_force(payloads: Iterable[Mapping[str, Any]], executor_id: str = "") -> dict[str, str]:
    """The mapping the recorded `NamespaceMapped` payloads of one cluster leave, in log order: namespace ->
    project (the last word on each namespace; an unmapped one is absent)."""
    folded: dict[tuple[str, str], str] = {}
    for p in payloads:
        folded = apply_namespace_mapped(folded, {"executor_id": executor_id, "namespace": p.get("namespace", ""),
                                                 "project": p.get("project", "")})
    return {namespace: project for (_, namespace), project in folded.items()}
