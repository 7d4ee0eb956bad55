// Fleet statistics the overview shows, computed from job rows when the API does not serve them yet.
// Times are epoch seconds; GPU figures are GPUs (occupancy) or GPU-seconds (owed / delivered).

export interface JobLike {
  id: string;
  project: string;
  state: string;
  gpus: number;
  jobClass?: string;
  funded?: boolean;
  submittedAt: number;
  startedAt?: number | null;
  endedAt?: number | null;
  attempt?: number;
}

export function quantile(values: number[], q: number): number | null {
  if (!values.length) return null;
  const s = [...values].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

function runInterval(j: JobLike, now: number): [number, number] | null {
  if (j.startedAt === null || j.startedAt === undefined) return null;
  const end = j.endedAt ?? (["RUNNING", "PLACED"].includes(j.state) ? now : j.startedAt);
  return end > j.startedAt ? [j.startedAt, end] : null;
}

function overlap(a: [number, number], b0: number, b1: number): number {
  return Math.max(0, Math.min(a[1], b1) - Math.max(a[0], b0));
}

export interface OccupancySeries {
  t: number[];
  funded: number[];
  unfunded: number[];
  idle: number[];
}

/** Average GPUs busy in each step, split funded / unfunded, and idle = capacity − busy. */
export function occupancySeries(jobs: JobLike[], capacity: number, from: number, to: number, step: number): OccupancySeries {
  const n = Math.max(1, Math.ceil((to - from) / step));
  const funded = new Array<number>(n).fill(0);
  const unfunded = new Array<number>(n).fill(0);
  for (const j of jobs) {
    const iv = runInterval(j, to);
    if (!iv) continue;
    const first = Math.max(0, Math.floor((iv[0] - from) / step));
    const last = Math.min(n - 1, Math.floor((iv[1] - from) / step));
    for (let i = first; i <= last; i++) {
      const b0 = from + i * step;
      const gpus = (overlap(iv, b0, b0 + step) / step) * j.gpus;
      if (j.funded === false) unfunded[i] += gpus;
      else funded[i] += gpus;
    }
  }
  const round = (x: number) => Math.round(x * 1000) / 1000;
  return {
    t: Array.from({ length: n }, (_, i) => from + i * step),
    funded: funded.map(round),
    unfunded: unfunded.map(round),
    idle: funded.map((f, i) => round(Math.max(0, capacity - f - unfunded[i]))),
  };
}

/** GPUs asked for by submissions, by [weekday Monday=0][hour] in local time. */
export function demandByHourOfWeek(jobs: JobLike[]): number[][] {
  const grid = Array.from({ length: 7 }, () => new Array<number>(24).fill(0));
  for (const j of jobs) {
    const d = new Date(j.submittedAt * 1000);
    const day = (d.getDay() + 6) % 7;
    grid[day][d.getHours()] += j.gpus;
  }
  return grid;
}

/** p90 time from submission to first start, per class; still-waiting jobs count with their wait so far. */
export function p90WaitByClass(jobs: JobLike[], now: number): Record<string, number | null> {
  const waits: Record<string, number[]> = {};
  for (const j of jobs) {
    const cls = j.jobClass ?? "batch";
    const waited = j.startedAt != null ? j.startedAt - j.submittedAt : ["QUEUED", "PREEMPTED"].includes(j.state) ? now - j.submittedAt : null;
    if (waited === null) continue;
    (waits[cls] ??= []).push(Math.max(0, waited));
  }
  return Object.fromEntries(Object.entries(waits).map(([c, w]) => [c, quantile(w, 0.9)]));
}

/** Count events of type JobPreempted per local day ("YYYY-MM-DD"). */
export function preemptionsPerDay(events: { type: string; recordedAt: number }[]): { day: string; count: number }[] {
  const counts = new Map<string, number>();
  for (const e of events) {
    if (e.type !== "JobPreempted") continue;
    const d = new Date(e.recordedAt * 1000);
    const key = `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([day, count]) => ({ day, count }));
}

export interface OwedDelivered {
  project: string;
  owed: number; // GPU-seconds
  delivered: number; // GPU-seconds
  ratio: number | null;
}

/**
 * The policy's headline figure for one period, hour by hour: owed = min(entitlement × capacity, demand),
 * delivered = GPU-time actually run. Demand in an hour is the GPUs of the project's jobs that were
 * waiting or running in it (time-weighted).
 */
export function owedVsDelivered(
  jobs: JobLike[],
  entitlement: Map<string, number>,
  capacity: number,
  from: number,
  to: number,
  now: number,
  step = 3600,
): OwedDelivered[] {
  const out: OwedDelivered[] = [];
  const byProject = new Map<string, JobLike[]>();
  for (const j of jobs) (byProject.get(j.project) ?? byProject.set(j.project, []).get(j.project)!).push(j);
  const projects = new Set([...entitlement.keys()].filter((p) => byProject.has(p) || entitlement.get(p)! > 0));
  for (const p of byProject.keys()) projects.add(p);
  for (const project of projects) {
    const own = byProject.get(project) ?? [];
    const ent = entitlement.get(project) ?? 0;
    let owed = 0;
    let delivered = 0;
    for (let b0 = from; b0 < to; b0 += step) {
      const b1 = Math.min(to, b0 + step);
      let demand = 0;
      for (const j of own) {
        const presentTo = j.endedAt ?? now;
        demand += overlap([j.submittedAt, presentTo], b0, b1) * j.gpus;
        const iv = runInterval(j, now);
        if (iv) delivered += overlap(iv, b0, b1) * j.gpus;
      }
      owed += Math.min(ent * capacity * (b1 - b0), demand);
    }
    if (!own.length && ent === 0) continue;
    out.push({ project, owed, delivered, ratio: owed > 0 ? delivered / owed : null });
  }
  return out.sort((a, b) => b.owed - a.owed || a.project.localeCompare(b.project));
}
