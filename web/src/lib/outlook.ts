// The submit preview ("outlook") and debug quotas as the screens read them. The rules live in the server
// (policy/outlook.py, policy/debug_quota.py); this only checks the form before asking and words the answer.

export interface Qualification {
  qualified: boolean;
  reason: string; // within_quota | over_quota | not_debug | no_allocation | unfunded_by_request
  quotaGpus: number;
  inUseGpus: number;
  aheadGpus: number;
}

export interface SubmitOutlook {
  funded: boolean;
  reason: string; // funded | no_allocation | unfunded_by_request | entitlement_used
  fundedByLane: boolean; // qualified debug work funded by the debug lane while the entitlement is used
  protectionS: number;
  askedProtectionS: number;
  project: string;
  allocation: string | null;
  inUseGpus: number;
  entitledGpus: number;
  qualification: Qualification | null;
  message: string;
}

export interface DebugQuota {
  gpus: number;
  setGpus: number | null;
  isDefault: boolean;
  setOn: string | null;
}

export interface SubmitForm {
  project: string;
  gpus: string;
  minRuntimeS: string;
  jobClass: string;
  resumable: boolean;
  command: string;
  /** The GPU models and clusters it accepts (issue 25); none: any. */
  gpuModels?: string[];
  clusters?: string[];
}

export interface SubmitInput {
  project: string;
  gpus: number;
  minRuntimeS: number;
  jobClass: string;
  resumable: boolean;
  command: string[];
  /** Sent only when the form names some (SubmitJobInput.gpuModels, clusters: none means any). */
  gpuModels?: string[];
  clusters?: string[];
}

/** The form as the API's SubmitJobInput, or the first problem in words (field → message). */
export function parseSubmit(f: SubmitForm): { input: SubmitInput | null; errors: Record<string, string> } {
  const errors: Record<string, string> = {};
  const gpus = Number(f.gpus);
  const minRuntimeS = Number(f.minRuntimeS);
  if (!f.project.trim()) errors.project = "choose a project";
  if (!Number.isInteger(gpus) || gpus < 1) errors.gpus = "a whole number of GPUs, at least 1";
  if (f.minRuntimeS.trim() === "" || !Number.isFinite(minRuntimeS) || minRuntimeS < 0 || minRuntimeS > 8 * 3600)
    errors.minRuntimeS = "seconds of protection, 0 to 28800 (0: unfunded)";
  const command = f.command.trim() ? f.command.trim().split(/\s+/) : [];
  if (!command.length) errors.command = "the command to run";
  if (Object.keys(errors).length) return { input: null, errors };
  const input: SubmitInput = { project: f.project.trim(), gpus, minRuntimeS, jobClass: f.jobClass, resumable: f.resumable, command };
  if (f.gpuModels?.length) input.gpuModels = [...f.gpuModels];
  if (f.clusters?.length) input.clusters = [...f.clusters];
  return { input, errors };
}

/** What the preview needs (the command may still be empty): null while the form cannot be previewed. */
export function previewInput(f: SubmitForm): SubmitInput | null {
  const { input, errors } = parseSubmit({ ...f, command: f.command.trim() || "(preview)" });
  return input && !Object.keys(errors).length ? input : null;
}

export function outlookTone(o: SubmitOutlook): "ok" | "warn" {
  return o.funded ? "ok" : "warn";
}

export function outlookHeadline(o: SubmitOutlook): string {
  if (o.funded) return o.fundedByLane ? "Funded by the debug lane" : "Funded";
  if (o.reason === "unfunded_by_request") return "Unfunded: no protection asked";
  if (o.reason === "no_allocation") return "Unfunded: no allocation";
  if (o.reason === "entitlement_used") return "Unfunded: no allocation left";
  return "Unfunded";
}

export function qualificationLabel(q: Qualification): { text: string; tone: "ok" | "warn" | "muted" } {
  if (q.qualified) return { text: "debug: qualified", tone: "ok" };
  if (q.reason === "over_quota") return { text: "debug: over quota", tone: "warn" };
  return { text: `debug: not qualified (${q.reason.replace(/_/g, " ")})`, tone: "muted" };
}

/** A quota cell: "4 (default)", "2 (set)", "3 (from team-a)". */
export function quotaText(q: DebugQuota | null | undefined): string {
  if (!q) return "—";
  if (q.isDefault) return `${q.gpus} (default)`;
  if (q.setGpus !== null) return `${q.gpus} (set)`;
  return `${q.gpus} (from ${q.setOn})`;
}

/** The quota editor's text: "" → back to the default (null), else a whole number of GPUs ≥ 0. */
export function parseQuota(text: string): { ok: true; gpus: number | null } | { ok: false; message: string } {
  const t = text.trim();
  if (t === "") return { ok: true, gpus: null };
  const n = Number(t);
  if (!/^\d+$/.test(t) || !Number.isSafeInteger(n)) return { ok: false, message: "a whole number of GPUs, 0 or more (empty: default)" };
  return { ok: true, gpus: n };
}

/** A debug job's qualification as "why pending" carries it (the evidence's `debug_quota`, snake_case). */
export function qualificationFromEvidence(evidence: unknown): Qualification | null {
  if (!evidence || typeof evidence !== "object") return null;
  const q = (evidence as Record<string, unknown>).debug_quota;
  if (!q || typeof q !== "object") return null;
  const v = q as Record<string, unknown>;
  return { qualified: Boolean(v.qualified), reason: String(v.reason ?? ""), quotaGpus: Number(v.quota_gpus ?? 0), inUseGpus: Number(v.in_use_gpus ?? 0), aheadGpus: Number(v.ahead_gpus ?? 0) };
}
