// A job's contract history that the API's Job type does not carry as fields (docs/ui.md "Gaps the client
// fills"): read from the job's own recorded events (SessionRestored.new_job_id, JobSubmitted.restored_from,
// CheckpointSaved, JobPreempted). The contract's times are the API's own fields (Job.protectedUntil,
// Job.sessionCapAt, Job.sessionWarningsAt): nothing here computes or estimates them.

export interface JobEvent {
  type: string;
  recordedAt: number;
  payload: unknown;
}

export interface ContractFacts {
  restoredTo: string | null;
  restoredFrom: string | null;
  checkpoints: Record<string, unknown>[];
  preemptions: Record<string, unknown>[];
}

function payloadOf(e: JobEvent | undefined): Record<string, unknown> | null {
  return e && e.payload && typeof e.payload === "object" ? (e.payload as Record<string, unknown>) : null;
}

function text(v: unknown): string | null {
  return typeof v === "string" && v ? v : null;
}

export function contractFacts(events: JobEvent[]): ContractFacts {
  const restored = payloadOf([...events].reverse().find((e) => e.type === "SessionRestored"));
  const submitted = payloadOf(events.find((e) => e.type === "JobSubmitted"));
  const withTime = (e: JobEvent) => ({ at: e.recordedAt, type: e.type, ...(payloadOf(e) ?? {}) });
  return {
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
