// The reads and writes every screen needs, each built from what the API offers today. A field the API
// does not have is left out of the query, and the screen says which one it is missing.

import { gql } from "./client";
import type { WhatIfOutcome, WhatIfPreview } from "../lib/whatif";
import { type DebugQuota, OUTLOOK_SELECTION, type SubmitInput, type SubmitOutlook } from "../lib/outlook";
import { OVERVIEW_SELECTION, type OverviewData } from "../lib/overview";
import { type ApiSchema, argsFor, firstOf, has, namedType, nodeTypeOf, nodesOf, select, field, wrapSelection } from "./schema";

export const JOB_FIELDS = [
  "id", "project", "state", "gpus", "minRuntimeS", "resumable", "jobClass", "priority", "command", "submittedAt",
  "attempt", "assignments", "funded", "startedAt", "endedAt", "exitCode", "protectionEndsAt", "protectedUntil",
  "capEndsAt", "sessionCapAt", "checkpointPath", "restoredTo", "restoredFrom",
  "capWarnings", "warnings", "lastCheckpointAt", "reasonCode", "positionOverall", "positionInProject", "node",
  "checkpoints { at recordedAt time position path step }",
  "preemptions { at recordedAt time reason victimOf by position }",
];
const DECISIONS = "decisions { position type recordedAt actor evidence }";
export const EVENT_FIELDS = ["position", "streamId", "version", "type", "payload", "metadata", "recordedAt", "hash", "prevHash", "actor", "role"];

export interface Job {
  id: string;
  project: string;
  state: string;
  gpus: number;
  minRuntimeS?: number;
  resumable?: boolean;
  jobClass?: string;
  priority?: number;
  command?: string[];
  submittedAt: number;
  attempt?: number;
  assignments?: Record<string, number[]>;
  funded?: boolean;
  startedAt?: number | null;
  endedAt?: number | null;
  exitCode?: number | null;
  protectionEndsAt?: number | null;
  protectedUntil?: number | null;
  capEndsAt?: number | null;
  sessionCapAt?: number | null;
  checkpointPath?: string | null;
  restoredTo?: string | null;
  restoredFrom?: string | null;
  decisions?: { position: number; type: string; recordedAt: number; actor?: string | null; evidence: unknown }[];
  capWarnings?: unknown;
  warnings?: unknown;
  lastCheckpointAt?: number | null;
  checkpoints?: Record<string, unknown>[];
  preemptions?: Record<string, unknown>[];
  reasonCode?: string | null;
  events?: AuditEvent[];
}

export interface AuditEvent {
  position: number;
  streamId: string;
  version?: number;
  type: string;
  payload: unknown;
  metadata: Record<string, unknown> | null;
  recordedAt: number;
  hash?: string;
  prevHash?: string;
  actor?: string;
  role?: string;
}

/** The API's page cap (api_max_page). */
export const MAX_PAGE = 500;

/** Map the API's names for contract times onto the ones the screens read. */
export function normaliseJob(j: Job): Job {
  const out = { ...j };
  if (out.protectionEndsAt === undefined && out.protectedUntil !== undefined) out.protectionEndsAt = out.protectedUntil;
  if (out.capEndsAt === undefined && out.sessionCapAt !== undefined) out.capEndsAt = out.sessionCapAt;
  if (out.events) out.events = nodesOf<AuditEvent>(out.events);
  return out;
}

export function jobTypeName(schema: ApiSchema): string | null {
  return namedType(field(schema, "Query.job")?.type) ?? nodeTypeOf(schema, "Query.jobs").type;
}

export async function fetchJobs(schema: ApiSchema, filter: { state?: string; project?: string; jobClass?: string } = {}, limit = 500): Promise<Job[]> {
  if (!has(schema, "Query.jobs")) return [];
  const { type, connection } = nodeTypeOf(schema, "Query.jobs");
  const sel = select(schema, type, JOB_FIELDS);
  const first = Math.min(limit, MAX_PAGE);
  const args = argsFor(schema, "Query.jobs", {
    ...filter, class: filter.jobClass, limit: first, first,
    filter: filter.state || filter.project || filter.jobClass ? { states: filter.state ? [filter.state] : undefined, project: filter.project, jobClass: filter.jobClass } : undefined,
  });
  const data = await gql<{ jobs: unknown }>(`query Jobs { jobs${args} ${wrapSelection(connection, sel)} }`);
  return nodesOf<Job>(data.jobs).map(normaliseJob);
}

export async function fetchJob(schema: ApiSchema, id: string): Promise<Job | null> {
  const type = jobTypeName(schema);
  const sel = select(schema, type, [...JOB_FIELDS, `events { ${EVENT_FIELDS.join(" ")} }`, DECISIONS]);
  const data = await gql<{ job: Job | null }>(`query Job { job${argsFor(schema, "Query.job", { id, jobId: id })} { ${sel} } }`);
  return data.job ? normaliseJob(data.job) : null;
}

export interface Allocation {
  name: string;
  parent: string;
  share: number;
  entitlement?: number;
  usageInWindow?: number | null;
  entitledInWindow?: number | null;
  owed?: number | null;
  delivered?: number | null;
  burn?: number | null;
  debugQuotaGpus?: DebugQuota | null;
}
export const ALLOCATION_FIELDS = ["name", "parent", "share", "entitlement", "usageInWindow", "entitledInWindow", "owed", "delivered", "burn", "debugQuotaGpus { gpus setGpus isDefault setOn }"];

export async function fetchAllocations(schema: ApiSchema): Promise<Allocation[]> {
  const { type, connection } = nodeTypeOf(schema, "Query.allocations");
  const sel = select(schema, type, ALLOCATION_FIELDS) || "name parent share";
  const data = await gql<{ allocations: unknown }>(`query Allocations { allocations ${wrapSelection(connection, sel)} }`);
  return nodesOf<Allocation>(data.allocations);
}

export interface NodeRow {
  id: string;
  gpus: number;
  gpuModel?: string;
  path: string[];
  executor?: string;
  state?: string;
  usedGpus?: number | null;
  reservedGpus?: number | null;
  reservations?: Record<string, unknown>[];
}

export async function fetchNodes(schema: ApiSchema): Promise<NodeRow[]> {
  const { type, connection } = nodeTypeOf(schema, "Query.nodes");
  const sel = select(schema, type, ["id", "gpus", "gpuModel", "path", "executor", "state", "usedGpus", "reservedGpus", "reservations { jobId gpus until reason }"]) || "id gpus path";
  const data = await gql<{ nodes: unknown }>(`query Nodes { nodes ${wrapSelection(connection, sel)} }`);
  return nodesOf<NodeRow>(data.nodes);
}

// -- the queue ------------------------------------------------------------------------------------

export interface QueueEntry {
  job: Job;
  position: number;
  positionInProject: number;
  reasonCode: string | null;
  blocking: string | null;
  text?: string | null;
  ranked: boolean; // true when the API ranked it (fair share), false for the submit-order fallback
}

export const QUEUE_ENTRY_FIELDS = ["position", "positionOverall", "positionInProject", "reasonCode", "reason", "blockingGpus", "blockedBy", "blocking", "amountBlocking"];

export async function fetchQueue(schema: ApiSchema): Promise<QueueEntry[] | null> {
  if (!has(schema, "Query.queue")) return null;
  const { type, connection } = nodeTypeOf(schema, "Query.queue");
  const t = type ? schema.types.get(type) : undefined;
  const jobField = t?.fields.has("job") ? `job { ${select(schema, namedType(t.fields.get("job")!.type), JOB_FIELDS)} }` : "";
  const ownJob = !jobField ? select(schema, type, JOB_FIELDS) : "";
  const sel = [select(schema, type, QUEUE_ENTRY_FIELDS), jobField, ownJob].filter(Boolean).join(" ");
  // The queue is a list, a connection, or an object with its `entries` (and totals).
  const qt = schema.types.get(namedType(field(schema, "Query.queue")?.type) ?? "");
  const entriesField = qt?.fields.has("entries") ? "entries" : null;
  let body: string;
  if (entriesField) {
    const et = namedType(qt!.fields.get("entries")!.type);
    const ett = schema.types.get(et ?? "");
    const jf = ett?.fields.has("job") ? `job { ${select(schema, namedType(ett.fields.get("job")!.type), JOB_FIELDS)} }` : "";
    body = `{ ${select(schema, qt!.name, ["waiting", "waitingGpus"])} entries { ${[select(schema, et, [...QUEUE_ENTRY_FIELDS, "text", "mine"]), jf].filter(Boolean).join(" ")} } }`;
  } else body = wrapSelection(connection, sel);
  const data = await gql<{ queue: unknown }>(`query Queue { queue${argsFor(schema, "Query.queue", { first: MAX_PAGE, limit: MAX_PAGE })} ${body} }`);
  const list = entriesField ? ((data.queue as { entries: unknown }).entries as Record<string, unknown>[]) : nodesOf<Record<string, unknown>>(data.queue);
  return list.map((e) => {
    const job = (e.job ? normaliseJob(e.job as Job) : entriesField ? { id: "", project: "(another tenant)", state: "QUEUED", gpus: 0, submittedAt: NaN } : e) as Job;
    const blockingGpus = e.blockingGpus ?? e.amountBlocking;
    const blocking = e.blockedBy ?? e.blocking ?? null;
    return {
      job,
      position: Number(e.position ?? e.positionOverall ?? 0),
      positionInProject: Number(e.positionInProject ?? 0),
      reasonCode: (e.reasonCode ?? e.reason ?? null) as string | null,
      text: (e.text ?? null) as string | null,
      blocking: [blocking ? String(typeof blocking === "object" ? JSON.stringify(blocking) : blocking) : null, blockingGpus != null ? `${blockingGpus} GPUs` : null].filter(Boolean).join(" · ") || null,
      ranked: true,
    };
  });
}

// -- explanations ---------------------------------------------------------------------------------

export interface Explanation {
  summary: string;
  code: string | null;
  evidence: unknown;
  facts?: Record<string, unknown>;
}

export async function explain(schema: ApiSchema, kind: "pending" | "preempted", jobId: string): Promise<Explanation | null> {
  const path = kind === "pending" ? firstOf(schema, "Query.whyPending", "Query.why_pending") : firstOf(schema, "Query.whyPreempted", "Query.why_preempted");
  if (!path) return null;
  const name = path.split(".")[1];
  const f = field(schema, path)!;
  const typeName = namedType(f.type);
  const t = typeName ? schema.types.get(typeName) : undefined;
  const scalar = !t || t.kind === "SCALAR";
  const sel = scalar ? "" : `{ ${select(schema, typeName, ["summary", "text", "message", "words", "reason", "reasonCode", "code", "evidence", "blockingGpus", "blockingScope", "blockingUntil", "position", "positionInProject", "source"]) || "__typename"} }`;
  const data = await gql<Record<string, unknown>>(`query Why { ${name}${argsFor(schema, path, { job: jobId, jobId, id: jobId })} ${sel} }`);
  const v = data[name] as Record<string, unknown> | string | null;
  if (v === null || v === undefined) return null;
  if (typeof v === "string") return { summary: v, code: null, evidence: null };
  return {
    summary: String(v.summary ?? v.text ?? v.message ?? v.words ?? v.reason ?? ""),
    code: (v.reasonCode ?? v.code ?? (v.text || v.summary ? v.reason : null) ?? null) as string | null,
    evidence: v.evidence ?? null,
    facts: Object.fromEntries(["blockingGpus", "blockingScope", "blockingUntil", "position", "positionInProject", "source"].filter((k) => v[k] !== undefined && v[k] !== null).map((k) => [k, v[k]])),
  };
}

// -- audit ----------------------------------------------------------------------------------------

export interface EventFilter {
  stream?: string;
  type?: string;
  actor?: string;
  since?: number;
  until?: number;
}

const eventCache = new Map<string, { after: string | undefined; events: AuditEvent[]; since: number }>();

export const EVENT_QUERIES = ["Query.auditEvents", "Query.events", "Query.eventStream"];

/**
 * The audit stream, newest first. The API pages oldest first after a cursor, so this pages forward to the
 * end (bounded) and keeps the newest `limit`. Without the right (read_audit), or without the field, it falls
 * back to the latest jobs' own streams, which every role may read for the jobs it can see.
 */
export async function fetchEvents(schema: ApiSchema, filter: EventFilter, limit = 300, canReadAudit = true): Promise<{ events: AuditEvent[]; source: "api" | "jobs"; truncated: boolean }> {
  const path = firstOf(schema, ...EVENT_QUERIES);
  if (path && canReadAudit) {
    const name = path.split(".")[1];
    const { type, connection } = nodeTypeOf(schema, path);
    const sel = select(schema, type, EVENT_FIELDS);
    const connType = namedType(field(schema, path)!.type);
    const pageSel = connection ? select(schema, connType, ["pageInfo { hasNextPage endCursor }"]) : "";
    const apiFilter: { streamPrefix?: string; types?: string[]; actor?: string; since?: number; until?: number } = {
      streamPrefix: filter.stream || undefined, types: filter.type ? [filter.type] : undefined,
      actor: filter.actor || undefined, since: filter.since, until: filter.until,
    };
    // Resume from where the last read of the same filter stopped: a live tick reads only what is new.
    const key = JSON.stringify([name, apiFilter.streamPrefix, apiFilter.types, apiFilter.actor, filter.since !== undefined, apiFilter.until]);
    const cached = eventCache.get(key);
    const fresh = !cached || (filter.since !== undefined && cached.since > filter.since + 60);
    let after: string | undefined = fresh ? undefined : cached.after;
    let all: AuditEvent[] = fresh ? [] : cached.events;
    if (fresh && filter.since !== undefined) apiFilter.since = filter.since;
    else if (!fresh) apiFilter.since = cached.since;
    let pages = 0;
    let more = false;
    do {
      const args = argsFor(schema, path, { first: MAX_PAGE, limit: MAX_PAGE, after, filter: apiFilter, ...apiFilter });
      const data = await gql<Record<string, { pageInfo?: { hasNextPage: boolean; endCursor: string | null } }>>(
        `query Events { ${name}${args} ${wrapSelection(connection, sel, pageSel)} }`);
      const page = data[name];
      all = all.concat(nodesOf<AuditEvent>(page));
      if (all.length > limit * 4) all = all.slice(-limit);
      more = Boolean(page?.pageInfo?.hasNextPage && page.pageInfo.endCursor);
      after = page?.pageInfo?.endCursor ?? undefined;
      pages++;
    } while (more && pages < 40);
    eventCache.set(key, { after, events: all.slice(-limit * 4), since: apiFilter.since ?? 0 });
    const newest = applyFilter(all, filter).sort((a, b) => b.position - a.position);
    return { events: newest.slice(0, limit), source: "api", truncated: more || newest.length > limit };
  }
  const jobs = await fetchJobs(schema, {}, 20);
  const type = jobTypeName(schema);
  const evField = schema.types.get(type ?? "")?.fields.get("events");
  if (!jobs.length || !evField) return { events: [], source: "jobs", truncated: false };
  const sel = select(schema, namedType(evField.type), EVENT_FIELDS);
  const parts = jobs.slice(0, 20).map((j, i) => `j${i}: job${argsFor(schema, "Query.job", { id: j.id, jobId: j.id })} { events { ${sel} } }`);
  const data = await gql<Record<string, { events: AuditEvent[] } | null>>(`query JobEvents { ${parts.join(" ")} }`);
  const all = Object.values(data).flatMap((j) => (j ? nodesOf<AuditEvent>(j.events) : []));
  return { events: applyFilter(all, filter).sort((a, b) => b.position - a.position).slice(0, limit), source: "jobs", truncated: false };
}

export function actorOf(e: AuditEvent): string {
  const m = e.metadata ?? {};
  return String(e.actor ?? m.actor ?? "—");
}

export function applyFilter(events: AuditEvent[], f: EventFilter): AuditEvent[] {
  return events.filter(
    (e) =>
      (!f.stream || e.streamId.includes(f.stream)) &&
      (!f.type || e.type === f.type) &&
      (!f.actor || actorOf(e).includes(f.actor)) &&
      (f.since === undefined || e.recordedAt >= f.since) &&
      (f.until === undefined || e.recordedAt <= f.until),
  );
}

export interface Verification {
  ok: boolean;
  checked: number | null;
  firstBad: number | null;
  message: string;
}

export async function verifyRange(schema: ApiSchema, from: number | null, to: number | null): Promise<Verification | null> {
  const path = firstOf(schema, "Query.verify", "Query.verifyChain", "Query.auditVerify", "Query.verification");
  if (!path) return null;
  const name = path.split(".")[1];
  const typeName = namedType(field(schema, path)!.type);
  const t = typeName ? schema.types.get(typeName) : undefined;
  const sel = !t || t.kind === "SCALAR" ? "" : `{ ${select(schema, typeName, ["ok", "valid", "checked", "count", "eventsChecked", "firstBad", "firstBadPosition", "brokenAt", "message", "problem", "reason", "fromPosition", "toPosition", "headHash"]) || "__typename"} }`;
  const args = argsFor(schema, path, { from: from ?? undefined, to: to ?? undefined, fromPosition: from ?? undefined, toPosition: to ?? undefined, start: from ?? undefined, end: to ?? undefined });
  const data = await gql<Record<string, unknown>>(`query Verify { ${name}${args} ${sel} }`);
  const v = data[name] as Record<string, unknown> | boolean;
  if (typeof v === "boolean") return { ok: v, checked: null, firstBad: null, message: v ? "the chain is intact" : "the chain is broken" };
  const ok = Boolean(v.ok ?? v.valid);
  return {
    ok,
    checked: (v.checked ?? v.count ?? v.eventsChecked ?? null) as number | null,
    firstBad: (v.firstBad ?? v.firstBadPosition ?? v.brokenAt ?? null) as number | null,
    message: String(v.message ?? v.problem ?? v.reason ?? (ok ? `positions ${v.fromPosition ?? "?"}–${v.toPosition ?? "?"} hash-chain to each other` : "the chain is broken")),
  };
}

/** The state as of a time, when the API serves it: allocations and the queue then. */
export async function fetchStateAt(schema: ApiSchema, at: number): Promise<{ allocations: Allocation[]; waiting: Job[]; position: number | null } | null> {
  const path = firstOf(schema, "Query.stateAt", "Query.asOf", "Query.stateAsOf");
  if (!path) return null;
  const name = path.split(".")[1];
  const typeName = namedType(field(schema, path)!.type);
  const t = typeName ? schema.types.get(typeName) : undefined;
  if (!t) return null;
  const parts: string[] = [];
  for (const [k, want] of [["allocations", ALLOCATION_FIELDS], ["queue", [...QUEUE_ENTRY_FIELDS, `job { ${JOB_FIELDS.join(" ")} }`, ...JOB_FIELDS]], ["jobs", JOB_FIELDS]] as const) {
    const f = t.fields.get(k);
    if (!f) continue;
    const inner = nodeTypeOf({ ...schema, queryType: typeName! }, `Query.${k}`);
    const s = select(schema, inner.type, [...want]);
    if (s) parts.push(`${k} ${wrapSelection(inner.connection, s)}`);
  }
  if (!parts.length) return null;
  if (t.fields.has("position")) parts.push("position");
  const data = await gql<Record<string, Record<string, unknown>>>(`query AsOf { ${name}${argsFor(schema, path, { at, time: at, asOf: at, timestamp: at })} { ${parts.join(" ")} } }`);
  const v = data[name] ?? {};
  const queue = nodesOf<Record<string, unknown>>(v.queue).map((e) => (e.job ?? e) as Job);
  const jobs = nodesOf<Job>(v.jobs).filter((j) => ["QUEUED", "PREEMPTED"].includes(j.state));
  return { allocations: nodesOf<Allocation>(v.allocations), waiting: queue.length ? queue : jobs, position: typeof v.position === "number" ? v.position : null };
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

const FAILURE_FRAGMENTS = "... on Rejected { code reason } ... on InvalidInput { field message } ... on NotAuthorised { message }";

function failureFragments(schema: ApiSchema, union: string | null): string {
  const t = union ? schema.types.get(union) : undefined;
  if (!t || !t.possibleTypes.length) return FAILURE_FRAGMENTS;
  return t.possibleTypes
    .map((p) => {
      const s = select(schema, p, ["code", "reason", "field", "message", "position", "parent"]);
      return s ? `... on ${p} { ${s} }` : "";
    })
    .join(" ");
}

export async function setAllocations(schema: ApiSchema, parent: string, shares: { child: string; share: number }[], reason: string): Promise<MutationOutcome> {
  const path = "Mutation.setAllocations";
  const union = namedType(field(schema, path)?.type);
  const args = argsFor(schema, path, { parent, shares, reason, input: { parent, shares, reason } }) || `(parent: ${JSON.stringify(parent)}, shares: [${shares.map((s) => `{child: ${JSON.stringify(s.child)}, share: ${s.share}}`).join(", ")}], reason: ${JSON.stringify(reason)})`;
  const data = await gql<{ setAllocations: Record<string, unknown> }>(`mutation SetAllocations { setAllocations${args} { __typename ${failureFragments(schema, union)} } }`);
  return outcome(data.setAllocations, ["AllocationsChanged", "AllocationsSet"]);
}

export const RESTORE_CANDIDATES = ["Mutation.restoreSession", "Mutation.restore"];

export async function restoreSession(schema: ApiSchema, jobId: string): Promise<MutationOutcome> {
  const path = firstOf(schema, ...RESTORE_CANDIDATES);
  if (!path) return { ok: false, kind: "missing", message: "the API has no restoreSession mutation yet", raw: {} };
  const name = path.split(".")[1];
  const union = namedType(field(schema, path)?.type);
  const args = argsFor(schema, path, { id: jobId, jobId, job: jobId, sessionId: jobId, session: jobId, input: { id: jobId, jobId, sessionId: jobId } });
  const data = await gql<Record<string, Record<string, unknown>>>(`mutation Restore { ${name}${args} { __typename ${failureFragments(schema, union)} } }`);
  const okTypes = (schema.types.get(union ?? "")?.possibleTypes ?? []).filter((p) => !["Rejected", "InvalidInput", "NotAuthorised", "NotFound"].includes(p));
  return outcome(data[name], okTypes.length ? okTypes : ["SessionRestored", "JobAccepted", "SessionOpened"]);
}

const WHATIF_QUERY = `query WhatIf($parent: String!, $shares: [ShareInput!]!) {
  whatIf(parent: $parent, shares: $shares) {
    __typename
    ... on WhatIfPreview { parent since until windowS jobs jobsCapped capacityGpus cached wallS summary
      allocations { name parent depth isProject changed shareBefore shareAfter entitlementBefore entitlementAfter
                    owedBefore deliveredBefore ratioBefore owedAfter deliveredAfter ratioAfter }
      waits { jobClass jobs p50BeforeS p90BeforeS p50AfterS p90AfterS } }
    ... on InvalidInput { field message }
    ... on NotAuthorised { message }
  }
}`;

/** The simulator's preview of a share change (Query.whatIf): the preview, or the server's refusal in words. */
export async function whatIf(parent: string, shares: { child: string; share: number }[]): Promise<WhatIfOutcome> {
  const data = await gql<{ whatIf: Record<string, unknown> & { __typename: string } }>(WHATIF_QUERY, { parent, shares });
  const v = data.whatIf;
  if (v.__typename === "WhatIfPreview") return { kind: "preview", preview: v as unknown as WhatIfPreview };
  return { kind: "refused", message: String(v.message ?? v.__typename), field: (v.field as string | null | undefined) ?? null };
}

/** The overview's figures, computed by the server from the log (Query.overview). */
export async function fetchOverview(args: { sinceS?: number | null; points?: number; utcOffsetS: number; periodS: number; pastPeriods?: number }): Promise<OverviewData> {
  const data = await gql<{ overview: OverviewData }>(
    `query Overview($sinceS: Float, $points: Int!, $utcOffsetS: Int!, $periodS: Float!, $pastPeriods: Int!) {
      overview(sinceS: $sinceS, points: $points, utcOffsetS: $utcOffsetS, periodS: $periodS, pastPeriods: $pastPeriods) { ${OVERVIEW_SELECTION} } }`,
    { sinceS: args.sinceS ?? null, points: args.points ?? 240, utcOffsetS: args.utcOffsetS, periodS: args.periodS, pastPeriods: args.pastPeriods ?? 3 },
  );
  return data.overview;
}

// -- the submit preview and debug quotas ------------------------------------------------------------

export type OutlookAnswer = { kind: "outlook"; outlook: SubmitOutlook } | { kind: "refused"; message: string };

/** What a job would get if submitted now (Query.submitOutlook): nothing is recorded. */
export async function previewSubmit(input: SubmitInput): Promise<OutlookAnswer> {
  const data = await gql<{ submitOutlook: Record<string, unknown> & { __typename: string } }>(
    `query SubmitOutlook($input: SubmitJobInput!) { submitOutlook(input: $input) { __typename
      ... on SubmitOutlook { ${OUTLOOK_SELECTION} } ... on InvalidInput { field message } ... on NotAuthorised { message } } }`,
    { input },
  );
  const v = data.submitOutlook;
  if (v.__typename === "SubmitOutlook") return { kind: "outlook", outlook: v as unknown as SubmitOutlook };
  return { kind: "refused", message: String(v.message ?? v.__typename) };
}

export type SubmitAnswer = { ok: true; jobId: string; outlook: SubmitOutlook | null } | { ok: false; message: string };

/** Submit a job (Mutation.submitJob); the answer carries the preview at submission. */
export async function submitJob(input: SubmitInput): Promise<SubmitAnswer> {
  const data = await gql<{ submitJob: Record<string, unknown> & { __typename: string } }>(
    `mutation SubmitJob($input: SubmitJobInput!) { submitJob(input: $input) { __typename
      ... on JobAccepted { job { id state } outlook { ${OUTLOOK_SELECTION} } } ${FAILURE_FRAGMENTS} } }`,
    { input },
  );
  const v = data.submitJob;
  if (v.__typename === "JobAccepted") {
    return { ok: true, jobId: String((v.job as { id: string }).id), outlook: (v.outlook ?? null) as SubmitOutlook | null };
  }
  const o = outcome(v, []);
  return { ok: false, message: o.message };
}

/** Set an allocation's debug quota (Mutation.setDebugQuota); null: back to the default. */
export async function setDebugQuota(allocation: string, gpus: number | null, reason: string): Promise<MutationOutcome> {
  const data = await gql<{ setDebugQuota: Record<string, unknown> }>(
    `mutation SetDebugQuota($allocation: String!, $gpus: Int, $reason: String!) {
      setDebugQuota(allocation: $allocation, gpus: $gpus, reason: $reason) { __typename
        ... on DebugQuotaChanged { allocation gpus position } ${FAILURE_FRAGMENTS} } }`,
    { allocation, gpus, reason },
  );
  return outcome(data.setDebugQuota, ["DebugQuotaChanged"]);
}
