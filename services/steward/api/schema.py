"""The GraphQL schema (Strawberry): queries over projections, mutations that publish commands to Kafka
and wait for their outcome. Business outcomes are union payloads; top-level errors are system faults."""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated, Any, cast

import strawberry
from strawberry.scalars import JSON
from strawberry.types import Info

from steward.api.commands import CommandGateway, Outcome
from steward.api.queries import allocation_state, job_row, job_rows, node_rows
from steward.domain.commands import RegisterNode, SetAllocations, SubmitJob
from steward.domain.decide import require_known_project, require_valid_job_shape
from steward.domain.errors import DomainError
from steward.store.eventstore import EventStore, RecordedEvent


@strawberry.type
class Event:
    position: int
    stream_id: str
    version: int
    type: str
    payload: JSON
    metadata: JSON
    recorded_at: float
    hash: str

    @staticmethod
    def of(rec: RecordedEvent) -> Event:
        return Event(position=rec.position, stream_id=rec.stream_id, version=rec.version, type=rec.type,
                     payload=cast(JSON, rec.payload), metadata=cast(JSON, rec.metadata), recorded_at=rec.recorded_at, hash=rec.hash)


@strawberry.type
class Job:
    id: str
    project: str
    state: str
    gpus: int
    min_runtime_s: float
    resumable: bool
    job_class: str
    priority: int
    command: list[str]
    submitted_at: float
    attempt: int
    assignments: JSON
    funded: bool
    started_at: float | None
    ended_at: float | None
    exit_code: int | None

    @strawberry.field
    async def events(self, info: Info) -> list[Event]:
        store: EventStore = info.context["store"]
        return [Event.of(r) for r in await asyncio.to_thread(store.stream, f"job-{self.id}")]

    @staticmethod
    def of(row: dict[str, Any]) -> Job:
        return Job(
            id=row["job_id"], project=row["project"], state=row["state"], gpus=row["gpus"],
            min_runtime_s=row["min_runtime_s"], resumable=bool(row["resumable"]), job_class=row["job_class"],
            priority=row["priority"], command=row["command"], submitted_at=row["submitted_at"],
            attempt=row["attempt"], assignments=cast(JSON, row["assignments"]), funded=bool(row["funded"]),
            started_at=row["started_at"], ended_at=row["ended_at"], exit_code=row["exit_code"],
        )


@strawberry.type
class Allocation:
    name: str
    parent: str
    share: float
    entitlement: float


@strawberry.type
class Node:
    id: str
    gpus: int
    gpu_model: str
    path: list[str]
    executor: str
    state: str


# -- mutation payloads -----------------------------------------------------------------------------


@strawberry.type
class Rejected:
    code: str
    reason: str


@strawberry.type
class InvalidInput:
    field: str | None
    message: str


@strawberry.type
class NotAuthorised:
    message: str


@strawberry.type
class JobAccepted:
    job: Job


@strawberry.type
class AllocationsChanged:
    parent: str
    position: int


@strawberry.type
class NodeRegistered:
    id: str
    position: int


SubmitJobResult = Annotated[
    JobAccepted | Rejected | InvalidInput | NotAuthorised, strawberry.union("SubmitJobResult")
]
SetAllocationsResult = Annotated[
    AllocationsChanged | Rejected | InvalidInput | NotAuthorised, strawberry.union("SetAllocationsResult")
]
RegisterNodeResult = Annotated[
    NodeRegistered | Rejected | InvalidInput | NotAuthorised, strawberry.union("RegisterNodeResult")
]


@strawberry.input
class ShareInput:
    child: str
    share: float


@strawberry.input
class SubmitJobInput:
    project: str
    gpus: int
    min_runtime_s: float
    command: list[str]
    resumable: bool = False
    job_class: str = "batch"
    priority: int = 0
    job_id: str | None = None


@strawberry.input
class RegisterNodeInput:
    id: str
    gpus: int
    gpu_model: str
    path: list[str]
    executor: str = "local"


def _rejected(outcome: Outcome) -> Rejected | None:
    rec = outcome.rejected
    return Rejected(code=rec.payload["code"], reason=rec.payload["reason"]) if rec else None


def _actor(info: Info) -> tuple[str, str]:
    return info.context.get("actor", "anonymous"), info.context.get("role", "admin")


def _entitlements(rows: list[dict[str, Any]]) -> dict[str, float]:
    by_name = {r["name"]: r for r in rows}
    memo: dict[str, float] = {}

    def ent(name: str) -> float:
        if name not in memo:
            r = by_name[name]
            memo[name] = r["share"] * (ent(r["parent"]) if r["parent"] in by_name else 1.0)
        return memo[name]

    return {n: ent(n) for n in by_name}


@strawberry.type
class Query:
    @strawberry.field
    def health(self) -> str:
        return "ok"

    @strawberry.field
    async def job(self, info: Info, id: str) -> Job | None:
        row = await asyncio.to_thread(job_row, info.context["store"], id)
        return Job.of(row) if row else None

    @strawberry.field
    async def jobs(self, info: Info, state: str | None = None, project: str | None = None,
                   limit: int = 100) -> list[Job]:
        rows = await asyncio.to_thread(job_rows, info.context["store"], state, project, min(limit, 1000))
        return [Job.of(r) for r in rows]

    @strawberry.field
    async def allocations(self, info: Info) -> list[Allocation]:
        from steward.api.queries import allocation_rows

        rows = await asyncio.to_thread(allocation_rows, info.context["store"])
        ents = _entitlements(rows)
        return [Allocation(name=r["name"], parent=r["parent"], share=r["share"], entitlement=ents[r["name"]])
                for r in sorted(rows, key=lambda r: (r["parent"], r["name"]))]

    @strawberry.field
    async def nodes(self, info: Info) -> list[Node]:
        rows = await asyncio.to_thread(node_rows, info.context["store"])
        return [Node(id=r["node_id"], gpus=r["gpus"], gpu_model=r["gpu_model"], path=r["path"],
                     executor=r["executor"], state=r["state"]) for r in rows]


@strawberry.type
class Mutation:
    @strawberry.mutation
    async def submit_job(self, info: Info, input: SubmitJobInput) -> SubmitJobResult:
        store: EventStore = info.context["store"]
        gateway: CommandGateway = info.context["gateway"]
        command = SubmitJob(
            job_id=input.job_id or f"j-{uuid.uuid4().hex[:12]}", project=input.project, gpus=input.gpus,
            min_runtime_s=input.min_runtime_s, command=list(input.command), resumable=input.resumable,
            job_class=input.job_class, priority=input.priority,
        )
        try:
            require_valid_job_shape(command)
            require_known_project(await asyncio.to_thread(allocation_state, store), command.project)
        except DomainError as err:
            return InvalidInput(field=None, message=err.message)
        actor, role = _actor(info)
        outcome = await gateway.execute(command, actor=actor, role=role)
        if (rej := _rejected(outcome)) is not None:
            return rej
        row = await asyncio.to_thread(job_row, store, command.job_id)
        assert row is not None, "a recorded JobSubmitted has its projection row"
        return JobAccepted(job=Job.of(row))

    @strawberry.mutation
    async def set_allocations(self, info: Info, parent: str, shares: list[ShareInput],
                              reason: str) -> SetAllocationsResult:
        if not reason.strip():
            return InvalidInput(field="reason", message="an allocation change needs a reason")
        if len({s.child for s in shares}) != len(shares):
            return InvalidInput(field="shares", message="a child appears more than once")
        command = SetAllocations(parent=parent, shares={s.child: s.share for s in shares}, reason=reason)
        actor, role = _actor(info)
        outcome = await info.context["gateway"].execute(command, actor=actor, role=role)
        if (rej := _rejected(outcome)) is not None:
            return rej
        return AllocationsChanged(parent=parent, position=outcome.events[-1].position)

    @strawberry.mutation
    async def register_node(self, info: Info, input: RegisterNodeInput) -> RegisterNodeResult:
        if input.gpus < 1:
            return InvalidInput(field="gpus", message=f"a node needs at least 1 GPU, got {input.gpus}")
        command = RegisterNode(node_id=input.id, gpus=input.gpus, gpu_model=input.gpu_model,
                               path=list(input.path), executor=input.executor)
        actor, role = _actor(info)
        outcome = await info.context["gateway"].execute(command, actor=actor, role=role)
        if (rej := _rejected(outcome)) is not None:
            return rej
        return NodeRegistered(id=input.id, position=outcome.events[-1].position)


schema = strawberry.Schema(query=Query, mutation=Mutation)
