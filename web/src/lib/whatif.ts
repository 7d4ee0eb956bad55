// The what-if preview's client logic: when to ask, how to wait for a long replay, and how to read the
// answer (with vs without the change) as rows a manager can compare at a glance.

export interface WhatIfAllocation {
  name: string;
  parent: string;
  depth: number;
  isProject: boolean;
  changed: boolean;
  shareBefore: number;
  shareAfter: number;
  entitlementBefore: number;
  entitlementAfter: number;
  owedBefore: number;
  deliveredBefore: number;
  ratioBefore: number | null;
  owedAfter: number;
  deliveredAfter: number;
  ratioAfter: number | null;
}

export interface WhatIfWaits {
  jobClass: string;
  jobs: number;
  p50BeforeS: number | null;
  p90BeforeS: number | null;
  p50AfterS: number | null;
  p90AfterS: number | null;
}

export interface WhatIfPreview {
  parent: string;
  since: number;
  until: number;
  windowS: number;
  jobs: number;
  jobsCapped: boolean;
  capacityGpus: number;
  cached: boolean;
  wallS: number;
  summary: string;
  allocations: WhatIfAllocation[];
  waits: WhatIfWaits[];
}

export type WhatIfOutcome =
  | { kind: "preview"; preview: WhatIfPreview }
  | { kind: "refused"; message: string; field: string | null };

/** Ask only for a proposal that passed validation and changes something (the server checks again). */
export function shouldPreview(v: { changed: unknown[]; sumError: string | null; rowErrors: Record<string, string> }): boolean {
  return v.changed.length > 0 && v.sumError === null && Object.keys(v.rowErrors).length === 0;
}

/** A stable key for a proposal: the same shares in another order are the same question. */
export function proposalKey(parent: string, changed: { child: string; share: number }[]): string {
  return JSON.stringify([parent, [...changed].sort((a, b) => a.child.localeCompare(b.child)).map((c) => [c.child, c.share])]);
}

export type Trend = "better" | "worse" | "same" | "unknown";

/** For delivered/owed higher is better; a change under half a percentage point reads as the same. */
export function ratioTrend(before: number | null, after: number | null): Trend {
  if (before === null || after === null) return before === after ? "same" : "unknown";
  const d = after - before;
  if (Math.abs(d) < 0.005) return "same";
  return d > 0 ? "better" : "worse";
}

/** For waits lower is better; under a second, or under 2 % of the wait, reads as the same. */
export function waitTrend(before: number | null, after: number | null): Trend {
  if (before === null || after === null) return before === after ? "same" : "unknown";
  const d = after - before;
  if (Math.abs(d) < Math.max(1, 0.02 * Math.max(before, after))) return "same";
  return d < 0 ? "better" : "worse";
}

/** "+12 pts" / "−3 pts" / "±0": the change of a ratio in percentage points. */
export function pointsDelta(before: number | null, after: number | null): string {
  if (before === null || after === null) return "—";
  const pts = Math.round((after - before) * 100);
  if (pts === 0) return "±0";
  return `${pts > 0 ? "+" : "−"}${Math.abs(pts)} pts`;
}

export interface PreviewRow extends WhatIfAllocation {
  trend: Trend;
  delta: string;
}

/** The rows to show: changed children first, then the rest of the subtree (parent first), depth order. */
export function previewRows(p: WhatIfPreview): PreviewRow[] {
  const rows = p.allocations.map((a) => ({ ...a, trend: ratioTrend(a.ratioBefore, a.ratioAfter), delta: pointsDelta(a.ratioBefore, a.ratioAfter) }));
  const rank = (a: WhatIfAllocation) => (a.name === p.parent ? 0 : a.changed ? 1 : 2);
  return rows.sort((a, b) => rank(a) - rank(b) || a.depth - b.depth || a.name.localeCompare(b.name));
}

export interface WaitRow extends WhatIfWaits {
  trend: Trend;
}

/** Wait classes that had jobs in the replay. */
export function waitRows(p: WhatIfPreview): WaitRow[] {
  return p.waits.filter((w) => w.jobs > 0 || w.p90BeforeS !== null || w.p90AfterS !== null).map((w) => ({ ...w, trend: waitTrend(w.p90BeforeS, w.p90AfterS) }));
}

/** What the preview replayed, in words ("312 jobs of the last 7 days on 32 GPUs"). */
export function replayCaption(p: WhatIfPreview): string {
  const days = p.windowS / 86400;
  const span = days >= 1 ? `${Number(days.toFixed(1))} day${days === 1 ? "" : "s"}` : `${Math.round(p.windowS / 3600)} h`;
  let s = `${p.jobs} job${p.jobs === 1 ? "" : "s"} of the last ${span} on ${p.capacityGpus} GPUs`;
  if (p.jobsCapped) s += " (the newest, capped)";
  s += p.cached ? " · from cache" : ` · simulated in ${p.wallS.toFixed(1)} s`;
  return s;
}

export interface RetryOptions {
  attempts: number;
  delayMs: number;
  sleep?: (ms: number) => Promise<void>;
  onWaiting?: (attempt: number) => void;
}

/** Is this error the server saying "still replaying, ask again" (the run continues and is cached)? */
export function isStillRunning(err: unknown): boolean {
  const errors = (err as { errors?: { extensions?: Record<string, unknown> }[] } | null)?.errors;
  return Array.isArray(errors) && errors.some((e) => e.extensions?.code === "WHATIF_TIMEOUT");
}

/** Call `ask` until it answers, retrying only while the server reports the replay still running. */
export async function askUntilDone<T>(ask: () => Promise<T>, opts: RetryOptions): Promise<T> {
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  for (let attempt = 1; ; attempt++) {
    try {
      return await ask();
    } catch (err) {
      if (!isStillRunning(err) || attempt >= opts.attempts) throw err;
      opts.onWaiting?.(attempt);
      await sleep(opts.delayMs);
    }
  }
}
