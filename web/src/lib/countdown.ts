// Countdowns for the contract: when a job's protection ends and when an interactive session hits its cap.

import { formatDuration } from "./format";

export const DEFAULT_SESSION_CAP_S = 8 * 3600;
/** Warnings before the cap, seconds remaining: the UI marks the session at each. */
export const DEFAULT_WARNINGS_S = [3600, 900, 300];

export type CountdownLevel = "none" | "ok" | "warning" | "critical" | "expired";

export interface Countdown {
  remainingS: number | null;
  level: CountdownLevel;
  label: string;
  nextWarningS: number | null; // the next warning threshold still ahead
}

export function countdown(endsAt: number | null | undefined, now: number, warnings: number[] = DEFAULT_WARNINGS_S): Countdown {
  if (endsAt === null || endsAt === undefined || !Number.isFinite(endsAt)) {
    return { remainingS: null, level: "none", label: "—", nextWarningS: null };
  }
  const remaining = endsAt - now;
  const sorted = [...warnings].sort((a, b) => b - a);
  if (remaining <= 0) return { remainingS: 0, level: "expired", label: "cap reached", nextWarningS: null };
  const smallest = sorted[sorted.length - 1] ?? 0;
  const largest = sorted[0] ?? 0;
  const level: CountdownLevel = remaining <= smallest ? "critical" : remaining <= largest ? "warning" : "ok";
  const next = sorted.find((w) => w < remaining) ?? null;
  return { remainingS: remaining, level, label: `${formatDuration(remaining)} left`, nextWarningS: next };
}

/** The estimate of when protection ends where no JobStarted says (lib/contract.ts): `min_runtime` after the
 * (latest) start, for funded work; unfunded work has none. */
export function protectionEndsAt(job: { startedAt?: number | null; minRuntimeS?: number | null; funded?: boolean | null }): number | null {
  if (!job.startedAt || !job.funded || !job.minRuntimeS) return null;
  return job.startedAt + job.minRuntimeS;
}

/** The estimate of a session's cap where no SessionOpened says (lib/contract.ts): start + the policy's cap
 * (8 h by default). */
export function sessionCapEndsAt(job: { startedAt?: number | null }, capS: number = DEFAULT_SESSION_CAP_S): number | null {
  if (!job.startedAt) return null;
  return job.startedAt + capS;
}
