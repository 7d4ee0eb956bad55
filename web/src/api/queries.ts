// The reads and writes every screen needs: each one a generated operation (src/api/operations/*.graphql →
// generated.ts, typed by schema/graphql/schema.graphql), so a field the API does not have fails the build.
// What the API lacks on purpose is listed in docs/ui.md ("Gaps the client fills") and derived in src/lib.

import { request } from "./client";
import {
  AllocationHistoryDocument, AllocationsDocument, AuditEventsDocument, BudgetDocument, HealthDocument, JobDetailDocument,
  JobsDocument, MeDocument, NodesDocument, OverviewDocument, QueueDocument, RecentJobEventsDocument,
  AllocationNamesDocument, SetAllocationsDocument, SetDebugQuotaDocument, SetDisplayNameDocument, SetPinDocument, StateAtPinDocument, SubmitOutlookDocument, VerifyDocument,
  WhatIfDocument, WhyPendingDocument, WhyPreemptedDocument, ClusterOccupancyDocument, GpuModelsDocument, SetGpuModelWeightsDocument,
  type AllocationRowFragment, type EventRowFragment, type JobDetailQuery, type JobRowFragment, type MeQuery, type NodesQuery,
  type StateAtPinQuery, type WhyFragment,
} from "./generated";
import type { WhatIfOutcome, WhatIfPreview } from "../lib/whatif";
import type { SubmitInput, SubmitOutlook } from "../lib/outlook";
import type { OverviewData } from "../lib/overview";
import type { AllocationChange } from "../lib/history";
import { type Pin, pinArgs } from "../lib/timetravel";
import { type EventFilter, type Cursor, applyFilter, apiFilter, cursorFor } from "../lib/audit";
import { type QueueRow, queueRows } from "../lib/queue";
import { type Verification, verificationOf } from "../lib/verify";
import type { ClusterFigures, GpuModelRow } from "../lib/clusters";

export type Job = JobRowFragment;
export type JobDetail = NonNullable<JobDetailQuery["job"]>;
export type AuditEvent = EventRowFragment;
export type Allocation = AllocationRowFragment;
export type NodeRow = NodesQuery["nodes"][number];
export type Explanation = WhyFragment;
export type Me = MeQuery["me"];
export type StateAtPage = StateAtPinQuery["stateAt"];
export type { EventFilter, QueueRow, Verification };

/** The API's page cap (api_max_page). */
export const MAX_PAGE = 500;

// -- who is signed in --------------------------------------------------------------------------------

/** Who the token is (Query.me). */
export async function fetchMe(token: string): Promise<Me> {
  return (await request(MeDocument, {}, { token })).me;
}

/** A cheap authenticated read (Query.health). */
export async function ping(token: string): Promise<void> {
  await request(HealthDocument, {}, { token });
}

// -- jobs -----------------------------------------------------------------------------------------

export async function fetchJobs(filter: { state?: string; project?: string; jobClass?: string } = {}, limit = MAX_PAGE): Promise<Job[]> {
  const any = filter.state || filter.project || filter.jobClass;
  const data = await request(JobsDocument, {
    first: Math.min(limit, MAX_PAGE),
    filter: any ? { states: filter.state ? [filter.state] : null, project: filter.project || null, jobClass: filter.jobClass || null } : null,
  });
  return data.jobs.edges.map((e) => e.node);
}

/** One job with its events and decisions (null: no such job, or not one you may see). */
export async function fetchJob(id: string): Promise<JobDetail | null> {
  return (await request(JobDetailDocument, { id })).job;
}

/** Why a job waits (Query.whyPending) or was preempted (Query.whyPreempted); null: no such job you may see. */
export async function explain(kind: "pending" | "preempted", job: string): Promise<Explanation | null> {
  return kind === "pending" ? (await request(WhyPendingDocument, { job })).whyPending : (await request(WhyPreemptedDocument, { job })).whyPreempted;
}

// -- the tree, the nodes, the queue -------------------------------------------------------------------

export async function fetchAllocations(): Promise<Allocation[]> {
  return (await request(AllocationsDocument, {})).allocations;
}

/** What each node of the org tree is called: id -> display name (the id when none is set; ADR 0055). */
export async function fetchAllocationNames(): Promise<Map<string, string>> {
  return new Map((await request(AllocationNamesDocument, {})).allocations.map((a) => [a.name, a.displayName]));
}

export async function fetchNodes(): Promise<NodeRow[]> {
  return (await request(NodesDocument, {})).nodes;
}

/** The queue in the scheduler's order (Query.queue); other tenants' jobs are positions only. `cluster`: only the
 * jobs that may run on that cluster, each with its position there. */
export async function fetchQueue(cluster: string | null = null): Promise<{ waiting: number; rows: QueueRow[] }> {
  const q = (await request(QueueDocument, { first: MAX_PAGE, cluster })).queue;
  return { waiting: q.waiting, rows: queueRows(q.entries) };
}

/** Each cluster's occupancy now (Query.clusterOccupancy), by name. */
export async function fetchClusterOccupancy(): Promise<ClusterFigures[]> {
  return (await request(ClusterOccupancyDocument, {})).clusterOccupancy;
}

/** The GPU models of the registered nodes with their weights (Query.gpuModels). */
export async function fetchGpuModels(): Promise<GpuModelRow[]> {
  return (await request(GpuModelsDocument, {})).gpuModels;
}

/** Change GPU model weights, with a reason (Mutation.setGpuModelWeights; operators and admins). */
export async function setGpuModelWeights(weights: { model: string; weight: number }[], reason: string): Promise<MutationOutcome> {
  const data = await request(SetGpuModelWeightsDocument, { weights, reason });
  return outcome(data.setGpuModelWeights, ["PolicySet"]);
}

// -- audit ----------------------------------------------------------------------------------------

const eventCache = new Map<string, Cursor<AuditEvent>>();

/**
 * The audit stream, newest first. The API pages oldest first after a cursor, so this pages forward to the
 * end (bounded) and keeps the newest `limit`; a live tick resumes where the last read of the same filter
 * stopped. Without the right (read_audit) it reads the latest jobs' own streams, which every role may read
 * for the jobs it can see.
 */
export async function fetchEvents(filter: EventFilter, limit = 300, canReadAudit = true): Promise<{ events: AuditEvent[]; source: "api" | "jobs"; truncated: boolean }> {
  if (!canReadAudit) {
    const jobs = (await request(RecentJobEventsDocument, { first: 20 })).jobs.edges;
    const all = jobs.flatMap((e) => e.node.events);
    return { events: applyFilter(all, filter).sort((a, b) => b.position - a.position).slice(0, limit), source: "jobs", truncated: false };
  }
  const { key, cursor } = cursorFor(eventCache, filter);
  let { after, events: all } = cursor;
  const asked = apiFilter(filter, cursor);
  let pages = 0;
  let more = false;
  do {
    const page = (await request(AuditEventsDocument, { first: MAX_PAGE, after: after ?? null, filter: asked })).auditEvents;
    all = all.concat(page.edges.map((e) => e.node));
    if (all.length > limit * 4) all = all.slice(-limit);
    more = Boolean(page.pageInfo.hasNextPage && page.pageInfo.endCursor);
    after = page.pageInfo.endCursor ?? after;
    pages++;
  } while (more && pages < 40);
  eventCache.set(key, { after, events: all.slice(-limit * 4), since: asked.since ?? 0 });
  const newest = applyFilter(all, filter).sort((a, b) => b.position - a.position);
  return { events: newest.slice(0, limit), source: "api", truncated: more || newest.length > limit };
}

/** Recompute the hash chain over [from, to] on the server (Query.verify); `to` null: the head. */
export async function verifyRange(from: number | null, to: number | null): Promise<Verification> {
  return verificationOf((await request(VerifyDocument, { fromPosition: from ?? 1, toPosition: to })).verify);
}

// -- mutations ------------------------------------------------------------------------------------

export interface MutationOutcome {
  ok: boolean;
  kind: string; // the payload's __typename
  message: string;
  raw: Record<string, unknown>;
}

/** A union payload read as ok / refused with the reason the server gave. */
function outcome(v: Record<string, unknown> | null | undefined, okTypes: string[]): MutationOutcome {
  if (!v) return { ok: false, kind: "none", message: "the API returned nothing", raw: {} };
  const kind = String(v.__typename ?? "");
  const ok = okTypes.includes(kind) || (!kind && !("reason" in v) && !("message" in v));
  const message = ok ? "done" : String(v.reason ?? v.message ?? kind);
  return { ok, kind, message: v.code ? `${message} (${v.code})` : message, raw: v };
}

export async function setAllocations(parent: string, shares: { child: string; share: number }[], reason: string): Promise<MutationOutcome> {
  const data = await request(SetAllocationsDocument, { parent, shares, reason });
  return outcome(data.setAllocations, ["AllocationsChanged"]);
}

/** The simulator's preview of a share change (Query.whatIf): the preview, or the server's refusal in words. */
export async function whatIf(parent: string, shares: { child: string; share: number }[]): Promise<WhatIfOutcome> {
  const v = (await request(WhatIfDocument, { parent, shares })).whatIf;
  if (v.__typename === "WhatIfPreview") return { kind: "preview", preview: v as WhatIfPreview };
  return { kind: "refused", message: v.message, field: v.__typename === "InvalidInput" ? v.field : null };
}

/** The overview's figures, computed by the server from the log (Query.overview). */
export async function fetchOverview(args: { sinceS?: number | null; points?: number; utcOffsetS: number; periodS: number; pastPeriods?: number }): Promise<OverviewData> {
  const data = await request(OverviewDocument, {
    sinceS: args.sinceS ?? null, points: args.points ?? 240, utcOffsetS: args.utcOffsetS, periodS: args.periodS, pastPeriods: args.pastPeriods ?? 3,
  });
  return data.overview;
}

// -- the submit preview and debug quotas ------------------------------------------------------------

export type OutlookAnswer = { kind: "outlook"; outlook: SubmitOutlook } | { kind: "refused"; message: string };

/** What a job would get if submitted now (Query.submitOutlook): nothing is recorded. */
export async function previewSubmit(input: SubmitInput): Promise<OutlookAnswer> {
  const v = (await request(SubmitOutlookDocument, { input })).submitOutlook;
  if (v.__typename === "SubmitOutlook") return { kind: "outlook", outlook: v };
  return { kind: "refused", message: v.message };
}

export type SubmitAnswer = { ok: true; jobId: string; outlook: SubmitOutlook | null } | { ok: false; message: string };

/** Set what people call a node of the tree (Mutation.setDisplayName); null: its id again. */
export async function setDisplayName(allocation: string, name: string | null, reason: string): Promise<MutationOutcome> {
  const data = await request(SetDisplayNameDocument, { allocation, name, reason });
  return outcome(data.setDisplayName, ["DisplayNameChanged"]);
}

/** Pin an allocation to a cluster (Mutation.setPin, ADR 0067); null: unpinned. */
export async function setPin(allocation: string, cluster: string | null, reason: string): Promise<MutationOutcome> {
  const data = await request(SetPinDocument, { allocation, cluster, reason });
  return outcome(data.setPin, ["PinChanged"]);
}

/** Set an allocation's debug quota (Mutation.setDebugQuota); null: back to the default. */
export async function setDebugQuota(allocation: string, gpus: number | null, reason: string): Promise<MutationOutcome> {
  const data = await request(SetDebugQuotaDocument, { allocation, gpus, reason });
  return outcome(data.setDebugQuota, ["DebugQuotaChanged"]);
}

/** The budget report (Query.budgetReport): owed vs delivered per allocation and period, and the same as CSV. */
export interface BudgetReport {
  position: number;
  asOf: number; // the time the figures run to
  pinned: boolean; // time travel: as of a position or a date
  head: number;
  periodS: number;
  csv: string;
  periods: OverviewData["owedDelivered"];
}

export async function fetchBudgetReport(periodS: number, periods: number, pin: Pin | null = null): Promise<BudgetReport> {
  return (await request(BudgetDocument, { periodS, periods, ...pinArgs(pin) })).budgetReport;
}

/** The ledger's state as of a pin (Query.stateAt): the tree, the job counts and the first `jobsFirst` jobs. */
export async function fetchStateAtPin(pin: Pin, jobsFirst = 200): Promise<StateAtPage> {
  const { position, at } = pinArgs(pin);
  return (await request(StateAtPinDocument, { position, time: at, jobsFirst })).stateAt;
}

// -- allocation history -----------------------------------------------------------------------------

/** Who changed which share and debug quota, newest first (the API keeps it to the principal's subtree). */
export async function fetchAllocationHistory(under: string | null, first = 100): Promise<AllocationChange[]> {
  return (await request(AllocationHistoryDocument, { under, first })).allocationHistory;
}
