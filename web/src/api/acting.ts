// The Jobs screen's reads and the actions on jobs and sessions (src/api/operations/acting.graphql): each a
// generated operation typed by the API's schema. Every refusal comes back in the server's own words.

import { request } from "./client";
import {
  ActingJobOwnerDocument, ActingJobsDocument, ActingProjectsDocument, ActingSessionsDocument, CancelJobDocument, OpenSessionDocument,
  RequeueJobDocument, RestoreSessionDocument, SubmitJobDocument, type ActingJobsQuery,
} from "./generated";
import { MAX_PAGE, previewSubmit, type OutlookAnswer, type SubmitAnswer } from "./queries";
import type { ActionKind, Submission, Whose } from "../lib/acting";
import { jobFilter, previewOf } from "../lib/acting";

export type OwnedJob = ActingJobsQuery["jobs"]["edges"][number]["node"];

/** Jobs (or only sessions) one may see, newest first, with their owner; `whose: "mine"` only one's own. */
export async function fetchOwnedJobs(f: { whose: Whose; state?: string; jobClass?: string; sessions?: boolean }, limit = MAX_PAGE): Promise<OwnedJob[]> {
  const vars = { first: Math.min(limit, MAX_PAGE), filter: jobFilter(f) };
  if (f.sessions) return (await request(ActingSessionsDocument, vars)).sessions.edges.map((e) => e.node);
  return (await request(ActingJobsDocument, vars)).jobs.edges.map((e) => e.node);
}

/** Who a job belongs to (Job.owner; null for jobs recorded before owners, or none you may see). */
export async function fetchOwner(id: string): Promise<{ subject: string; name: string } | null> {
  return (await request(ActingJobOwnerDocument, { id })).job?.owner ?? null;
}

/** The projects (leaves) one may see (Query.projects). */
export async function fetchProjects(): Promise<{ name: string; isProject: boolean }[]> {
  return (await request(ActingProjectsDocument, {})).projects;
}

/** A refusal: the server's words, and the input field it names (InvalidInput) when it names one. */
export interface Refusal {
  message: string;
  field: string | null;
  code: string | null;
}

type Payload = { __typename: string; code?: string; reason?: string; message?: string; field?: string | null };

function refusalOf(v: Payload): Refusal {
  if (v.__typename === "Rejected") return { message: v.reason ?? "refused", field: null, code: v.code ?? null };
  if (v.__typename === "InvalidInput") return { message: v.message ?? "invalid input", field: v.field ?? null, code: null };
  return { message: v.message ?? v.__typename, field: null, code: null };
}

export type ActAnswer = { ok: true; jobId: string } | { ok: false; refusal: Refusal };

/** Cancel a job or close a session (Mutation.cancelJob), restore a session (Mutation.restoreSession: the
 * answer names the new session) or requeue a running job (Mutation.requestPreemption with requeue), pinned to
 * the attempt the person saw when it is known (ADR 0061: a late click never stops the attempt that followed). */
export async function act(kind: ActionKind, jobId: string, reason: string, attempt?: number | null): Promise<ActAnswer> {
  let v: Payload & { job?: { id: string } };
  if (kind === "cancel" || kind === "close") {
    v = (await request(CancelJobDocument, { id: jobId, reason: reason || (kind === "close" ? "closed from the UI" : "cancelled from the UI") })).cancelJob;
    if (v.__typename === "JobCancelled") return { ok: true, jobId };
  } else if (kind === "restore") {
    v = (await request(RestoreSessionDocument, { id: jobId })).restoreSession;
    if (v.__typename === "SessionRestored" && v.job) return { ok: true, jobId: v.job.id };
  } else {
    v = (await request(RequeueJobDocument, { job: jobId, reason, attempt: attempt ?? null })).requestPreemption;
    if (v.__typename === "PreemptionRequested") return { ok: true, jobId };
  }
  return { ok: false, refusal: refusalOf(v) };
}

export type SendAnswer = SubmitAnswer & { field?: string | null };

/** Send the form: Mutation.submitJob, or Mutation.openSession for a session. */
export async function send(s: Submission): Promise<SendAnswer> {
  if (s.op === "submitJob") {
    const j = (await request(SubmitJobDocument, { input: s.input })).submitJob;
    if (j.__typename === "JobAccepted") return { ok: true, jobId: j.job.id, outlook: j.outlook ?? null };
    const r = refusalOf(j);
    return { ok: false, message: r.code ? `${r.message} (${r.code})` : r.message, field: r.field };
  }
  const v = (await request(OpenSessionDocument, { input: s.input })).openSession;
  if (v.__typename === "SessionOpened") return { ok: true, jobId: v.job.id, outlook: v.outlook ?? null };
  const r = refusalOf(v);
  return { ok: false, message: r.code ? `${r.message} (${r.code})` : r.message, field: r.field };
}

/** The preview of what the form would send (Query.submitOutlook; a session as an interactive job whose
 * protection is its cap, which is what openSession records). */
export function preview(s: Submission): Promise<OutlookAnswer> {
  return previewSubmit(previewOf(s));
}
