"""GraphQL for Kubernetes namespace mappings (issue 26, ADR 0054): which project each namespace of a cluster
charges (`namespaceMappings`, admins and auditors, and the Kubernetes executor with its auditor token), and
mapping one (`mapNamespace`, admins, through the ledger like every admin command)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import strawberry

from steward.api.context import Context
from steward.api.payloads import InvalidInput, NotAuthorised, Rejected
from steward.api.scalars import BigInt
from steward.domain.namespaces import stream_of


@strawberry.type(description="A namespace of a Kubernetes cluster and the project its pods charge: who mapped "
                             "it, when and why.")
class NamespaceMapping:
    namespace: str
    project: str
    position: BigInt
    recorded_at: float | None
    set_by: str
    reason: str


@strawberry.type
class NamespaceMappingChanged:
    position: BigInt
    namespace: str
    project: str = strawberry.field(description="Empty: the namespace is unmapped.")


MapNamespaceResult = Annotated[NamespaceMappingChanged | Rejected | InvalidInput | NotAuthorised,
                               strawberry.union("MapNamespaceResult")]


async def namespace_mappings(ctx: Context, executor: str) -> list[NamespaceMapping]:
    """The mapping in force for one cluster (the last `NamespaceMapped` of each namespace), by namespace."""
    events = await asyncio.to_thread(ctx.services.store.stream, stream_of(executor))
    last: dict[str, NamespaceMapping] = {}
    for ev in events:
        if ev.type != "NamespaceMapped":
            continue
        namespace, project = str(ev.payload.get("namespace", "")), str(ev.payload.get("project", ""))
        if not project:
            last.pop(namespace, None)
            continue
        last[namespace] = NamespaceMapping(
            namespace=namespace, project=project, position=ev.position, recorded_at=ev.recorded_at,
            set_by=str(ev.metadata.get("actor_name") or ev.metadata.get("actor") or ""),
            reason=str(ev.payload.get("reason", "")))
    return [last[n] for n in sorted(last)]
