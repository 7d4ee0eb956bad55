import { formatGpuHours, formatShare, formatTime } from "./format";

// The allocation history (Query.allocationHistory) and a preemption's story (whyPreempted's
// evidence.preemption) as people read them: times as dates in the browser's zone, never epoch floats.

export interface AllocationChange {
  position: number;
  recordedAt: number;
  actor: string;
  reason: string;
  parent: string;
  allocation: string;
  shareBefore: number | null;
  shareAfter: number;
  debugQuotaBefore: number | null;
  debugQuotaAfter: number | null;
  debugQuotaSet: boolean;
  displayNameBefore?: string | null; // null: shown by its id (ADR 0055)
  displayNameAfter?: string | null;
  displayNameSet?: boolean;
}

export interface HistoryRow {
  key: string;
  when: string;
  allocation: string;
  parent: string;
  share: string;
  quota: string;
  name: string;
  by: string;
  reason: string;
  position: number;
}

export function shareChange(before: number | null, after: number): string {
  return before === null ? `new → ${formatShare(after)}` : `${formatShare(before)} → ${formatShare(after)}`;
}

export function quotaChange(before: number | null, after: number | null, named: boolean): string {
  const q = (x: number | null) => (x === null ? "default" : `${x} GPUs`);
  return named ? `${q(before)} → ${q(after)}` : q(after);
}

export function nameChange(before: string | null | undefined, after: string | null | undefined, named: boolean): string {
  const n = (x: string | null | undefined) => (x ? `“${x}”` : "its id");
  if (named) return `${n(before)} → ${n(after)}`;
  return after ? `“${after}”` : "—";
}

export function historyRows(entries: AllocationChange[]): HistoryRow[] {
  return entries.map((e) => ({
    key: `${e.position}-${e.allocation}`,
    when: formatTime(e.recordedAt),
    allocation: e.allocation,
    parent: e.parent,
    share: shareChange(e.shareBefore, e.shareAfter),
    quota: quotaChange(e.debugQuotaBefore, e.debugQuotaAfter, e.debugQuotaSet),
    name: nameChange(e.displayNameBefore, e.displayNameAfter, !!e.displayNameSet),
    by: e.actor || "—",
    reason: e.reason,
    position: e.position,
  }));
}

const TIME_KEYS = new Set(["now", "start_by_preemption", "start_without", "blocking_until", "ready_at"]);

export function isTimeKey(key: string): boolean {
  return TIME_KEYS.has(key) || key.endsWith("_at") || key.endsWith("_until") || key === "recordedAt" || key.endsWith("At");
}

/** Evidence with every time (by key: `*_at`, `*_until`, `now`, ...) as a local date; the rest as recorded. */
export function readableEvidence(value: unknown, key = ""): unknown {
  if (Array.isArray(value)) return value.map((v) => readableEvidence(v, key));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, readableEvidence(v, k)]));
  }
  if (typeof value === "number" && Number.isFinite(value) && isTimeKey(key)) return formatTime(value);
  return value;
}

export interface PreemptionStory {
  reason?: string | null;
  beneficiary_job_id?: string | null;
  beneficiary_allocation?: string | null;
  beneficiary_gpus?: number | null;
  gain_gpu_s?: number | null;
  cost_gpu_s?: number | null;
  lost_gpu_s?: number | null;
  requested_by?: string | null;
  requested_role?: string | null;
  note?: string | null;
  requested_at?: number | null;
  stopped_at?: number | null;
}

/** The story's facts as label/value pairs, in the order a researcher asks them. */
export function preemptionFacts(story: PreemptionStory): [string, string][] {
  const out: [string, string][] = [];
  if (story.beneficiary_job_id) {
    let who = `job ${story.beneficiary_job_id}`;
    if (story.beneficiary_allocation) who += ` (allocation ${story.beneficiary_allocation})`;
    if (story.beneficiary_gpus !== null && story.beneficiary_gpus !== undefined) who += `, ${story.beneficiary_gpus} GPUs`;
    out.push(["Gained", who]);
  }
  if (story.gain_gpu_s !== null && story.gain_gpu_s !== undefined && story.cost_gpu_s !== null && story.cost_gpu_s !== undefined) {
    out.push(["By how much", `${formatGpuHours(story.gain_gpu_s)} of earlier start against ${formatGpuHours(story.cost_gpu_s)} of work lost here`]);
  } else if (story.lost_gpu_s !== null && story.lost_gpu_s !== undefined) {
    out.push(["Work lost", `${formatGpuHours(story.lost_gpu_s)} since the last checkpoint`]);
  }
  if (story.requested_by) out.push(["Asked by", story.requested_by + (story.requested_role ? ` (${story.requested_role})` : "")]);
  if (story.note) out.push(["Note", story.note]);
  if (story.requested_at !== null && story.requested_at !== undefined) out.push(["Requested", formatTime(story.requested_at)]);
  if (story.stopped_at !== null && story.stopped_at !== undefined) out.push(["Stopped", formatTime(story.stopped_at)]);
  return out;
}
