"""The GraphQL object types (Strawberry). Field names are snake_case here and camelCase in the schema."""

from __future__ import annotations

import asyncio
import base64
from typing import Any, cast

import strawberry
from strawberry.scalars import JSON
from strawberry.types import Info

from steward.api import fields
from steward.api.clusters import ClusterOccupancy
from steward.api.context import Context
from steward.api.explain import Why
from steward.api.figures import AllocationFigures
from steward.api.outlook import QuotaFigures
from steward.api.scalars import BigInt
from steward.domain.budget import describe_interval
from steward.policy.debug_quota import Qualification
from steward.policy.outlook import Outlook
from steward.store.eventstore import RecordedEvent

# The decisions about a job (DESIGN.md "Every decision has evidence"): admitted or rejected, placed,
# deferred (why it waits), asked to stop and stopped, requeued, its protection revoked, its session capped,
# restored, cancelled. Each is one of the event types the domain records (steward.domain.events).
DECISION_TYPES = ("CommandRejected", "JobPlaced", "JobDeferred", "JobPreemptionRequested", "JobPreempted",
                  "JobRequeued", "JobLost", "ProtectionRevoked", "SessionCapReached", "SessionRestored",
                  "JobCancelled")


def encode_cursor(kind: str, *parts: str) -> str:
    return base64.urlsafe_b64encode("|".join((kind, *parts)).encode()).decode()


def decode_cursor(cursor: str, kind: str, n: int) -> list[str] | None:
    """The parts of a cursor of `kind`, or None when it is not one (a bad cursor is a user error)."""
    try:
        parts = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
    except (ValueError, UnicodeDecodeError):
        return None
    if len(parts) != n + 1 or parts[0] != kind:
        return None
    return parts[1:]


@strawberry.type
class PageInfo:
    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None
    end_cursor: str | None


@strawberry.type(description="One recorded event: immutable, hash-chained to the one before it.")
class Event:
    position: BigInt
    stream_id: str
    version: BigInt
    type: str
    schema_version: int
    payload: JSON
    metadata: JSON
    recorded_at: float
    prev_hash: str
    hash: str

    @staticmethod
    def of(rec: RecordedEvent) -> Event:
        return Event(position=rec.position, stream_id=rec.stream_id, version=rec.version, type=rec.type,
                     schema_version=rec.schema_version, payload=cast(JSON, rec.payload),
                     metadata=cast(JSON, rec.metadata), recorded_at=rec.recorded_at, prev_hash=rec.prev_hash,
                     hash=rec.hash)


@strawberry.type
class EventEdge:
    cursor: str
    node: Event


@strawberry.type
class EventConnection:
    edges: list[EventEdge]
    page_info: PageInfo
    scanned_to: BigInt = strawberry.field(description="The last position examined (filters may skip events).")


@strawberry.type(description="The person a job belongs to: the subject the provider (or the API token) "
                             "names, and the display name (the subject when none was given).")
class JobOwner:
    subject: str
    name: str


@strawberry.type(description="A decision about a job and the evidence recorded with it.")
class Decision:
    position: BigInt
    type: str
    recorded_at: float
    actor: str | None
    evidence: JSON
    actor_name: str | None = strawberry.field(default=None, description="The display name of the person who "
                                                                        "acted (single sign-on), when one did.")


@strawberry.type(description="Why a job waits, or was preempted: plain words and structured evidence.")
class Explanation:
    job_id: str
    reason: str = strawberry.field(description="A stable reason code.")
    text: str
    source: str = strawberry.field(description="'recorded' (from the job's events) or 'derived' (projections).")
    blocking_gpus: BigInt
    blocking_scope: str
    blocking_until: float | None
    position: BigInt | None
    position_in_project: BigInt | None
    event_position: BigInt | None
    evidence: JSON
    position_in_clusters: BigInt | None = strawberry.field(
        default=None, description="Its position among the waiting jobs that accept a cluster it accepts (the "
                                  "queue of the clusters it may run on; `position` with one cluster).")

    @staticmethod
    def of(w: Why) -> Explanation:
        return Explanation(job_id=w.job_id, reason=w.reason, text=w.text, source=w.source,
                           blocking_gpus=w.blocking_gpus, blocking_scope=w.blocking_scope,
                           blocking_until=w.blocking_until, position=w.position,
                           position_in_project=w.position_in_project, event_position=w.event_position,
                           evidence=cast(JSON, w.evidence), position_in_clusters=w.position_in_clusters)


def _floats(values: Any) -> list[float] | None:
    """A JSON list of times as floats (the stored JSON may write 1400.0 as 1400); None stays None."""
    return None if values is None else [float(v) for v in values]


@strawberry.type
class Job:
    id: strawberry.ID
    project: str
    state: str
    gpus: BigInt
    min_runtime_s: float
    resumable: bool
    job_class: str
    priority: BigInt
    command: list[str]
    submitted_at: float
    attempt: BigInt
    assignments: JSON
    funded: bool
    started_at: float | None
    ended_at: float | None
    exit_code: BigInt | None
    position: BigInt = strawberry.field(description="The store position of the job's latest change.")
    protected_until: float | None = strawberry.field(description=(
        "When the current attempt's protection ends (epoch seconds), as its JobStarted event recorded it "
        "(protected_until), cut short when a session reaches its cap or loses its protection; equal to the "
        "start for unfunded work. Null before the attempt starts and while the job waits for another."))
    session_cap_at: float | None = strawberry.field(description=(
        "A session's cap for the current attempt (epoch seconds), as its SessionOpened event recorded it "
        "(cap_at). Null for batch and debug jobs, before the session is opened and while it waits."))
    session_warnings_at: list[float] | None = strawberry.field(description=(
        "The times (epoch seconds, ascending) the session is warned before its cap, as its SessionOpened "
        "event recorded them (warnings_at). Null when no SessionOpened records them for this attempt."))
    session_address: str | None = strawberry.field(description=(
        "How to reach a running session: the URL or host:port its current attempt published "
        "(SessionAddressPublished). Null for batch and debug jobs, before the attempt publishes one and once "
        "the attempt has ended: an address never outlives the attempt that published it."))

    @fields.field("What people call the job's project (its display name, or its id when none is recorded).")
    async def project_name(self, info: Info[Context, None]) -> str:
        view = await info.context.view()
        return view.display_names().get(self.project, self.project)

    @fields.field("The job's events in order.")
    async def events(self, info: Info[Context, None]) -> list[Event]:
        recs = await asyncio.to_thread(info.context.services.store.stream, f"job-{self.id}")
        return [Event.of(r) for r in recs]

    @fields.field("Every decision about the job with the evidence that justified it.")
    async def decisions(self, info: Info[Context, None]) -> list[Decision]:
        recs = await asyncio.to_thread(info.context.services.store.stream, f"job-{self.id}")
        return [Decision(position=r.position, type=r.type, recorded_at=r.recorded_at,
                         actor=r.metadata.get("actor"), actor_name=r.metadata.get("actor_name"),
                         evidence=cast(JSON, r.payload.get("evidence", r.payload)))
                for r in recs if r.type in DECISION_TYPES]

    @fields.field("The GPU models it accepts, as submitted (empty: any model).")
    async def gpu_models(self, info: Info[Context, None]) -> list[str]:
        return list((await _accepts(info, str(self.id)))[0])

    @fields.field("The clusters it accepts, as submitted (empty: any cluster; an allocation pinned to a cluster "
                  "narrows that to the pin, see Allocation.pinnedTo).")
    async def clusters(self, info: Info[Context, None]) -> list[str]:
        return list((await _accepts(info, str(self.id)))[1])

    @fields.field("The cluster it runs on now: the cluster of its placement's nodes while it is placed or "
                  "running (a gang never spans clusters); null otherwise.")
    async def runs_on(self, info: Info[Context, None]) -> str | None:
        if self.state not in ("PLACED", "RUNNING") or not isinstance(self.assignments, dict) or not self.assignments:
            return None
        on = (await info.context.view()).node_clusters()
        found = sorted({on[n] for n in self.assignments if n in on})
        return ", ".join(found) if found else None

    @fields.field("Who submitted the job (or opened the session): the person's subject and display name, "
                  "as the log recorded them; null for jobs recorded before owners were.")
    async def owner(self, info: Info[Context, None]) -> JobOwner | None:
        owners = info.context.services.owners
        if owners is None:
            return None
        found = await asyncio.to_thread(owners.of, str(self.id), int(self.position))
        return JobOwner(subject=found.subject, name=found.display) if found and found.subject else None

    @staticmethod
    def of(row: dict[str, Any]) -> Job:
        return Job(
            id=strawberry.ID(row["job_id"]), project=row["project"], state=row["state"], gpus=row["gpus"],
            min_runtime_s=row["min_runtime_s"], resumable=bool(row["resumable"]), job_class=row["job_class"],
            priority=row["priority"], command=list(row["command"]), submitted_at=row["submitted_at"],
            attempt=row["attempt"], assignments=cast(JSON, row["assignments"]), funded=bool(row["funded"]),
            started_at=row["started_at"], ended_at=row["ended_at"], exit_code=row["exit_code"],
            position=row["position"], protected_until=row.get("protected_until"),
            session_cap_at=row.get("session_cap_at"), session_warnings_at=_floats(row.get("session_warnings_at")),
            session_address=row.get("session_address"),
        )


async def _accepts(info: Info[Context, None], job_id: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A job's accepted GPU models and clusters: from memory, or from its stream in a thread."""
    read = info.context.services.read
    found = read.cached_accepts(job_id)
    return found if found is not None else await asyncio.to_thread(read.accepts, job_id)


@strawberry.type
class JobEdge:
    cursor: str
    node: Job


@strawberry.type
class JobConnection:
    edges: list[JobEdge]
    page_info: PageInfo


@strawberry.type(description="An allocation's debug quota (DESIGN.md \"Debug quota\"): GPUs that may run debug "
                             "jobs and sessions ahead of the fair-share order.")
class DebugQuota:
    gpus: int = strawberry.field(description="The quota in force now (GPUs).")
    set_gpus: int | None = strawberry.field(description="The value its parent's manager set on this allocation "
                                                        "(null: none set here).")
    is_default: bool = strawberry.field(description="True when no manager set a quota on it or an ancestor: the "
                                                    "default that follows the share, with a floor, applies.")
    set_on: str | None = strawberry.field(description="The allocation whose set quota applies (itself or the "
                                                      "nearest ancestor); null when the default applies.")

    @staticmethod
    def of(q: QuotaFigures) -> DebugQuota:
        return DebugQuota(gpus=q.gpus, set_gpus=q.set_gpus, is_default=q.is_default, set_on=q.set_on)


@strawberry.type(description="Whether a debug job or session is inside its allocation's debug quota (qualified: "
                             "it goes ahead of the fair-share order) and the figures that decided it.")
class DebugQualification:
    qualified: bool
    reason: str = strawberry.field(description="within_quota, over_quota, not_debug, no_allocation or "
                                               "unfunded_by_request.")
    quota_gpus: int
    in_use_gpus: int = strawberry.field(description="GPUs of the allocation's running debug work counted before it.")
    ahead_gpus: int = strawberry.field(description="GPUs of the allocation's waiting debug work ahead of it.")

    @staticmethod
    def of(q: Qualification) -> DebugQualification:
        return DebugQualification(qualified=q.qualified, reason=q.reason, quota_gpus=q.quota_gpus,
                                  in_use_gpus=q.in_use_gpus, ahead_gpus=q.ahead_gpus)


@strawberry.type(description="What a job as submitted gets if it starts now (the submit preview): funded or "
                             "unfunded and why, its protection, and for debug work whether it is qualified.")
class SubmitOutlook:
    funded: bool
    reason: str = strawberry.field(description="funded, or why it will run unfunded: no_allocation, "
                                               "unfunded_by_request (no protection asked), entitlement_used.")
    funded_by_lane: bool = strawberry.field(description="Funded although its allocation's entitlement is used: "
                                                        "qualified debug work, funded by the debug lane.")
    protection_s: float = strawberry.field(description="Protection from each start (0: preemptible at once).")
    asked_protection_s: float = strawberry.field(description="The protection the job asked for (policy-capped).")
    project: str
    allocation: str | None = strawberry.field(description="The allocation the figures are of (for "
                                                          "entitlement_used: the one with no entitlement left).")
    in_use_gpus: float = strawberry.field(
        description="Its funded GPUs in use, weighted: GPUs × their model's weight (ADR 0090).")
    entitled_gpus: float = strawberry.field(
        description="Its entitlement × ready capacity, in weighted GPUs (GPUs × their model's weight; ADR 0090).")
    qualification: DebugQualification | None = strawberry.field(description="For debug jobs and sessions.")
    message: str = strawberry.field(description="The same in words, one line per point.")

    @staticmethod
    def of(o: Outlook) -> SubmitOutlook:
        return SubmitOutlook(funded=o.funded, reason=o.reason, funded_by_lane=o.funded_by_lane,
                             protection_s=o.protection_s,
                             asked_protection_s=o.asked_protection_s, project=o.project, allocation=o.allocation,
                             in_use_gpus=o.in_use_gpus, entitled_gpus=o.entitled_gpus,
                             qualification=None if o.qualification is None else DebugQualification.of(o.qualification),
                             message=o.message)


@strawberry.type(description="An allocation's figures in one cluster and GPU model over the window, in weighted "
                             "GPU-seconds (ADR 0062). Owed is split as its demand is: a waiting job's where it is "
                             "valued (the cheapest model it accepts; cluster and model empty while no registered "
                             "node could take it), a running job's where it runs; delivered where it ran.")
class AllocationSplit:
    cluster: str
    gpu_model: str
    owed: float
    delivered: float
    demand: float


@strawberry.type(description="An allocation (a node of the org tree) with its figures over the window. "
                             "Amounts are weighted GPU-seconds: GPU-seconds × the weight of their GPU model at "
                             "the time (SetGpuModelWeights; plain GPU-seconds while every weight is 1).")
class Allocation:
    name: str
    display_name: str = strawberry.field(description=(
        "What people call it, as its parent's manager set it (AllocationsSet display_names); its id (`name`) "
        "when none is recorded. Ids stay what commands, filters and search take."))
    parent: str
    depth: int
    share: float
    entitlement: float = strawberry.field(description="Product of the shares on its path (claim on the cluster).")
    is_project: bool
    entitled_in_window: float
    usage_in_window: float
    demand_in_window: float
    owed: float = strawberry.field(description="Σ over the window's hours of min(entitlement × capacity, demand) "
                                               "(steward.domain.budget).")
    delivered: float = strawberry.field(description="Weighted GPU-seconds its jobs ran in the window (every run, "
                                                    "at the weight of the model it ran on).")
    delivered_over_owed: float | None = strawberry.field(
        description="delivered ÷ owed, as it is: above 1 is over-delivery (null: nothing owed).")
    over_delivered: bool = strawberry.field(description="More delivered than owed in the window.")
    window_start: float = strawberry.field(description="The window the figures are over: [windowStart, windowEnd).")
    window_end: float
    window: str = strawberry.field(description="The window in words, e.g. \"last 7 days\".")
    burn: float | None = strawberry.field(description="GPUs running now ÷ GPUs entitled now.")
    running_gpus: BigInt
    running_jobs: BigInt
    waiting_jobs: BigInt
    waiting_gpus: BigInt
    split: list[AllocationSplit] = strawberry.field(
        default_factory=list, description="Owed, delivered and demand by cluster and GPU model (they sum to the "
                                          "allocation's figures); empty places are left out.")
    pin: str | None = strawberry.field(default=None, description=(
        "The cluster its parent's manager pinned it to (AllocationsSet pins, ADR 0067); null: not pinned itself "
        "(see pinnedTo)."))
    pinned_to: str | None = strawberry.field(default=None, description=(
        "The cluster its jobs run on: its own pin or its nearest pinned ancestor's (null: any cluster). Its owed "
        "is then at most what that cluster could deliver."))

    @fields.field("Its debug quota: in force, set value, and whether the default applies.")
    async def debug_quota_gpus(self, info: Info[Context, None]) -> DebugQuota | None:
        """Computed only when asked for (once per store head, then cached: steward.api.queue)."""
        ctx = info.context
        policy, head = ctx.services.read.policy, ctx.services.read.known_head()
        quotas = policy.cached_quotas(head)
        if quotas is None:
            quotas = await asyncio.to_thread(policy.quotas, head)
        q = quotas.get(self.name)
        return None if q is None else DebugQuota.of(q)

    @staticmethod
    def of(f: AllocationFigures) -> Allocation:
        return Allocation(name=f.name, display_name=f.display_name or f.name, parent=f.parent, depth=f.depth,
                          share=f.share, entitlement=f.entitlement,
                          is_project=f.is_project, entitled_in_window=f.entitled_in_window,
                          usage_in_window=f.usage_in_window, demand_in_window=f.demand_in_window, owed=f.owed,
                          delivered=f.delivered, delivered_over_owed=f.delivered_over_owed,
                          over_delivered=f.over_delivered, window_start=f.window_start, window_end=f.window_end,
                          window=describe_interval(f.window_start, f.window_end, f.window_end), burn=f.burn,
                          running_gpus=f.running_gpus, running_jobs=f.running_jobs, waiting_jobs=f.waiting_jobs,
                          waiting_gpus=f.waiting_gpus,
                          split=[AllocationSplit(cluster=p.cluster, gpu_model=p.gpu_model, owed=p.owed,
                                                 delivered=p.delivered, demand=p.demand) for p in f.split],
                          pin=f.pin, pinned_to=f.pinned_to)


@strawberry.type
class Node:
    id: str
    gpus: BigInt
    gpu_model: str
    path: list[str]
    executor: str
    state: str
    used_gpus: BigInt
    free_gpus: BigInt = strawberry.field(
        description="GPUs a job could be placed on now: held by no job (Steward's or another scheduler's) "
                    "on a ready node; 0 on a draining, retiring or unhealthy node (as clusterOccupancy).")
    jobs: list[str] = strawberry.field(description="Ids of the jobs on it that you may see.")
    foreign_gpus: BigInt = strawberry.field(
        default=0, description="GPUs held by work another scheduler placed (e.g. jobs submitted to Slurm "
                               "outside Steward): busy for Steward, never preempted by it.")
    other_jobs: BigInt = strawberry.field(description="How many jobs on it you may not see.")
    cluster: str = strawberry.field(default="default", description="The named cluster it belongs to (ADR 0057).")


@strawberry.type(description="A topology domain (a prefix of node paths) with its capacity and occupancy.")
class Domain:
    path: list[str]
    depth: int
    nodes: BigInt
    gpus: BigInt
    used_gpus: BigInt
    free_gpus: BigInt = strawberry.field(description="Its nodes' free GPUs (as Node.freeGpus).")
    largest_free_on_one_node: BigInt


@strawberry.type
class QueueEntry:
    position: BigInt
    mine: bool = strawberry.field(description="False: another tenant's job, shown only as its position.")
    position_in_project: BigInt | None
    job: Job | None
    reason: str | None = strawberry.field(description="The reason code: the scheduler's latest recorded one "
                                                      "(JobDeferred) when current, else derived.")
    text: str | None
    blocking_gpus: BigInt | None = strawberry.field(description="How many more GPUs it needs in `blockingScope`.")
    blocking_scope: str | None = None
    blocking_until: float | None = None
    source: str | None = strawberry.field(default=None, description="'recorded' or 'derived'.")
    position_in_clusters: BigInt | None = strawberry.field(
        default=None, description="Its position among the waiting jobs that accept a cluster it accepts.")
    position_in_cluster: BigInt | None = strawberry.field(
        default=None, description="With `queue(cluster:)`: its position among the waiting jobs that may run on that "
                                  "cluster (null without a cluster).")


@strawberry.type
class Queue:
    waiting: BigInt
    waiting_gpus: BigInt
    entries: list[QueueEntry]


@strawberry.type
class StateCount:
    state: str
    count: BigInt


@strawberry.type
class Me:
    subject: str
    role: str
    scopes: list[str]
    token_id: str | None
    via: str
    capabilities: list[str]
    name: str = strawberry.field(default="", description="Your display name (single sign-on: the provider's; "
                                                         "otherwise the subject).")


@strawberry.type(description="A refused request, from its AccessDenied event. count > 1: a summary of the denials "
                             "past the per-token limit in one window (operations: how many per operation).")
class AccessDenial:
    id: BigInt = strawberry.field(description="The AccessDenied event's position in the log.")
    at: float
    last_at: float
    count: BigInt
    subject: str
    role: str
    token_id: str | None
    operation: str
    target: str
    reason: str
    client: str
    operations: JSON

    @staticmethod
    def of(rec: RecordedEvent) -> AccessDenial:
        p = rec.payload
        return AccessDenial(id=rec.position, at=p["first_at"], last_at=p["last_at"], count=p["count"],
                            subject=p["subject"], role=p["role"], token_id=p["token_id"] or None,
                            operation=p["operation"], target=p["target"], reason=p["reason"], client=p["client"],
                            operations=cast(JSON, p["operations"]))


@strawberry.type
class AccessDenialConnection:
    edges: list[AccessDenial]
    page_info: PageInfo


@strawberry.type
class AllocationAt:
    name: str
    parent: str
    share: float


@strawberry.type
class NodeAt:
    id: str
    gpus: BigInt
    gpu_model: str
    path: list[str]
    state: str


@strawberry.type
class JobAt:
    id: str
    project: str
    state: str
    gpus: BigInt
    attempt: BigInt


@strawberry.type(description="The ledger's state folded from the log up to a position (or time).")
class StateAt:
    position: BigInt
    recorded_at: float | None
    allocations: list[AllocationAt]
    nodes: list[NodeAt]
    job_counts: list[StateCount]
    jobs: list[JobAt]
    jobs_truncated: bool


@strawberry.type(description="The hash chain recomputed over a range of the log.")
class Verification:
    from_position: BigInt
    to_position: BigInt = strawberry.field(description="The last position checked.")
    checked: BigInt = strawberry.field(description="Events checked.")
    ok: bool = strawberry.field(description="Every position of the range asked for was checked and verifies; "
                                "false when the range was truncated (`truncated`), though nothing was found wrong.")
    first_bad_position: BigInt | None
    problem: str | None
    truncated: bool = strawberry.field(default=False, description="Positions of the range asked for exist past "
                                       "`toPosition` and were not checked: one request checks at most 500,000 "
                                       "positions; ask again from `toPosition` + 1.")
    asked_to_position: BigInt | None = strawberry.field(default=None, description="The end of the range asked "
                                                        "for (the head when none was given).")
    head: BigInt | None = strawberry.field(default=None, description="The log's last position when checked.")


@strawberry.type
class NodeOccupancy:
    id: str
    gpus: BigInt
    used_gpus: BigInt
    state: str


@strawberry.type
class Occupancy:
    position: BigInt
    total_gpus: BigInt
    used_gpus: BigInt
    free_gpus: BigInt = strawberry.field(description="The nodes' free GPUs (as Node.freeGpus).")
    running_jobs: BigInt
    waiting_jobs: BigInt
    nodes: list[NodeOccupancy]
    clusters: list[ClusterOccupancy] = strawberry.field(
        default_factory=list, description="Each cluster's occupancy (as Query.clusterOccupancy answers it).")


@strawberry.type
class ApiToken:
    id: str
    subject: str
    role: str
    scopes: list[str]
    created_at: float
    created_by: str
    expires_at: float | None
    revoked_at: float | None
