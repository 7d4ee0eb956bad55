"""The GraphQL schema (Strawberry): queries over the projections and the log, mutations that publish
commands to Kafka and wait for their outcome, subscriptions that follow the log.

Authorisation happens in every resolver, on every id: a principal sees only what its role and scopes
allow (steward.auth.access); anything else is answered exactly as if it did not exist, and the denial is
recorded. Business outcomes of mutations are union payloads; top-level errors are system faults, or
typed user errors (`extensions.code`) for role-level refusals and bad arguments.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import strawberry
from graphql import GraphQLError, OperationDefinitionNode
from strawberry.extensions import (
    AddValidationRules,
    MaskErrors,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    ParserCache,
    QueryDepthLimiter,
    SchemaExtension,
    ValidationCache,
)
from strawberry.types import Info

from steward.api import audit, fields, history, identity, namespaces, whatif
from steward.api import overview as reports
from steward.api.clusters import (
    ClusterOccupancy,
    GpuModel,
    GpuModelWeightInput,
    cluster_occupancy,
    gpu_models_of,
    node_gpus,
)
from steward.api.commands import Outcome, OutcomeTimeout
from steward.api.context import BadInput, Context, Forbidden, UserError
from steward.api.explain import WAITING, queued, why_pending, why_preempted
from steward.api.figures import DEFAULT_WINDOW_S
from steward.api.notifications import NotificationQueries, SetNotificationsResult, set_notifications
from steward.api.payloads import (
    AllocationsChanged,
    CancelJobResult,
    CreateTokenResult,
    DebugQuotaChanged,
    DisplayNameChanged,
    DrainNodeResult,
    EventFilter,
    InvalidInput,
    JobAccepted,
    JobCancelled,
    JobFilter,
    NodeDraining,
    NodeRegistered,
    NodeResumed,
    NodeRetired,
    NotAuthorised,
    OpenSessionInput,
    OpenSessionResult,
    PinChanged,
    PolicyInput,
    PolicySet,
    PreemptionRequested,
    RegisterNodeInput,
    RegisterNodeResult,
    Rejected,
    RequestPreemptionResult,
    RestoreSessionResult,
    ResumeNodeResult,
    RetireNodeResult,
    RevokeTokenResult,
    SessionOpened,
    SessionRestored,
    SetAllocationsResult,
    SetDebugQuotaResult,
    SetDisplayNameResult,
    SetPinResult,
    SetPolicyResult,
    ShareInput,
    SubmitJobInput,
    SubmitJobResult,
    SubmitOutlookResult,
    TokenCreated,
    TokenRevoked,
    outlook_of,
)
from steward.api.readmodel import QueueItem, ReadView
from steward.api.scalars import BigInt
from steward.api.types import (
    AccessDenial,
    AccessDenialConnection,
    Allocation,
    AllocationAt,
    ApiToken,
    Domain,
    Event,
    EventConnection,
    EventEdge,
    Explanation,
    Job,
    JobAt,
    JobConnection,
    JobEdge,
    Me,
    Node,
    NodeAt,
    NodeOccupancy,
    Occupancy,
    PageInfo,
    Queue,
    QueueEntry,
    StateAt,
    StateCount,
    Verification,
    decode_cursor,
    encode_cursor,
)
from steward.audit.verify import range_problem
from steward.auth.access import ROOT, Access, Capability, subtree
from steward.auth.principal import Role
from steward.auth.tokens import InvalidTokenRequest, TokenInfo
from steward.bus.kafka import KAFKA_RETRY_AFTER_S, KafkaUnavailable
from steward.domain import clusters
from steward.domain.clusters import DEFAULT_CLUSTER
from steward.domain.commands import (
    DEFAULT_GRACE_S,
    JOB_CLASSES,
    CancelJob,
    Command,
    DrainNode,
    MapNamespace,
    RegisterNode,
    RequestPreemption,
    RestoreSession,
    ResumeNode,
    RetireNode,
    SetAllocations,
    SetGpuModelWeights,
    SetGroupMapping,
    SetPolicy,
    SubmitJob,
)
from steward.domain.decide import (
    MAX_MIN_RUNTIME_S,
    require_known_project,
    require_placeable,
    require_valid_job_shape,
)
from steward.domain.display_names import display_name_problem
from steward.domain.errors import DomainError
from steward.domain.ids import id_problem, require_new_ids, shown
from steward.domain.state import JOB_STATES, AllocationNode, ClusterNode, LedgerState
from steward.store.unavailable import CODE as STORE_UNAVAILABLE
from steward.store.unavailable import RETRY_AFTER_S, unavailable, unavailable_message

NOT_FOUND_OR_NOT_YOURS = "no {kind} '{id}' that you may {verb}"
SESSION_CAP_S = 8 * 3600.0
MAX_WINDOW_S = 90 * 24 * 3600.0
MAX_GRACE_S = 3600.0


def _ctx(info: Info[Context, None]) -> Context:
    return info.context


def _page_size(ctx: Context, first: int) -> int:
    cap = ctx.services.settings.api_max_page
    if not 1 <= first <= cap:
        raise BadInput(f"'first' must be between 1 and {cap}, got {first}")
    return first


def _rejected(outcome: Outcome) -> Rejected | None:
    rec = outcome.rejected
    return Rejected(code=rec.payload["code"], reason=rec.payload["reason"]) if rec else None


async def _execute(ctx: Context, command: Command) -> Outcome:
    principal = ctx.who(command.TYPE)
    try:
        require_new_ids(command)  # the ledger's rule (steward.domain.ids), answered before a round trip
    except DomainError as err:
        raise BadInput(err.message) from None
    try:
        outcome = await ctx.services.gateway.execute(command, actor=principal.subject, role=principal.role.value,
                                                     actor_name=principal.name)
    except OutcomeTimeout as err:
        raise UserError(str(err), "OUTCOME_TIMEOUT") from None
    await ctx.services.read.reached(outcome.position)  # read-your-writes (docs/api.md "Replicas")
    ctx.position(outcome.position)
    ctx._view = None
    return outcome


def _ledger_state(snap: ReadView) -> LedgerState:
    """The part of the ledger's state a submit is checked against: the org tree and the nodes."""
    return LedgerState(allocations={a["name"]: AllocationNode(a["name"], a["parent"], a["share"],
                                                              a.get("debug_quota_gpus"), pin=a.get("pin"))
                                    for a in snap.allocations},
                       nodes={n["node_id"]: ClusterNode(n["node_id"], int(n["gpus"]), n["gpu_model"],
                                                        tuple(n["path"]), n["executor"], n["state"],
                                                        int(n.get("foreign_gpus", 0)),
                                                        str(n.get("cluster") or DEFAULT_CLUSTER))
                              for n in snap.nodes})


def _may_run_on(ctx: Context, snap: ReadView, item: QueueItem) -> frozenset[str]:
    """The clusters a waiting job may run on: the policy's (`PolicyOrder.clusters`, with its allocation's pin);
    without a policy view, the clusters with a node the job's request admits."""
    if item.clusters is not None:
        return item.clusters
    models, names = ctx.services.read.cached_accepts(item.job["job_id"]) or ((), ())
    return frozenset(clusters.cluster_name(str(n.get("cluster") or "")) for n in snap.nodes
                     if clusters.admits(models, names, n["gpu_model"], str(n.get("cluster") or "")))


async def _visible_job(ctx: Context, job_id: str, operation: str) -> tuple[dict[str, Any] | None, Access]:
    """The job row if it exists and the principal may see it; otherwise None, with the denial recorded
    when it exists (the answer is the same either way)."""
    access = await ctx.access(operation)
    row = await asyncio.to_thread(ctx.services.read.job, job_id)
    if row is not None and not access.sees(row["project"]):
        await ctx.deny(operation, f"job:{job_id}", "outside the principal's scopes")
        return None, access
    return row, access


# -- queries ---------------------------------------------------------------------------------------


@strawberry.type
class Query(NotificationQueries):  # notifications' queries: steward.api.notifications
    @fields.field("Liveness (needs no data access).")
    def health(self) -> str:
        return "ok"

    @fields.field("Who you are: subject, role, scopes and what the role may do.")
    async def me(self, info: Info[Context, None]) -> Me:
        access = await _ctx(info).access("me")
        p = access.principal
        return Me(subject=p.subject, role=p.role.value, scopes=list(p.scopes), token_id=p.token_id, via=p.via,
                  capabilities=sorted(c.value for c in Capability if access.can(c)), name=p.display)

    @fields.field("The allocation tree (depth-first, flat: name, parent, depth) with "
                                  "entitlement, usage in the window, owed vs delivered and burn. "
                                  "Amounts are GPU-seconds; the window defaults to 7 days.")
    async def allocations(self, info: Info[Context, None], window_s: float = DEFAULT_WINDOW_S,
                          under: str | None = None) -> list[Allocation]:
        return await _allocations(_ctx(info), window_s, under, "allocations")

    @fields.field("The allocation history, newest first: one entry per allocation a recorded change named (who, "
                  "when, why, share and debug quota before -> after). Only allocations you may see (managers: "
                  "their subtree); `under` narrows it to one node's subtree; at most `first` entries.")
    async def allocation_history(self, info: Info[Context, None], under: str | None = None,
                                 first: int = 100) -> list[history.AllocationChangeEntry]:
        ctx = _ctx(info)
        n = _page_size(ctx, first)
        access = await ctx.access("allocationHistory")
        if under is not None and under != ROOT and not access.sees(under):
            await ctx.deny("allocationHistory", f"allocation:{under}", "outside the principal's scopes")
            return []
        changes = await asyncio.to_thread(history.read_allocation_changes, ctx.services.store)
        only = subtree((await ctx.view()).parents, [under]) if under is not None and under != ROOT else None
        return [history.AllocationChangeEntry.of(c) for c in history.visible_changes(changes, access.sees, only, n)]

    @fields.field("The submit preview: what this job would get if submitted now (funded, or unfunded and why; its "
                  "protection; for debug work whether it is inside its allocation's debug quota). Nothing is "
                  "recorded.")
    async def submit_outlook(self, info: Info[Context, None], input: SubmitJobInput) -> SubmitOutlookResult:
        ctx = _ctx(info)
        command = SubmitJob(
            job_id=input.job_id or "", project=input.project, gpus=input.gpus, min_runtime_s=input.min_runtime_s,
            command=list(input.command) or ["(preview)"], resumable=input.resumable, job_class=input.job_class,
            priority=input.priority, gpu_models=list(input.gpu_models or []), clusters=list(input.clusters or []),
        )
        refused = await _submittable(ctx, replace(command, job_id=command.job_id or "preview"), "submitOutlook")
        if refused is not None:
            return refused
        ctx.no_cache()
        return await outlook_of(ctx, command)

    @fields.field("Projects (leaves of the tree) you may see, with their figures.")
    async def projects(self, info: Info[Context, None], window_s: float = DEFAULT_WINDOW_S) -> list[Allocation]:
        return [a for a in await _allocations(_ctx(info), window_s, None, "projects") if a.is_project]

    @fields.field("The overview's figures, computed from the log: occupancy over time (funded, unfunded, idle), "
                  "demand by hour of week, waits by class, preemptions per day over [sinceS, untilS] (default: "
                  "the last 7 days to now), and owed vs delivered for the current period and `pastPeriods` "
                  "past ones (from PeriodClosed events).")
    async def overview(self, info: Info[Context, None], since_s: float | None = None, until_s: float | None = None,
                       points: int = 240, utc_offset_s: int = 0, period_s: float = 86400.0,
                       past_periods: int = 3) -> reports.Overview:
        return await reports.overview(_ctx(info), since_s, until_s, points, utc_offset_s, period_s, past_periods)

    @fields.field("The budget report: owed vs delivered per allocation for the current period and the "
                  "`periods` - 1 before it (periods of `periodS`, aligned to the epoch), with the same rows as CSV. "
                  "Time travel: `position` pins it to the log up to that position (figures to the time it was "
                  "recorded), `at` to the events recorded by that time (epoch seconds); either answers the same "
                  "whenever asked. A position past the head or a time before the log starts is refused.")
    async def budget_report(self, info: Info[Context, None], period_s: float = 86400.0, periods: int = 7,
                            position: BigInt | None = None, at: float | None = None) -> reports.BudgetReport:
        return await reports.budget_report(_ctx(info), period_s, periods, position=None if position is None
                                           else int(position), at=at)

    @fields.field("What-if: replay the jobs of the last `windowS` (at most `maxJobs`, newest kept) through the "
                  "simulator with the current tree and with `parent`'s children re-shared as proposed; owed vs "
                  "delivered per allocation and waits by class for both (managers: own subtree).")
    async def what_if(self, info: Info[Context, None], parent: str, shares: list[ShareInput],
                      window_s: float = whatif.DEFAULT_WINDOW_S,
                      max_jobs: int = whatif.DEFAULT_MAX_JOBS) -> whatif.WhatIfResult:
        return await whatif.what_if(_ctx(info), parent, shares, window_s, max_jobs)

    @fields.field("Jobs you may see, newest first (a Relay connection).")
    async def jobs(self, info: Info[Context, None], first: int = 50, after: str | None = None,
                   filter: JobFilter | None = None) -> JobConnection:
        return await _jobs(_ctx(info), first, after, filter, None, "jobs")

    @fields.field("Interactive sessions you may see, newest first (a Relay connection).")
    async def sessions(self, info: Info[Context, None], first: int = 50, after: str | None = None,
                       filter: JobFilter | None = None) -> JobConnection:
        return await _jobs(_ctx(info), first, after, filter, "interactive", "sessions")

    @fields.field("One job (null when it does not exist or you may not see it).")
    async def job(self, info: Info[Context, None], id: strawberry.ID) -> Job | None:
        row, _ = await _visible_job(_ctx(info), str(id), "job")
        return Job.of(row) if row else None

    @fields.field("How many jobs are in each state, cluster-wide (counts only).")
    async def job_counts(self, info: Info[Context, None]) -> list[StateCount]:
        ctx = _ctx(info)
        ctx.who("jobCounts")
        counts = ctx.services.read.cached_job_counts()
        if counts is None:
            counts = await asyncio.to_thread(ctx.services.read.job_counts)
        if ctx.services.read.counts_head() < ctx.services.read.known_head():
            ctx.no_cache()
        return [StateCount(state=s, count=counts.get(s, 0)) for s in JOB_STATES]

    @fields.field("The queue in the order the scheduler takes it: position overall and in "
                                  "the project, reason code and GPUs blocking. Other tenants' jobs appear "
                                  "only as positions. `cluster` narrows it to the jobs that may run on that "
                                  "cluster (the GPU models and clusters they accept, their allocation's pin), each "
                                  "with its position there (`positionInCluster`).")
    async def queue(self, info: Info[Context, None], first: int = 100, project: str | None = None,
                    cluster: str | None = None) -> Queue:
        ctx = _ctx(info)
        n = _page_size(ctx, first)
        access = await ctx.access("queue")
        snap = await ctx.view()
        if project is not None and not access.sees(project):
            await ctx.deny("queue", f"project:{project}", "outside the principal's scopes")
            return Queue(waiting=0, waiting_gpus=0, entries=[])
        items = snap.queue_cached()
        if items is None:
            items = await asyncio.to_thread(snap.queue)
        in_cluster: dict[str, int] = {}
        if cluster is not None:
            known = sorted(set(snap.node_clusters().values()))
            if cluster not in known:
                raise BadInput(f"no cluster {cluster!r}: the clusters are {', '.join(known) or '(none yet)'}")
            items = [i for i in items if cluster in _may_run_on(ctx, snap, i)]
            in_cluster = {i.job["job_id"]: k for k, i in enumerate(items, 1)}
        shown = [i for i in items if project is None or i.job["project"] == project][:n]
        ids = [i.job["job_id"] for i in shown if access.sees(i.job["project"])]
        read = ctx.services.read
        deferrals = read.cached_deferrals(snap.head, ids)
        if deferrals is None:
            deferrals = await asyncio.to_thread(read.deferrals_at, snap.head, ids)
        entries: list[QueueEntry] = []
        for item in shown:
            job = item.job
            if access.sees(job["project"]):
                why = queued(job, snap, item, deferrals.get(job["job_id"]))
                entries.append(QueueEntry(position=item.position, mine=True,
                                          position_in_project=item.position_in_project, job=Job.of(job),
                                          reason=why.reason, text=why.text, blocking_gpus=why.blocking_gpus,
                                          blocking_scope=why.blocking_scope, blocking_until=why.blocking_until,
                                          source=why.source, position_in_clusters=item.position_in_clusters,
                                          position_in_cluster=in_cluster.get(job["job_id"])))
            else:
                entries.append(QueueEntry(position=item.position, mine=False, position_in_project=None, job=None,
                                          reason=None, text=None, blocking_gpus=None,
                                          position_in_cluster=in_cluster.get(job["job_id"])))
        scoped = [i for i in items if project is None or i.job["project"] == project]
        return Queue(waiting=len(scoped), waiting_gpus=sum(int(i.job["gpus"]) for i in scoped), entries=entries)

    @fields.field("Why a job waits: plain words and evidence (null: no such job you may see).")
    async def why_pending(self, info: Info[Context, None], job: strawberry.ID) -> Explanation | None:
        ctx = _ctx(info)
        row, _ = await _visible_job(ctx, str(job), "whyPending")
        if row is None:
            return None
        events = await asyncio.to_thread(ctx.services.store.stream, f"job-{row['job_id']}")
        snap = await ctx.view()
        return Explanation.of(await asyncio.to_thread(why_pending, row, events, snap))

    @fields.field("Why a job was preempted: plain words and evidence (null: no such job).")
    async def why_preempted(self, info: Info[Context, None], job: strawberry.ID) -> Explanation | None:
        ctx = _ctx(info)
        row, _ = await _visible_job(ctx, str(job), "whyPreempted")
        if row is None:
            return None
        events = await asyncio.to_thread(ctx.services.store.stream, f"job-{row['job_id']}")
        return Explanation.of(why_preempted(row, events))

    @fields.field("Nodes with topology path and occupancy.")
    async def nodes(self, info: Info[Context, None]) -> list[Node]:
        ctx = _ctx(info)
        access = await ctx.access("nodes")
        snap = await ctx.view()
        used = snap.used_gpus()
        on_node: dict[str, list[str]] = {}
        others: dict[str, int] = {}
        for j in snap.active_jobs:
            if j["state"] in ("PLACED", "RUNNING"):
                for node in j["assignments"] or {}:
                    if access.sees(j["project"]):
                        on_node.setdefault(node, []).append(j["job_id"])
                    else:
                        others[node] = others.get(node, 0) + 1
        return [Node(id=n["node_id"], gpus=n["gpus"], gpu_model=n["gpu_model"], path=list(n["path"]),
                     cluster=clusters.cluster_name(str(n.get("cluster") or "")),
                     executor=n["executor"], state=n["state"], used_gpus=used.get(n["node_id"], 0),
                     free_gpus=node_gpus(n, used)[1],
                     jobs=sorted(on_node.get(n["node_id"], [])), other_jobs=others.get(n["node_id"], 0),
                     foreign_gpus=n.get("foreign_gpus", 0)) for n in snap.nodes]

    @fields.field("The GPU models of the registered nodes with the weight each is charged at (budget units per "
                  "GPU-hour; ADR 0057), their GPUs, nodes and clusters.")
    async def gpu_models(self, info: Info[Context, None]) -> list[GpuModel]:
        ctx = _ctx(info)
        await ctx.access("gpuModels")
        found: list[GpuModel] = await asyncio.to_thread(ctx.services.read.policy.read,
                                                        lambda state, settings, now: gpu_models_of(state, settings))
        return found

    @fields.field("Each cluster's occupancy now (ADR 0057): nodes and GPUs busy, free, draining and down, in all "
                  "and per GPU model, by cluster name.")
    async def cluster_occupancy(self, info: Info[Context, None]) -> list[ClusterOccupancy]:
        ctx = _ctx(info)
        await ctx.access("clusterOccupancy")
        snap = await ctx.view()
        order = await asyncio.to_thread(snap.policy_order)
        return cluster_occupancy(snap.nodes, snap.used_gpus(), order.largest_by_cluster if order is not None else None)

    @fields.field("Topology domains (every prefix of the nodes' paths) with occupancy.")
    async def topology(self, info: Info[Context, None]) -> list[Domain]:
        ctx = _ctx(info)
        await ctx.access("topology")
        snap = await ctx.view()
        used = snap.used_gpus()
        agg: dict[tuple[str, ...], list[int]] = {}
        for n in snap.nodes:
            path = tuple(n["path"])
            busy, free, _draining, _down = node_gpus(n, used)
            for d in range(len(path) + 1):
                a = agg.setdefault(path[:d], [0, 0, 0, 0, 0])
                a[0] += 1
                a[1] += n["gpus"]
                a[2] += busy
                a[3] = max(a[3], free)
                a[4] += free
        return [Domain(path=list(p), depth=len(p), nodes=a[0], gpus=a[1], used_gpus=a[2], free_gpus=a[4],
                       largest_free_on_one_node=a[3]) for p, a in sorted(agg.items())]

    @fields.field("The audit event stream, filtered, after a cursor (auditors, admins).")
    async def audit_events(self, info: Info[Context, None], first: int = 100, after: str | None = None,
                           filter: EventFilter | None = None) -> EventConnection:
        ctx = _ctx(info)
        await ctx.require(Capability.read_audit, "auditEvents")
        n = _page_size(ctx, first)
        start = _position_cursor(after, "ev")
        f = filter or EventFilter()
        q = audit.EventQuery(f.stream_id, f.stream_prefix, tuple(f.types or ()), f.actor, f.since, f.until)
        events, scanned, more = await asyncio.to_thread(audit.read_events, ctx.services.store, q, start, n)
        edges = [EventEdge(cursor=encode_cursor("ev", str(e.position)), node=Event.of(e)) for e in events]
        end = encode_cursor("ev", str(events[-1].position if events and more else scanned))
        return EventConnection(edges=edges, scanned_to=scanned, page_info=PageInfo(
            has_next_page=more, has_previous_page=start > 0,
            start_cursor=edges[0].cursor if edges else None, end_cursor=end))

    @fields.field("Access denials as recorded in the log (AccessDenied events), oldest first "
                  "(auditors, admins); `subject` filters by the denied subject.")
    async def access_denials(self, info: Info[Context, None], first: int = 100, after: str | None = None,
                             subject: str | None = None) -> AccessDenialConnection:
        ctx = _ctx(info)
        ctx.no_cache()
        await ctx.require(Capability.read_audit, "accessDenials")
        n = _page_size(ctx, first)
        start = _position_cursor(after, "den")
        q = audit.EventQuery(stream_prefix="access-", types=("AccessDenied",), actor=subject)
        events, scanned, more = await asyncio.to_thread(audit.read_events, ctx.services.store, q, start, n)
        end = events[-1].position if events and more else scanned
        return AccessDenialConnection(
            edges=[AccessDenial.of(e) for e in events],
            page_info=PageInfo(has_next_page=more, has_previous_page=start > 0,
                               start_cursor=encode_cursor("den", str(events[0].position)) if events else None,
                               end_cursor=encode_cursor("den", str(end))))

    @fields.field("The state folded from the log up to a position or a time "
                                  "(auditors, admins); the head when neither is given.")
    async def state_at(self, info: Info[Context, None], position: BigInt | None = None, time: float | None = None,
                       jobs_first: int = 200) -> StateAt:
        ctx = _ctx(info)
        await ctx.require(Capability.read_audit, "stateAt")
        n = _page_size(ctx, jobs_first)
        store = ctx.services.store
        if position is not None and time is not None:
            raise BadInput("give 'position' or 'time', not both")
        if position is not None:
            target = position
        elif time is not None:
            target = await asyncio.to_thread(store.position_at, time)
        else:
            target = await asyncio.to_thread(store.head)
        page = await asyncio.to_thread(audit.state_at, store, target, n)
        counts = page.job_counts
        return StateAt(
            position=page.position, recorded_at=page.recorded_at,
            allocations=[AllocationAt(name=a.name, parent=a.parent, share=a.share) for a in page.allocations],
            nodes=[NodeAt(id=x.node_id, gpus=x.gpus, gpu_model=x.gpu_model, path=list(x.path), state=x.state)
                   for x in page.nodes],
            job_counts=[StateCount(state=s, count=counts[s]) for s in JOB_STATES if s in counts],
            jobs=[JobAt(id=j.job_id, project=j.project, state=j.state, gpus=j.gpus, attempt=j.attempt)
                  for j in page.jobs],
            jobs_truncated=page.jobs_total > n)

    @fields.field("Recompute the hash chain over [fromPosition, toPosition] (auditors, admins); toPosition "
                  "defaults to the head. One request checks at most 500,000 positions: past that the answer "
                  "says `truncated` and the last position it checked, and is not ok.")
    async def verify(self, info: Info[Context, None], from_position: BigInt = 1,
                     to_position: BigInt | None = None) -> Verification:
        ctx = _ctx(info)
        # checked now, never served from the result cache: a row altered in place does not move the head, so an
        # answer kept for the head (or a store that went away since) would vouch for what it did not read
        ctx.no_cache()
        await ctx.require(Capability.read_audit, "verify")
        store = ctx.services.store
        head = await asyncio.to_thread(store.head)
        if (problem := range_problem(from_position, to_position, head, ("fromPosition", "toPosition"))) is not None:
            raise BadInput(problem)
        r = await asyncio.to_thread(audit.verify_range, store, from_position,
                                    to_position if to_position is not None else head)
        return Verification(from_position=r.from_position, to_position=r.to_position, checked=r.checked, ok=r.ok,
                            first_bad_position=r.first_bad_position, problem=r.problem, truncated=r.truncated,
                            asked_to_position=r.asked_to, head=r.head)

    @fields.field("The group mapping in force: which role and scopes each group of the OpenID provider gives "
                  "(admins and auditors).")
    async def group_mapping(self, info: Info[Context, None]) -> identity.GroupMapping:
        ctx = _ctx(info)
        ctx.no_cache()
        access = await ctx.access("groupMapping")
        if not (access.can(Capability.manage_identities) or access.can(Capability.read_audit)):
            await ctx.deny("groupMapping", "*", f"role {access.role.value} may not read the group mapping")
            raise Forbidden("groupMapping")
        return await identity.group_mapping(ctx)

    @fields.field("The namespace mappings in force in one Kubernetes cluster (its executor's id): which project "
                  "each namespace's pods charge (admins and auditors; ADR 0054).")
    async def namespace_mappings(self, info: Info[Context, None],
                                 executor: str) -> list[namespaces.NamespaceMapping]:
        ctx = _ctx(info)
        ctx.no_cache()
        access = await ctx.access("namespaceMappings")
        if not (access.can(Capability.operate) or access.can(Capability.read_audit)):
            await ctx.deny("namespaceMappings", "*", f"role {access.role.value} may not read namespace mappings")
            raise Forbidden("namespaceMappings")
        return await namespaces.namespace_mappings(ctx, executor)

    @fields.field("API tokens (admins); secrets are never shown again.")
    async def tokens(self, info: Info[Context, None]) -> list[ApiToken]:
        ctx = _ctx(info)
        ctx.no_cache()
        await ctx.require(Capability.manage_tokens, "tokens")
        return [_token(t) for t in await asyncio.to_thread(ctx.services.tokens.list)]


async def _allocations(ctx: Context, window_s: float, root: str | None, operation: str) -> list[Allocation]:
    if not 3600.0 <= window_s <= MAX_WINDOW_S:
        raise BadInput(f"'windowS' must be between 3600 and {MAX_WINDOW_S:.0f} seconds")
    access = await ctx.access(operation)
    if root is not None and root != ROOT and not access.sees(root):
        await ctx.deny(operation, f"allocation:{root}", "outside the principal's scopes")
        return []
    figs = ctx.services.read.cached_figures(window_s)
    if figs is None:
        figs = await asyncio.to_thread(ctx.services.read.figures, window_s)
    if ctx.services.read.figures_head(window_s) < ctx.services.read.known_head():
        ctx.no_cache()
    under = subtree((await ctx.view()).parents, [root]) if root is not None and root != ROOT else None
    return [Allocation.of(f) for f in figs if access.sees(f.name) and (under is None or f.name in under)]


def _token(t: TokenInfo) -> ApiToken:
    return ApiToken(id=t.token_id, subject=t.subject, role=t.role, scopes=list(t.scopes), created_at=t.created_at,
                    created_by=t.created_by, expires_at=t.expires_at, revoked_at=t.revoked_at)


def _position_cursor(after: str | None, kind: str) -> int:
    if after is None:
        return 0
    parts = decode_cursor(after, kind, 1)
    if parts is None or not parts[0].isdigit():
        raise BadInput("'after' is not a cursor this field gave out")
    return int(parts[0])


async def _jobs(ctx: Context, first: int, after: str | None, f: JobFilter | None, job_class: str | None,
                operation: str) -> JobConnection:
    n = _page_size(ctx, first)
    access = await ctx.access(operation)
    f = f or JobFilter()
    if f.states and not set(f.states) <= set(JOB_STATES):
        raise BadInput(f"'states' must be among {', '.join(JOB_STATES)}")
    if f.job_class is not None and f.job_class not in JOB_CLASSES:
        raise BadInput(f"'jobClass' must be one of {', '.join(JOB_CLASSES)}")
    if f.project is not None and not access.sees(f.project):
        await ctx.deny(operation, f"project:{f.project}", "outside the principal's scopes")
        return JobConnection(edges=[], page_info=PageInfo(has_next_page=False, has_previous_page=False,
                                                          start_cursor=None, end_cursor=None))
    cursor: tuple[float, str] | None = None
    if after is not None:
        parts = decode_cursor(after, "job", 2)
        try:
            cursor = (float(parts[0]), parts[1]) if parts else None
        except ValueError:
            cursor = None
        if cursor is None:
            raise BadInput("'after' is not a cursor this field gave out")
    mine = None
    if f.mine and ctx.services.owners is not None:
        mine = await asyncio.to_thread(ctx.services.owners.jobs_of, access.principal.subject,
                                       ctx.services.read.known_head())
    rows = await asyncio.to_thread(
        ctx.services.read.jobs_page, projects=access.visible_projects(), states=f.states, project=f.project,
        job_class=job_class or f.job_class, submitted_after=f.submitted_after, submitted_before=f.submitted_before,
        after=cursor, limit=n + 1, job_ids=mine)
    more = len(rows) > n
    rows = rows[:n]
    edges = [JobEdge(cursor=encode_cursor("job", repr(r["submitted_at"]), r["job_id"]), node=Job.of(r)) for r in rows]
    return JobConnection(edges=edges, page_info=PageInfo(
        has_next_page=more, has_previous_page=after is not None,
        start_cursor=edges[0].cursor if edges else None, end_cursor=edges[-1].cursor if edges else None))


# -- mutations -------------------------------------------------------------------------------------


def _not_authorised(kind: str, id: str, verb: str) -> NotAuthorised:
    return NotAuthorised(message=NOT_FOUND_OR_NOT_YOURS.format(kind=kind, id=id, verb=verb))


async def _operate_node(ctx: Context, mutation: str, verb: str, command: DrainNode | ResumeNode | RetireNode,
                        ) -> NotAuthorised | InvalidInput | Rejected | Outcome:
    """An operator's change to a node (drain, resume, retire; admins): refused without the operate capability or
    a reason (the refusal), else recorded (its outcome) or rejected by the ledger (`Rejected`)."""
    access = await ctx.access(mutation)
    if (refused := await _role_refused(ctx, access, Capability.operate, mutation)) is not None:
        return refused
    if not command.reason.strip():
        return InvalidInput(field="reason", message=f"{verb} a node needs a reason")
    outcome = await _execute(ctx, command)
    return _rejected(outcome) or outcome


async def _role_refused(ctx: Context, access: Access, capability: Capability, operation: str) -> NotAuthorised | None:
    if access.can(capability):
        return None
    await ctx.deny(operation, "*", f"role {access.role.value} lacks {capability.value}")
    return NotAuthorised(message=f"your role ({access.role.value}) may not use '{operation}'")


async def _submittable(ctx: Context, command: SubmitJob, operation: str) -> InvalidInput | NotAuthorised | None:
    """None when the principal may submit `command` and it has a valid shape for a known project."""
    access = await ctx.access(operation)
    if (refused := await _role_refused(ctx, access, Capability.work, operation)) is not None:
        return refused
    if not access.works_in(command.project):
        await ctx.deny(operation, f"project:{command.project}", "outside the principal's scopes")
        return _not_authorised("project", command.project, "submit to")
    try:
        require_valid_job_shape(command)
        state = _ledger_state(await ctx.view())
        require_known_project(state, command.project)
        registered = clusters.registered_catalogue(state.nodes)
        clusters.require_known_request(command, registered.models, registered.clusters)
        require_placeable(state, command.gpus, command.gpu_models, command.clusters)
    except DomainError as err:
        return InvalidInput(field=None, message=err.message)
    return None


async def _submit(ctx: Context, command: SubmitJob, operation: str) -> JobAccepted | Rejected | InvalidInput | \
        NotAuthorised:
    if (refused := await _submittable(ctx, command, operation)) is not None:
        return refused
    outcome = await _execute(ctx, command)
    if (rej := _rejected(outcome)) is not None:
        return rej
    row = await asyncio.to_thread(ctx.services.read.job, command.job_id)
    if row is None:
        raise UserError("the job was recorded but its projection is not there yet; retry the read", "LAGGING")
    return JobAccepted(job=Job.of(row), submitted=command)


def _new_id(prefix: str, given: str | None) -> str:
    return given if given else f"{prefix}-{uuid.uuid4().hex[:12]}"


@strawberry.type
class Mutation:
    @fields.mutation("Submit a batch, debug or interactive job to a project you work in.")
    async def submit_job(self, info: Info[Context, None], input: SubmitJobInput) -> SubmitJobResult:
        if input.job_id is not None and (problem := id_problem(input.job_id)) is not None:
            return InvalidInput(field="jobId", message=f"the job id {shown(input.job_id)} {problem}")
        command = SubmitJob(
            job_id=_new_id("j", input.job_id), project=input.project, gpus=input.gpus,
            min_runtime_s=input.min_runtime_s, command=list(input.command), resumable=input.resumable,
            job_class=input.job_class, priority=input.priority, gpu_models=list(input.gpu_models or []),
            clusters=list(input.clusters or []),
        )
        return await _submit(_ctx(info), command, "submitJob")

    @fields.mutation("Cancel a job of a project you work in.")
    async def cancel_job(self, info: Info[Context, None], id: strawberry.ID, reason: str = "") -> CancelJobResult:
        ctx = _ctx(info)
        access = await ctx.access("cancelJob")
        if (refused := await _role_refused(ctx, access, Capability.work, "cancelJob")) is not None:
            return refused
        row = await asyncio.to_thread(ctx.services.read.job, str(id))
        if row is None and access.role is not Role.admin:
            await ctx.deny("cancelJob", f"job:{id}", "no such job")
            return _not_authorised("job", str(id), "cancel")
        if row is not None and not access.works_in(row["project"]):
            await ctx.deny("cancelJob", f"job:{id}", "outside the principal's scopes")
            return _not_authorised("job", str(id), "cancel")
        outcome = await _execute(ctx, CancelJob(job_id=str(id), reason=reason[:500]))
        if (rej := _rejected(outcome)) is not None:
            return rej
        row = await asyncio.to_thread(ctx.services.read.job, str(id))
        assert row is not None, "a recorded JobCancelled has its projection row"
        return JobCancelled(job=Job.of(row))

    @fields.mutation("Open an interactive session: protected for its cap, then checkpointed.")
    async def open_session(self, info: Info[Context, None], input: OpenSessionInput) -> OpenSessionResult:
        if not 0 < input.cap_s <= min(SESSION_CAP_S, MAX_MIN_RUNTIME_S):
            return InvalidInput(field="capS", message=f"a session cap is in (0, {SESSION_CAP_S:.0f}] seconds")
        if input.session_id is not None and (problem := id_problem(input.session_id)) is not None:
            return InvalidInput(field="sessionId", message=f"the session id {shown(input.session_id)} {problem}")
        command = SubmitJob(job_id=_new_id("s", input.session_id), project=input.project, gpus=input.gpus,
                            min_runtime_s=input.cap_s, command=list(input.command), resumable=True,
                            job_class="interactive", gpu_models=list(input.gpu_models or []),
                            clusters=list(input.clusters or []))
        res = await _submit(_ctx(info), command, "openSession")
        return SessionOpened(job=res.job, submitted=res.submitted) if isinstance(res, JobAccepted) else res

    @fields.mutation("Restore a session from its last checkpoint.")
    async def restore_session(self, info: Info[Context, None], id: strawberry.ID) -> RestoreSessionResult:
        ctx = _ctx(info)
        access = await ctx.access("restoreSession")
        if (refused := await _role_refused(ctx, access, Capability.work, "restoreSession")) is not None:
            return refused
        row = await asyncio.to_thread(ctx.services.read.job, str(id))
        if row is None or not access.works_in(row["project"]) or row["job_class"] != "interactive":
            await ctx.deny("restoreSession", f"session:{id}", "no such session in the principal's scopes")
            return _not_authorised("session", str(id), "restore")
        new_id = _new_id("s", None)
        outcome = await _execute(ctx, RestoreSession(job_id=str(id), new_job_id=new_id))
        if (rej := _rejected(outcome)) is not None:
            return rej
        new = await asyncio.to_thread(ctx.services.read.job, new_id)
        if new is None:
            raise UserError("the session was restored but its projection is not there yet; retry the read", "LAGGING")
        return SessionRestored(job=Job.of(new))

    @fields.mutation("Ask for a running job's preemption (admins; managers for jobs in their subtree), with a "
                     "reason: checkpoint request, grace, stop, requeue. The ledger refuses it while the job is "
                     "protected (Rejected, code 'protected'). `attempt`, the attempt the caller saw, pins the "
                     "request to it: refused (invalid_transition) once the job has moved on to another attempt; "
                     "without it the request is for whatever attempt is current when the ledger decides.")
    async def request_preemption(self, info: Info[Context, None], job: strawberry.ID, reason: str,
                                 grace_s: float = DEFAULT_GRACE_S, requeue: bool = True,
                                 attempt: BigInt | None = None) -> RequestPreemptionResult:
        ctx = _ctx(info)
        access = await ctx.access("requestPreemption")
        if (refused := await _role_refused(ctx, access, Capability.preempt, "requestPreemption")) is not None:
            return refused
        row = await asyncio.to_thread(ctx.services.read.job, str(job))
        if row is None and access.role is not Role.admin:
            await ctx.deny("requestPreemption", f"job:{job}", "no such job")
            return _not_authorised("job", str(job), "preempt")
        if row is not None and not access.preempts_in(row["project"]):
            await ctx.deny("requestPreemption", f"job:{job}", "outside the principal's scopes")
            return _not_authorised("job", str(job), "preempt")
        if not reason.strip():
            return InvalidInput(field="reason", message="a preemption request needs a reason")
        if not 0 <= grace_s <= MAX_GRACE_S:
            return InvalidInput(field="graceS", message=f"the grace period is 0 to {MAX_GRACE_S:.0f} seconds")
        if attempt is not None and attempt < 1:
            return InvalidInput(field="attempt", message="attempts are numbered from 1")
        p = access.principal
        command = RequestPreemption(job_id=str(job), reason="operator", grace_s=grace_s, requeue=requeue,
                                    attempt=attempt or 0,
                                    evidence={"requested_by": p.subject, "role": p.role.value, "note": reason[:500]}
                                    | ({"requested_by_name": p.name} if p.name else {}))
        outcome = await _execute(ctx, command)
        if (rej := _rejected(outcome)) is not None:
            return rej
        row = await asyncio.to_thread(ctx.services.read.job, str(job))
        requested = next(e for e in outcome.events if e.type == "JobPreemptionRequested")
        if row is None:
            raise UserError("the request was recorded but the job's projection is not there yet; retry the read",
                            "LAGGING")
        return PreemptionRequested(job=Job.of(row), attempt=requested.payload["attempt"],
                                   requested_at=requested.payload["requested_at"],
                                   grace_s=requested.payload["grace_s"], requeue=requested.payload["requeue"],
                                   position=requested.position)

    @fields.mutation("Choose which notifications of an allocation (a project, or a node: its subtree) reach you "
                     "by e-mail or webhook (Slack-compatible JSON); empty `kinds` stops them. Admins may set "
                     "another `subscriber`'s.")
    async def set_notifications(self, info: Info[Context, None], allocation: str, channel: str, target: str,
                                kinds: list[str], subscriber: str | None = None) -> SetNotificationsResult:
        return await set_notifications(_ctx(info), _execute, allocation, channel, target, kinds, subscriber)

    @fields.mutation("Set the shares of a node's children (with a reason).")
    async def set_allocations(self, info: Info[Context, None], parent: str, shares: list[ShareInput],
                              reason: str) -> SetAllocationsResult:
        ctx = _ctx(info)
        access = await ctx.access("setAllocations")
        if (refused := await _role_refused(ctx, access, Capability.set_allocations, "setAllocations")) is not None:
            return refused
        if not access.manages(parent):
            await ctx.deny("setAllocations", f"allocation:{parent}", "outside the principal's scopes")
            return _not_authorised("node", parent, "allocate under")
        if not reason.strip():
            return InvalidInput(field="reason", message="an allocation change needs a reason")
        if not shares:
            return InvalidInput(field="shares", message="give at least one child and its share")
        if len({s.child for s in shares}) != len(shares):
            return InvalidInput(field="shares", message="a child appears more than once")
        for s in shares:
            if (problem := id_problem(s.child)) is not None:
                return InvalidInput(field="shares", message=f"the child {shown(s.child)} {problem}")
        quotas = {s.child: s.debug_quota_gpus for s in shares if s.debug_quota_gpus is not strawberry.UNSET}
        names = {s.child: s.display_name for s in shares if s.display_name is not strawberry.UNSET}
        for child, name in names.items():
            if name is not None and (problem := display_name_problem(name)) is not None:
                return InvalidInput(field="shares", message=f"the display name of {shown(child)} {problem}")
        pins = {s.child: s.pin for s in shares if s.pin is not strawberry.UNSET}
        outcome = await _execute(ctx, SetAllocations(parent=parent, shares={s.child: s.share for s in shares},
                                                     reason=reason, debug_quotas=quotas, display_names=names,
                                                     pins=pins))
        if (rej := _rejected(outcome)) is not None:
            return rej
        return AllocationsChanged(parent=parent, position=outcome.position)

    @fields.mutation("Set an allocation's debug quota (GPUs that may run debug jobs and sessions ahead of the "
                     "fair-share order), with a reason; null puts it back on the default that follows the share. "
                     "Managers set the quotas of their own node's children.")
    async def set_debug_quota(self, info: Info[Context, None], allocation: str, gpus: int | None,
                              reason: str) -> SetDebugQuotaResult:
        ctx = _ctx(info)
        access = await ctx.access("setDebugQuota")
        if (refused := await _role_refused(ctx, access, Capability.set_allocations, "setDebugQuota")) is not None:
            return refused
        # an unknown allocation goes to the ledger under the root (admins), which refuses it by name
        parent = (await ctx.view()).parents.get(allocation, ROOT)
        if not access.manages(parent):
            await ctx.deny("setDebugQuota", f"allocation:{allocation}", "outside the principal's scopes")
            return _not_authorised("allocation", allocation, "set the debug quota of")
        if not reason.strip():
            return InvalidInput(field="reason", message="a debug quota change needs a reason")
        outcome = await _execute(ctx, SetAllocations(parent=parent, shares={}, reason=reason,
                                                     debug_quotas={allocation: gpus}))
        if (rej := _rejected(outcome)) is not None:
            return rej
        return DebugQuotaChanged(allocation=allocation, gpus=gpus, position=outcome.position)

    @fields.mutation("Set what people call a node of the org tree (a project, a team, a division), with a reason; "
                     "null shows its id again. Managers name their own node's children; ids do not change.")
    async def set_display_name(self, info: Info[Context, None], allocation: str, name: str | None,
                               reason: str) -> SetDisplayNameResult:
        ctx = _ctx(info)
        access = await ctx.access("setDisplayName")
        if (refused := await _role_refused(ctx, access, Capability.set_allocations, "setDisplayName")) is not None:
            return refused
        # an unknown allocation goes to the ledger under the root (admins), which refuses it by name
        parent = (await ctx.view()).parents.get(allocation, ROOT)
        if not access.manages(parent):
            await ctx.deny("setDisplayName", f"allocation:{allocation}", "outside the principal's scopes")
            return _not_authorised("allocation", allocation, "name")
        if not reason.strip():
            return InvalidInput(field="reason", message="a display name change needs a reason")
        if name is not None and (problem := display_name_problem(name)) is not None:
            return InvalidInput(field="name", message=f"the display name {shown(name)} {problem}")
        outcome = await _execute(ctx, SetAllocations(parent=parent, shares={}, reason=reason[:500],
                                                     display_names={allocation: name}))
        if (rej := _rejected(outcome)) is not None:
            return rej
        return DisplayNameChanged(allocation=allocation, display_name=name or allocation, position=outcome.position)

    @fields.mutation("Pin an allocation to a cluster (a lab's own hardware; ADR 0067), with a reason: its jobs run "
                     "only there, a job asking for another cluster is refused, and it is owed at most what that "
                     "cluster could deliver; null unpins it. Managers pin their own node's children.")
    async def set_pin(self, info: Info[Context, None], allocation: str, cluster: str | None,
                      reason: str) -> SetPinResult:
        ctx = _ctx(info)
        access = await ctx.access("setPin")
        if (refused := await _role_refused(ctx, access, Capability.set_allocations, "setPin")) is not None:
            return refused
        # an unknown allocation goes to the ledger under the root (admins), which refuses it by name
        parent = (await ctx.view()).parents.get(allocation, ROOT)
        if not access.manages(parent):
            await ctx.deny("setPin", f"allocation:{allocation}", "outside the principal's scopes")
            return _not_authorised("allocation", allocation, "pin")
        if not reason.strip():
            return InvalidInput(field="reason", message="a pin change needs a reason")
        if cluster is not None and (problem := id_problem(cluster)) is not None:
            return InvalidInput(field="cluster", message=f"the cluster name {shown(cluster)} {problem}")
        outcome = await _execute(ctx, SetAllocations(parent=parent, shares={}, reason=reason[:500],
                                                     pins={allocation: cluster}))
        if (rej := _rejected(outcome)) is not None:
            return rej
        return PinChanged(allocation=allocation, pin=cluster, position=outcome.position)

    @fields.mutation("Register a node with its GPUs and topology path (admins).")
    async def register_node(self, info: Info[Context, None], input: RegisterNodeInput) -> RegisterNodeResult:
        ctx = _ctx(info)
        access = await ctx.access("registerNode")
        if (refused := await _role_refused(ctx, access, Capability.operate, "registerNode")) is not None:
            return refused
        if input.gpus < 1:
            return InvalidInput(field="gpus", message=f"a node needs at least 1 GPU, got {input.gpus}")
        if not input.id or len(input.id) > 200 or not input.path:
            return InvalidInput(field="id", message="a node needs an id (1 to 200 characters) and a topology path")
        if input.cluster and (problem := id_problem(input.cluster)) is not None:
            return InvalidInput(field="cluster", message=f"the cluster name {shown(input.cluster)} {problem}")
        outcome = await _execute(ctx, RegisterNode(node_id=input.id, gpus=input.gpus, gpu_model=input.gpu_model,
                                                   path=list(input.path), executor=input.executor,
                                                   cluster=input.cluster))
        if (rej := _rejected(outcome)) is not None:
            return rej
        return NodeRegistered(id=input.id, position=outcome.position)

    @fields.mutation("Drain a node: it takes no new work (admins).")
    async def drain_node(self, info: Info[Context, None], id: str, reason: str) -> DrainNodeResult:
        outcome = await _operate_node(_ctx(info), "drainNode", "draining", DrainNode(node_id=id, reason=reason[:500]))
        return NodeDraining(id=id, position=outcome.position) if isinstance(outcome, Outcome) else outcome

    @fields.mutation("Resume a draining node: it takes new work again (admins).")
    async def resume_node(self, info: Info[Context, None], id: str, reason: str) -> ResumeNodeResult:
        outcome = await _operate_node(_ctx(info), "resumeNode", "resuming", ResumeNode(node_id=id, reason=reason[:500]))
        return NodeResumed(id=id, position=outcome.position) if isinstance(outcome, Outcome) else outcome

    @fields.mutation("Retire a node for good: never placed on again, its GPUs out of the capacity; refused while "
                     "an attempt runs there (drain it first), unless whenEmpty: then it takes no new work and is "
                     "retired when its last attempt ends (admins; ADRs 0078, 0081).")
    async def retire_node(self, info: Info[Context, None], id: str, reason: str,
                          when_empty: bool = False) -> RetireNodeResult:
        outcome = await _operate_node(_ctx(info), "retireNode", "retiring", RetireNode(
            node_id=id, reason=reason[:500], when_empty=when_empty))
        if not isinstance(outcome, Outcome):
            return outcome
        pending = next((e for e in outcome.events if e.type == "NodeRetirementPending"), None)
        jobs = [str(j) for j in pending.payload.get("jobs", ())] if pending is not None else []
        return NodeRetired(id=id, position=outcome.position, pending=pending is not None, jobs=jobs)

    @fields.mutation("Set the scheduling policy (admins).")
    async def set_policy(self, info: Info[Context, None], input: PolicyInput) -> SetPolicyResult:
        ctx = _ctx(info)
        access = await ctx.access("setPolicy")
        if (refused := await _role_refused(ctx, access, Capability.operate, "setPolicy")) is not None:
            return refused
        if not isinstance(input.settings, dict):
            return InvalidInput(field="settings", message="policy settings are a JSON object")
        if not input.reason.strip():
            return InvalidInput(field="reason", message="a policy change needs a reason")
        outcome = await _execute(ctx, SetPolicy(settings=dict(input.settings), reason=input.reason[:500]))
        if (rej := _rejected(outcome)) is not None:
            return rej
        return PolicySet(position=outcome.position)

    @fields.mutation("Set the weight of GPU models (admins): budget units per GPU-hour on each model named (e.g. "
                     "H100 1.0, A100 0.55); the models not named keep theirs. Recorded through the ledger as a "
                     "change of the policy setting gpu_model_weights, with the reason (ADR 0057).")
    async def set_gpu_model_weights(self, info: Info[Context, None], weights: list[GpuModelWeightInput],
                                    reason: str) -> SetPolicyResult:
        ctx = _ctx(info)
        access = await ctx.access("setGpuModelWeights")
        if (refused := await _role_refused(ctx, access, Capability.operate, "setGpuModelWeights")) is not None:
            return refused
        if not reason.strip():
            return InvalidInput(field="reason", message="a change of GPU model weights needs a reason")
        named = [w.model for w in weights]
        if len(set(named)) != len(named):
            return InvalidInput(field="weights", message=f"a GPU model is named twice: {', '.join(named)}")
        outcome = await _execute(ctx, SetGpuModelWeights(weights={w.model: float(w.weight) for w in weights},
                                                         reason=reason[:500]))
        if (rej := _rejected(outcome)) is not None:
            return rej
        return PolicySet(position=outcome.position)

    @fields.mutation("Set the group mapping (admins): which role and scopes each group of the OpenID provider "
                     "gives its members. The whole mapping is replaced; recorded through the ledger.")
    async def set_group_mapping(self, info: Info[Context, None], rules: list[identity.GroupRuleInput],
                                reason: str) -> identity.SetGroupMappingResult:
        ctx = _ctx(info)
        access = await ctx.access("setGroupMapping")
        if (refused := await _role_refused(ctx, access, Capability.manage_identities, "setGroupMapping")) is not None:
            return refused
        if not reason.strip():
            return InvalidInput(field="reason", message="a group mapping change needs a reason")
        outcome = await _execute(ctx, SetGroupMapping(
            rules=[{"group": r.group, "role": r.role, "scopes": list(r.scopes)} for r in rules], reason=reason[:500]))
        if (rej := _rejected(outcome)) is not None:
            return rej
        if ctx.services.mappings is not None:
            ctx.services.mappings.forget()
        ctx.services.auth.forget_people()
        return identity.GroupMappingChanged(position=outcome.position, rules=len(rules))

    @fields.mutation("Map a namespace of a Kubernetes cluster (its executor's id) to the project its pods charge, "
                     "or unmap it (project empty) (admins): its pods then charge that project only. Recorded "
                     "through the ledger (ADR 0054).")
    async def map_namespace(self, info: Info[Context, None], executor: str, namespace: str, project: str,
                            reason: str) -> namespaces.MapNamespaceResult:
        ctx = _ctx(info)
        access = await ctx.access("mapNamespace")
        if (refused := await _role_refused(ctx, access, Capability.operate, "mapNamespace")) is not None:
            return refused
        if not reason.strip():
            return InvalidInput(field="reason", message="a namespace mapping needs a reason")
        outcome = await _execute(ctx, MapNamespace(executor_id=executor, namespace=namespace, project=project,
                                                   reason=reason[:500]))
        if (rej := _rejected(outcome)) is not None:
            return rej
        return namespaces.NamespaceMappingChanged(position=outcome.position, namespace=namespace, project=project)

    @fields.mutation("Create an API token, shown once. Admins mint any token for any subject; anyone else mints "
                     "tokens they own (subject: themselves), of their own role, over scopes inside their own.")
    async def create_token(self, info: Info[Context, None], role: str, subject: str,
                           scopes: list[str] | None = None, ttl_s: float | None = None) -> CreateTokenResult:
        ctx = _ctx(info)
        access = await ctx.access("createToken")
        scopes = scopes or []
        if not access.can(Capability.manage_tokens):
            if subject != access.principal.subject:
                await ctx.deny("createToken", f"subject:{subject[:100]}", "a token for someone else")
                return NotAuthorised(message=f"a token you create is yours: its subject is {access.principal.subject}")
            if (wider := identity.token_wider_than_owner(access, role, scopes)) is not None:
                await ctx.deny("createToken", "*", wider)
                return NotAuthorised(message=f"a token may not be wider than its owner: {wider}")
        if not subject.strip() or len(subject) > 200:
            return InvalidInput(field="subject", message="a subject has 1 to 200 characters")
        if ttl_s is not None and ttl_s <= 0:
            return InvalidInput(field="ttlS", message="a lifetime is a positive number of seconds")
        snap = await ctx.view()
        unknown = [s for s in scopes if s != ROOT and s not in snap.parents]
        if unknown:
            return InvalidInput(field="scopes", message=f"no node {', '.join(repr(s) for s in unknown)} in the tree")
        try:
            token, tinfo = await asyncio.to_thread(
                lambda: ctx.services.tokens.create(role=role, scopes=scopes, subject=subject,
                                                   created_by=access.principal.subject, ttl_s=ttl_s))
        except InvalidTokenRequest as err:
            return InvalidInput(field="role", message=str(err))
        return TokenCreated(token=token, info=_token(tinfo))

    @fields.mutation("Revoke an API token by id (admins).")
    async def revoke_token(self, info: Info[Context, None], id: str) -> RevokeTokenResult:
        ctx = _ctx(info)
        access = await ctx.access("revokeToken")
        if not access.can(Capability.manage_tokens):
            await ctx.deny("revokeToken", f"token:{id}", f"role {access.role.value} lacks manage_tokens")
            return NotAuthorised(message=f"your role ({access.role.value}) may not use 'revokeToken'")
        done = await asyncio.to_thread(ctx.services.tokens.revoke, id, access.principal.subject)
        if not done:
            return InvalidInput(field="id", message=f"no live token '{id}'")
        ctx.services.auth.forget(id)
        return TokenRevoked(id=id)


# -- subscriptions (graphql-transport-ws only) -----------------------------------------------------


def _occupancy(snap: ReadView) -> Occupancy:
    used = snap.used_gpus()
    total = sum(int(n["gpus"]) for n in snap.nodes)
    in_use = sum(used.values())
    return Occupancy(
        position=snap.head, total_gpus=total, used_gpus=in_use,
        free_gpus=sum(node_gpus(n, used)[1] for n in snap.nodes),
        running_jobs=sum(1 for j in snap.active_jobs if j["state"] in ("PLACED", "RUNNING")),
        waiting_jobs=sum(1 for j in snap.active_jobs if j["state"] in WAITING),
        nodes=[NodeOccupancy(id=n["node_id"], gpus=n["gpus"], used_gpus=used.get(n["node_id"], 0), state=n["state"])
               for n in snap.nodes], clusters=cluster_occupancy(snap.nodes, used, _last_largest(snap)))


def _last_largest(snap: ReadView) -> Mapping[str, int] | None:
    """The largest waiting gang per cluster of the last queue order computed (no IO: a push per head does not
    order the queue; ADR 0091), None before the first."""
    order = snap.policy.last() if snap.policy is not None else None
    return order.largest_by_cluster if order is not None else None


@strawberry.type
class Subscription:
    @fields.subscription("Events as they are recorded, filtered (auditors, admins).")
    async def events(self, info: Info[Context, None], filter: EventFilter | None = None,
                     after_position: BigInt | None = None) -> AsyncGenerator[Event, None]:
        ctx = _ctx(info)
        await ctx.require(Capability.read_audit, "events")
        f = filter or EventFilter()
        q = audit.EventQuery(f.stream_id, f.stream_prefix, tuple(f.types or ()), f.actor, f.since, f.until)
        store = ctx.services.store
        pos = after_position if after_position is not None else await asyncio.to_thread(store.head)
        while True:
            events, scanned, more = await asyncio.to_thread(audit.read_events, store, q, pos, 200)
            for ev in events:
                yield Event.of(ev)
            pos = events[-1].position if more and events else scanned
            if not more:
                await ctx.services.heads.wait_beyond(pos, timeout=30)

    @fields.subscription("A job's state each time it changes, until it ends.")
    async def job_progress(self, info: Info[Context, None], id: strawberry.ID) -> AsyncGenerator[Job | None, None]:
        ctx = _ctx(info)
        row, _ = await _visible_job(ctx, str(id), "jobProgress")
        if row is None:
            yield None
            return
        seen = -1
        while True:
            row = await asyncio.to_thread(ctx.services.read.job, str(id))
            if row is None:
                return
            if row["position"] != seen:
                seen = row["position"]
                yield Job.of(row)
            if row["state"] in ("COMPLETED", "FAILED", "CANCELLED"):
                return
            await ctx.services.heads.wait_beyond(max(seen, ctx.services.heads.head), timeout=30)

    @fields.subscription("Cluster occupancy each time the log moves.")
    async def occupancy(self, info: Info[Context, None]) -> AsyncGenerator[Occupancy, None]:
        ctx = _ctx(info)
        await ctx.access("occupancy")
        read = ctx.services.read
        last = -1
        while True:
            snap = await asyncio.to_thread(read.view)
            if snap.head != last:
                last = snap.head
                yield await asyncio.to_thread(_occupancy, snap)  # each cluster's fragmentation: an index of its nodes
            await ctx.services.heads.wait_beyond(last, timeout=30)


# -- the schema with its protections ---------------------------------------------------------------


def _should_mask(error: Any) -> bool:
    """Typed user errors and GraphQL's own (parse, validation, a variable's coercion, which wraps a
    GraphQLError) pass; anything else is a fault, masked."""
    original = getattr(error, "original_error", None)
    return original is not None and not isinstance(original, GraphQLError)


class OneOperationOrAName(SchemaExtension):
    """GraphQL spec, "GetOperation": a document with several operations and no `operationName` is a
    request error (Strawberry would run the first). Runs after the validation cache (which sets the
    validation's errors) and adds its own."""

    def on_validate(self) -> Iterator[None]:
        ctx = self.execution_context
        document = ctx.graphql_document
        if document is not None and getattr(ctx, "_provided_operation_name", None) is None:  # as the request gave it
            operations = sum(isinstance(d, OperationDefinitionNode) for d in document.definitions)
            if operations > 1:
                error = GraphQLError(f"the document has {operations} operations: name the one to run in "
                                     "'operationName'", extensions={"code": "GRAPHQL_VALIDATION_FAILED"})
                ctx.pre_execution_errors = [*(ctx.pre_execution_errors or []), error]
        yield


log = logging.getLogger("steward.api")
KAFKA_UNAVAILABLE = "kafka_unavailable"  # a mutation's code while Kafka is away (the reads still serve)


class StewardSchema(strawberry.Schema):
    """Strawberry's schema, logging a client's mistake (a typed user error, a parse or validation error)
    at info in one line, and only a server fault at error with its traceback (Strawberry logs every
    error at error with a traceback, which hides real faults among client mistakes)."""

    def process_errors(self, errors: list[GraphQLError], execution_context: Any = None) -> None:
        for error in errors:
            original = getattr(error, "original_error", None)
            reason = unavailable(original) if original is not None else None
            if reason is not None:  # an outage, not a fault: one line, no traceback (ADR 0064)
                log.warning("graphql request failed: the store is unavailable (%s)", reason,
                            extra={"code": STORE_UNAVAILABLE})
            elif isinstance(original, KafkaUnavailable):
                log.warning("graphql mutation refused: %s", original, extra={"code": KAFKA_UNAVAILABLE})
            elif _should_mask(error):
                log.error("graphql fault: %s", error.message, exc_info=error.original_error)
            else:
                code = (error.extensions or {}).get("code", "GRAPHQL_ERROR")
                log.info("graphql request refused (%s): %s", code, error.message, extra={"code": code})


class StoreUnavailableErrors(SchemaExtension):
    """An error raised because the store could not be reached (`steward.store.unavailable`) becomes a clean
    error with the code `store_unavailable` and a message naming the store, and the HTTP answer 503 with
    `Retry-After` (ADR 0064), instead of the mask's "internal error"; so does a mutation that could not hand its
    command to Kafka (`kafka_unavailable`, naming the broker, and `maybeRecorded`: whether it may still be
    recorded once Kafka is back; docs/operations.md "Kafka away"). Listed after MaskErrors, so it sees the
    errors first (extensions leave in reverse order)."""

    def on_operation(self) -> Iterator[None]:
        yield
        result: Any = self.execution_context.result
        errors = getattr(result, "errors", None)
        if not errors:
            return
        ctx = self.execution_context.context
        url = ctx.services.store.engine.url.render_as_string(hide_password=True) if isinstance(ctx, Context) else ""
        clean, outage, wait = [], False, 0
        for error in errors:
            original = getattr(error, "original_error", None)
            if isinstance(original, KafkaUnavailable):  # a mutation while Kafka is away: the reads still serve
                outage, wait = True, max(wait, KAFKA_RETRY_AFTER_S)
                clean.append(GraphQLError(str(original), nodes=error.nodes, path=error.path,
                                          extensions={"code": KAFKA_UNAVAILABLE, "retryAfter": KAFKA_RETRY_AFTER_S,
                                                      "maybeRecorded": original.sent}))
                continue
            reason = unavailable(original) if original is not None else None
            if reason is None:
                clean.append(error)
                continue
            outage, wait = True, max(wait, RETRY_AFTER_S)
            clean.append(GraphQLError(unavailable_message(url, reason), nodes=error.nodes, path=error.path,
                                      extensions={"code": STORE_UNAVAILABLE, "retryAfter": RETRY_AFTER_S}))
        if not outage:
            return
        result.errors = clean
        response = getattr(ctx, "response", None)
        if response is not None and hasattr(response, "status_code"):  # HTTP (a websocket has no status)
            response.status_code = 503
            response.headers["Retry-After"] = str(wait)
        if isinstance(ctx, Context):
            ctx.no_cache()


def build_schema(*, max_depth: int = 10, max_tokens: int = 2000, max_aliases: int = 30,
                 introspection: bool = False, extra: Sequence[SchemaExtension | type[SchemaExtension]] = ()
                 ) -> strawberry.Schema:
    from graphql.validation import NoSchemaIntrospectionCustomRule

    extensions: list[Any] = [
        MaxTokensLimiter(max_token_count=max_tokens),
        ParserCache(maxsize=256),
        QueryDepthLimiter(max_depth=max_depth),
        MaxAliasesLimiter(max_alias_count=max_aliases),
        ValidationCache(maxsize=256),
        OneOperationOrAName,
        MaskErrors(should_mask_error=_should_mask, error_message="internal error (it was logged)"),
        StoreUnavailableErrors,
    ]
    if not introspection:
        extensions.append(AddValidationRules([NoSchemaIntrospectionCustomRule]))
    extensions.extend(extra)
    return StewardSchema(query=Query, mutation=Mutation, subscription=Subscription, extensions=extensions)


# The schema as exported to schema/graphql/schema.graphql (the protections do not change the SDL).
schema = build_schema(introspection=True)


def sdl() -> str:
    return schema.as_str() + "\n"

