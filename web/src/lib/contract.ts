// A job's contract facts that the API's Job type does not carry as fields (docs/ui.md "Gaps the client
// fills"): read from the job's own recorded events, which say them (JobStarted.protected_until,
// SessionOpened.cap_at and warnings_at, SessionRestored.new_job_id, JobSubmitted.restored_from,
// CheckpointSaved, JobPreempted); where no event says, the documented estimate, and which one it is.

import { protectionEndsAt, sessionCapEndsAt } from "./countdown";

export interface JobEvent {
  type: string;
  recordedAt: number;
  payload: unknown;
}

export interface ContractJob {
  state: string;
  jobClass: string;
  startedAt: number | null;
  minRuntimeS: number;
  funded: boolean;
}

/** Where a time comes from: a recorded event, or the estimate of the default policy. */
export type Source = "events" | "estimate";

export interface ContractFacts {
  protectionEndsAt: number | null;
  protectionSource: Source;
  capAt: number | null;
  capSource: Source;
  /** The times the session is warned before its cap (SessionOpened.warnings_at); null: not recorded. */
  warningsAt: number[] | null;
  restoredTo: string | null;
  restoredFrom: string | null;
  checkpoints: Record<string, unknown>[];
  preemptions: Record<string, unknown>[];
}

function payloadOf(e: JobEvent | undefined): Record<string, unknown> | null {
  return e && e.payload && typeof e.payload === "object" ? (e.payload as Record<string, unknown>) : null;
}

function num(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

function text(v: unknown): string | null {
  return typeof v === "string" && v ? v : null;
}

export function contractFacts(job: ContractJob, events: JobEvent[]): ContractFacts {
  const last = (type: string) => payloadOf([...events].reverse().find((e) => e.type === type));
  const started = last("JobStarted");
  const opened = last("SessionOpened");
  const restored = last("SessionRestored");
  const submitted = payloadOf(events.find((e) => e.type === "JobSubmitted"));
  const recordedProtection = num(started?.protected_until);
  const recordedCap = num(opened?.cap_at);
  const warnings = Array.isArray(opened?.warnings_at) ? opened.warnings_at.filter((w): w is number => typeof w === "number") : null;
  const withTime = (e: JobEvent) => ({ at: e.recordedAt, type: e.type, ...(payloadOf(e) ?? {}) });
  return {
    protectionEndsAt: recordedProtection ?? protectionEndsAt(job),
    protectionSource: recordedProtection !== null ? "events" : "estimate",
    capAt: recordedCap ?? sessionCapEndsAt(job),
    capSource: recordedCap !== null ? "events" : "estimate",
    warningsAt: warnings,
    restoredTo: text(restored?.new_job_id) ?? text(restored?.restored_to),
    restoredFrom: text(submitted?.restored_from),
    checkpoints: events.filter((e) => /Checkpoint/.test(e.type)).map(withTime),
    preemptions: events.filter((e) => e.type === "JobPreempted").map(withTime),
  };
}

/** A job's placement (Job.assignments, JSON): node → GPU indices; anything else reads as no placement. */
export function assignmentsOf(value: unknown): Record<string, number[]> {
  if (!value || typeof value !== "object" || Array.isArray(value)) return {};
  const out: Record<string, number[]> = {};
  for (const [node, gpus] of Object.entries(value as Record<string, unknown>)) {
    if (Array.isArray(gpus)) out[node] = gpus.filter((g): g is number => typeof g === "number");
  }
  return out;
}
