// Countdowns for the contract: how long until a session's cap, from the times the API serves as its events
// recorded them (Job.sessionCapAt, Job.sessionWarningsAt: SessionOpened.cap_at and warnings_at). The client
// never computes a contract time itself (issue 24: an assumed 8 h cap showed every session "7 h 59 min left").

import { formatDuration } from "./format";

export type CountdownLevel = "none" | "ok" | "warning" | "critical" | "expired";

export interface Countdown {
  remainingS: number | null;
  level: CountdownLevel;
  label: string;
  nextWarningS: number | null; // the next warning threshold still ahead
}

/** Count down to `endsAt`; `warnings` are the thresholds (seconds before the end) that mark "warning" (the
 * largest) and "critical" (the smallest). Without thresholds a countdown is "ok" until it ends. */
export function countdown(endsAt: number | null | undefined, now: number, warnings: number[] = []): Countdown {
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

/** A session's cap countdown from the API's fields: the cap its SessionOpened recorded and the warnings
 * recorded with it (as thresholds before the cap). "none" while no SessionOpened records a cap. */
export function sessionCountdown(job: { sessionCapAt?: number | null; sessionWarningsAt?: number[] | null }, now: number): Countdown {
  const capAt = job.sessionCapAt ?? null;
  const thresholds = capAt === null ? [] : (job.sessionWarningsAt ?? []).map((w) => capAt - w).filter((s) => s > 0);
  return countdown(capAt, now, thresholds);
}
