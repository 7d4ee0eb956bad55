"""Mutation inputs and union payloads: success | Rejected (the ledger said no, with its reason) |
NotAuthorised (says nothing about whether the object exists) | InvalidInput (refused before publishing).
Top-level `errors` are kept for system faults."""

from __future__ import annotations

import asyncio
from typing import Annotated

import strawberry
from strawberry.scalars import JSON
from strawberry.types import Info

from steward.api import fields
from steward.api.context import Context
from steward.api.outlook import submit_outlook
from steward.api.scalars import BigInt
from steward.api.types import ApiToken, Job, SubmitOutlook
from steward.domain.commands import SubmitJob


async def outlook_of(ctx: Context, command: SubmitJob) -> SubmitOutlook:
    """The submit preview of `command` on the scheduler's view now (steward.api.outlook): the job itself,
    once recorded, is left out of the figures (it is the one being previewed)."""
    found = await asyncio.to_thread(ctx.services.read.policy.read,
                                    lambda state, settings, now: submit_outlook(state, settings, command, now))
    return SubmitOutlook.of(found)


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
    submitted: strawberry.Private[SubmitJob | None] = None

    @fields.field("The submit preview at submission: funded or unfunded and why, protection, debug "
                  "qualification (computed when asked for).")
    async def outlook(self, info: Info[Context, None]) -> SubmitOutlook | None:
        return None if self.submitted is None else await outlook_of(info.context, self.submitted)


@strawberry.type
class JobCancelled:
    job: Job


@strawberry.type
class SessionOpened:
    job: Job
    submitted: strawberry.Private[SubmitJob | None] = None

    @fields.field("The submit preview at opening: funded, protection, debug qualification (computed when "
                  "asked for).")
    async def outlook(self, info: Info[Context, None]) -> SubmitOutlook | None:
        return None if self.submitted is None else await outlook_of(info.context, self.submitted)


@strawberry.type
class SessionRestored:
    job: Job


@strawberry.type(description="The ledger recorded the preemption request: the job is asked to checkpoint, "
                             "then stopped after the grace period (and requeued when asked).")
class PreemptionRequested:
    job: Job
    attempt: BigInt = strawberry.field(description="the attempt the request stops (the job may have moved on since)")
    requested_at: float
    grace_s: float
    requeue: bool
    position: BigInt


@strawberry.type
class AllocationsChanged:
    parent: str
    position: BigInt


@strawberry.type(description="The ledger recorded the debug quota of an allocation.")
class DebugQuotaChanged:
    allocation: str
    gpus: int | None = strawberry.field(description="The quota set (null: back to the default).")
    position: BigInt


@strawberry.type
class DisplayNameChanged:
    allocation: str
    display_name: str = strawberry.field(description="What it is called now (its id when the name was cleared).")
    position: BigInt


@strawberry.type
class PinChanged:
    allocation: str
    pin: str | None = strawberry.field(description="The cluster its jobs run on now (null: unpinned).")
    position: BigInt


@strawberry.type
class NodeRegistered:
    id: str
    position: BigInt


@strawberry.type
class NodeDraining:
    id: str
    position: BigInt


@strawberry.type
class NodeResumed:
    id: str
    position: BigInt


@strawberry.type(description="A node retired for good (ADR 0078): never placed on again, its GPUs out of the "
                             "capacity; registering it again brings it back. Asked whenEmpty while attempts ran "
                             "there, it is retiring (pending) and is retired when the last of them ends (ADR 0081).")
class NodeRetired:
    id: str
    position: BigInt
    pending: bool = strawberry.field(default=False, description="True: attempts still run there (jobs); the node "
                                                                "takes no new work and is retired when they end.")
    jobs: list[str] = strawberry.field(default_factory=list, description="The jobs it waits for, when pending.")


@strawberry.type
class PolicySet:
    position: BigInt


@strawberry.type
class TokenCreated:
    token: str = strawberry.field(description="Shown once; only its digest is stored.")
    info: ApiToken


@strawberry.type
class TokenRevoked:
    id: str


SubmitJobResult = Annotated[JobAccepted | Rejected | InvalidInput | NotAuthorised, strawberry.union("SubmitJobResult")]
CancelJobResult = Annotated[JobCancelled | Rejected | InvalidInput | NotAuthorised, strawberry.union("CancelJobResult")]
OpenSessionResult = Annotated[
    SessionOpened | Rejected | InvalidInput | NotAuthorised, strawberry.union("OpenSessionResult")
]
RestoreSessionResult = Annotated[
    SessionRestored | Rejected | InvalidInput | NotAuthorised, strawberry.union("RestoreSessionResult")
]
SetDisplayNameResult = Annotated[
    DisplayNameChanged | Rejected | InvalidInput | NotAuthorised, strawberry.union("SetDisplayNameResult")
]
SetPinResult = Annotated[PinChanged | Rejected | InvalidInput | NotAuthorised, strawberry.union("SetPinResult")]
SetDebugQuotaResult = Annotated[
    DebugQuotaChanged | Rejected | InvalidInput | NotAuthorised, strawberry.union("SetDebugQuotaResult")
]
SubmitOutlookResult = Annotated[SubmitOutlook | InvalidInput | NotAuthorised, strawberry.union("SubmitOutlookResult")]
SetAllocationsResult = Annotated[
    AllocationsChanged | Rejected | InvalidInput | NotAuthorised, strawberry.union("SetAllocationsResult")
]
RegisterNodeResult = Annotated[
    NodeRegistered | Rejected | InvalidInput | NotAuthorised, strawberry.union("RegisterNodeResult")
]
DrainNodeResult = Annotated[NodeDraining | Rejected | InvalidInput | NotAuthorised, strawberry.union("DrainNodeResult")]
ResumeNodeResult = Annotated[
    NodeResumed | Rejected | InvalidInput | NotAuthorised, strawberry.union("ResumeNodeResult")
]
RetireNodeResult = Annotated[
    NodeRetired | Rejected | InvalidInput | NotAuthorised, strawberry.union("RetireNodeResult")
]
RequestPreemptionResult = Annotated[
    PreemptionRequested | Rejected | InvalidInput | NotAuthorised, strawberry.union("RequestPreemptionResult")
]
SetPolicyResult = Annotated[PolicySet | Rejected | InvalidInput | NotAuthorised, strawberry.union("SetPolicyResult")]
CreateTokenResult = Annotated[
    TokenCreated | Rejected | InvalidInput | NotAuthorised, strawberry.union("CreateTokenResult")
]
RevokeTokenResult = Annotated[
    TokenRevoked | Rejected | InvalidInput | NotAuthorised, strawberry.union("RevokeTokenResult")
]


@strawberry.input
class ShareInput:
    child: str
    share: float
    debug_quota_gpus: int | None = strawberry.field(
        default=strawberry.UNSET, description="Optionally, the child's debug quota in GPUs (null: back to the "
                                              "default that follows the share; absent: unchanged).")
    display_name: str | None = strawberry.field(
        default=strawberry.UNSET, description="Optionally, what people call the child (null: its id again; "
                                              "absent: unchanged). 1 to 64 characters (docs/api.md).")
    pin: str | None = strawberry.field(
        default=strawberry.UNSET, description="Optionally, the cluster the child's jobs run on (ADR 0067; null: "
                                              "unpinned; absent: unchanged). A registered cluster's name.")


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
    gpu_models: list[str] | None = strawberry.field(
        default=None, description="The GPU models the job accepts (none: any), e.g. [\"H100\", \"A100\"].")
    clusters: list[str] | None = strawberry.field(default=None, description="The clusters it accepts (none: any).")


@strawberry.input
class OpenSessionInput:
    project: str
    gpus: int
    command: list[str]
    cap_s: float = strawberry.field(default=8 * 3600.0, description="The session's protected time (≤ 8 h).")
    session_id: str | None = None
    gpu_models: list[str] | None = strawberry.field(
        default=None, description="The GPU models the session accepts (none: any), as SubmitJobInput.gpuModels.")
    clusters: list[str] | None = strawberry.field(default=None, description="The clusters it accepts (none: any).")


@strawberry.input
class RegisterNodeInput:
    id: str
    gpus: int
    gpu_model: str
    path: list[str]
    executor: str = "local"
    cluster: str = strawberry.field(default="", description="The named cluster it joins (empty: the default "
                                                            "cluster).")


@strawberry.input
class JobFilter:
    states: list[str] | None = None
    mine: bool = strawberry.field(default=False, description="Only the jobs you submitted (sessions you opened).")
    project: str | None = None
    job_class: str | None = None
    submitted_after: float | None = None
    submitted_before: float | None = None


@strawberry.input
class EventFilter:
    stream_id: str | None = None
    stream_prefix: str | None = None
    types: list[str] | None = None
    actor: str | None = None
    since: float | None = None
    until: float | None = None


@strawberry.input
class PolicyInput:
    settings: JSON
    reason: str
