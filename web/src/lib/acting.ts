// Acting from the UI (issue 24): which projects one may act for, the submit form read as the API's submitJob
// or openSession input, which actions a job offers whom, how each is confirmed, and "my jobs". The rules
// live in the server (steward.auth.access: `work` submits, cancels and runs sessions in one's projects;
// `preempt` asks for a requeue; steward.domain.decide: what each state allows); this only hides dead ends and
// words the answers. Whatever is shown, the server decides, and its refusal is shown as it gave it.

import type { Identity } from "../api/auth";
import { type SubmitForm, type SubmitInput, parseSubmit } from "./outlook";

/** The contract's cap on protection (steward.domain.protection.MAX_MIN_RUNTIME_S) and a session's cap
 * (OpenSessionInput.capS ≤ 8 h): the API refuses more whatever the policy says; the policy may cap lower
 * (its `max_min_runtime_s`, which the preview reports as `askedProtectionS`). */
export const MAX_PROTECTION_S = 8 * 3600;

/** What the signed-in person may do, from `me.capabilities` (the role's defaults when the API does not say). */
export interface Powers {
  work: boolean; // submit, cancel, open / close / restore sessions in their projects
  preempt: boolean; // ask for a running job's requeue (admins; managers in their subtree)
}

export function powersOf(id: Pick<Identity, "role" | "capabilities">): Powers {
  if (id.capabilities) return { work: id.capabilities.includes("work"), preempt: id.capabilities.includes("preempt") };
  return { work: id.role === "admin" || id.role === "researcher", preempt: id.role === "admin" || id.role === "manager" };
}

/** The projects one may submit to: the leaves of the tree the API shows (Query.projects answers only those
 * in one's scopes), when one may work at all; sorted by name. */
export function actableProjects(projects: { name: string; isProject: boolean }[], powers: Powers): string[] {
  if (!powers.work) return [];
  return [...new Set(projects.filter((p) => p.isProject).map((p) => p.name))].sort((a, b) => a.localeCompare(b));
}

/** The project the form starts on: the one last used if still allowed, else the first. */
export function initialProject(projects: string[], last: string | null): string {
  return last && projects.includes(last) ? last : (projects[0] ?? "");
}

// -- the submit form ---------------------------------------------------------------------------------

export type Submission =
  | { op: "submitJob"; input: SubmitInput }
  | { op: "openSession"; input: SessionInput };

/** Mutation.openSession's input: like a job's, the GPU models and clusters it accepts only when it names some
 * (none: any; OpenSessionInput.gpuModels, clusters, checked by the same rules as a job's). */
export interface SessionInput {
  project: string;
  gpus: number;
  command: string[];
  capS: number;
  gpuModels?: string[];
  clusters?: string[];
}

/** The form as the mutation to send: an interactive job is a session (Mutation.openSession, its protection
 * the session's cap, in (0, 8 h]); anything else Mutation.submitJob. Field → message for what is wrong. */
export function parseSubmission(f: SubmitForm): { submission: Submission | null; errors: Record<string, string> } {
  const { input, errors } = parseSubmit(f);
  const out = { ...errors };
  const session = f.jobClass === "interactive";
  const seconds = Number(f.minRuntimeS);
  if (session && !out.minRuntimeS && !(seconds > 0)) out.minRuntimeS = "a session's cap: more than 0 and at most 28800 s (8 h)";
  if (!input || Object.keys(out).length) return { submission: null, errors: out };
  if (session) {
    const { project, gpus, command, minRuntimeS: capS, gpuModels, clusters } = input;
    const open: SessionInput = { project, gpus, command, capS };
    if (gpuModels) open.gpuModels = gpuModels;
    if (clusters) open.clusters = clusters;
    return { submission: { op: "openSession", input: open }, errors: out };
  }
  return { submission: { op: "submitJob", input }, errors: out };
}

/** What the preview asks of Query.submitOutlook for a submission: a session as an interactive, resumable job
 * whose protection is its cap (what openSession records), with what it accepts. */
export function previewOf(s: Submission): SubmitInput {
  if (s.op === "submitJob") return s.input;
  const { capS, ...rest } = s.input;
  return { ...rest, minRuntimeS: capS, jobClass: "interactive", resumable: true };
}

/** What the preview box says while the form cannot be previewed. */
export function previewHint(f: SubmitForm): string {
  const session = f.jobClass === "interactive";
  return `Fill in the project, GPUs and ${session ? "cap" : "protection"} to see what it would get now.`;
}

/** The preview's protection asked vs what the policy allows: a line when the policy caps it lower. */
export function policyCapNote(askedS: number, outlook: { askedProtectionS: number } | null | undefined): string | null {
  if (!outlook || !(askedS > outlook.askedProtectionS + 0.5)) return null;
  const h = (s: number) => (s % 3600 === 0 ? `${s / 3600} h` : s % 60 === 0 ? `${s / 60} min` : `${Math.round(s)} s`);
  return `The policy caps protection at ${h(outlook.askedProtectionS)}: the job would be protected for ${h(outlook.askedProtectionS)}, not ${h(askedS)}.`;
}

/** Which form field an API refusal is about: InvalidInput names it (the API's name), or the domain's message
 * does ("min_runtime_s must be in …", "project 'x' is unknown"); null: the form as a whole. */
export function fieldOfRefusal(field: string | null | undefined, message: string): keyof SubmitForm | null {
  const byName: Record<string, keyof SubmitForm> = {
    project: "project", gpus: "gpus", minRuntimeS: "minRuntimeS", capS: "minRuntimeS", command: "command",
    jobClass: "jobClass", resumable: "resumable", gpuModels: "gpuModels", clusters: "clusters",
  };
  if (field && byName[field]) return byName[field];
  const m = message.toLowerCase();
  if (/min_runtime|protection|\bcap\b/.test(m)) return "minRuntimeS";
  if (/gpu_models|\bgpu models?\b/.test(m)) return "gpuModels"; // before "GPUs": "unknown GPU model 'x'"
  if (/\bgpus?\b/.test(m)) return "gpus";
  if (/\bcommand\b/.test(m)) return "command";
  if (/\bproject\b/.test(m)) return "project";
  if (/\bjob_class\b|\bclass\b/.test(m)) return "jobClass";
  if (/\bclusters?\b/.test(m)) return "clusters";
  return null;
}

// -- actions on a job ------------------------------------------------------------------------------------

export type ActionKind = "cancel" | "close" | "restore" | "requeue";

/** States the ledger still cancels (steward.domain.state.TERMINAL_STATES are not). */
export const CANCELLABLE = ["QUEUED", "PLACED", "RUNNING", "PREEMPTED", "LOST"];
/** Sessions the ledger restores (steward.domain.sessions.RESTORABLE_STATES). */
export const RESTORABLE = ["SUSPENDED", "CANCELLED", "FAILED", "COMPLETED"];
/** Jobs a preemption can be asked for (the ledger then refuses it while protected). */
export const REQUEUEABLE = ["RUNNING"];

/** The actions a job offers this person: sessions are closed (cancelled) and restored, other jobs cancelled;
 * requeue (a preemption with requeue) for those who may ask for one. */
export function jobActions(job: { state: string; jobClass: string }, powers: Powers): ActionKind[] {
  const session = job.jobClass === "interactive";
  const out: ActionKind[] = [];
  if (powers.work && CANCELLABLE.includes(job.state)) out.push(session ? "close" : "cancel");
  if (powers.work && session && RESTORABLE.includes(job.state)) out.push("restore");
  if (powers.preempt && REQUEUEABLE.includes(job.state)) out.push("requeue");
  return out;
}

export interface ActionText {
  label: string; // the button
  question: (id: string) => string; // asked before sending
  confirm: string; // the confirming button
  done: string; // said when the API accepted it
  reason: "optional" | "required" | "none";
}

export const ACTIONS: Record<ActionKind, ActionText> = {
  cancel: {
    label: "Cancel job", confirm: "Yes, cancel it", reason: "optional",
    question: (id) => `Cancel ${id}? It stops now (a running job loses the work since its last checkpoint) and is not requeued.`,
    done: "Cancelled.",
  },
  close: {
    label: "Close session", confirm: "Yes, close it", reason: "optional",
    question: (id) => `Close session ${id}? Its process is stopped; you can restore it later from its last checkpoint.`,
    done: "Closed: the session is stopped (restorable from its last checkpoint).",
  },
  restore: {
    label: "Restore session", confirm: "Yes, restore it", reason: "none",
    question: (id) => `Restore ${id}? A new session opens from its last checkpoint, in the same project, with the same GPUs.`,
    done: "Restore requested: the session re-opens from its last checkpoint.",
  },
  requeue: {
    label: "Requeue", confirm: "Yes, requeue it", reason: "required",
    question: (id) => `Requeue ${id}? It is asked to checkpoint, stopped after the grace period and waits in the queue again. The ledger refuses while the job is protected.`,
    done: "Requeue requested: the job checkpoints, stops after the grace period and waits again.",
  },
};

/** The reason to send, or why it cannot be sent yet. */
export function actionReason(kind: ActionKind, text: string): { ok: true; reason: string } | { ok: false; message: string } {
  const t = text.trim();
  if (ACTIONS[kind].reason === "required" && !t) return { ok: false, message: "say why (recorded with the request)" };
  return { ok: true, reason: t.slice(0, 500) };
}

/** "Submit again": the form filled from a finished job (the API has no requeue a researcher may ask for; a
 * new job with the same shape is what is left). A session opens again as a session, its cap as asked. */
export function formFromJob(job: { project: string; gpus: number; minRuntimeS: number; jobClass: string; resumable: boolean; command: string[]; gpuModels?: string[]; clusters?: string[] }): SubmitForm {
  return {
    project: job.project, gpus: String(job.gpus), minRuntimeS: String(job.minRuntimeS), jobClass: job.jobClass,
    resumable: job.jobClass === "interactive" || job.resumable, command: job.command.join(" "),
    gpuModels: [...(job.gpuModels ?? [])], clusters: [...(job.clusters ?? [])],
  };
}

/** Jobs whose shape can be sent again: finished ones (a restorable session is restored instead). */
export function canSubmitAgain(job: { state: string; jobClass: string }, powers: Powers): boolean {
  return powers.work && ["COMPLETED", "FAILED", "CANCELLED"].includes(job.state) && job.jobClass !== "interactive";
}

// -- my jobs, and finding one ------------------------------------------------------------------------

export type Whose = "mine" | "all";

/** Researchers start on their own jobs and sessions; the others on everything they may see. */
export function defaultWhose(role: string): Whose {
  return role === "researcher" ? "mine" : "all";
}

/** The API's JobFilter for the screen's filters (Query.jobs / Query.sessions). */
export function jobFilter(f: { whose: Whose; state?: string; jobClass?: string }): {
  mine: boolean; states: string[] | null; jobClass: string | null;
} {
  return { mine: f.whose === "mine", states: f.state ? [f.state] : null, jobClass: f.jobClass || null };
}

export interface Findable {
  id: string;
  project: string;
  projectName?: string | null; // its display name (ADR 0055): a search finds a job by it too
  command: string[];
  owner?: { subject: string; name: string } | null;
}

/** The search box: every word must appear in the id, the project, the command or the owner (any case). */
export function matchesSearch(job: Findable, query: string): boolean {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return true;
  const hay = [job.id, job.project, job.projectName ?? "", job.command.join(" "), job.owner?.subject ?? "", job.owner?.name ?? ""].join(" ").toLowerCase();
  return words.every((w) => hay.includes(w));
}

/** The owner as a person reads it: the display name, else the subject; "—" for jobs recorded before owners. */
export function ownerLabel(owner: { subject: string; name: string } | null | undefined): string {
  if (!owner) return "—";
  return owner.name || owner.subject || "—";
}
