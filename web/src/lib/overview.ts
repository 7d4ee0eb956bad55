// The overview's figures as the API serves them (Query.overview), turned into what the charts and tables
// draw. No figure is computed here: the server folds them from the log.

export interface OccupancyPoint {
  t: number;
  funded: number;
  unfunded: number;
  idle: number;
  capacity: number;
}
export interface ClassWait {
  jobClass: string;
  jobs: number;
  started: number;
  waiting: number;
  p50S: number | null;
  p90S: number | null;
  maxS: number | null;
}
export interface OwedAllocation {
  name: string;
  isProject: boolean;
  owed: number;
  delivered: number;
  demand: number;
  entitled: number;
  ratio: number | null; // delivered ÷ owed as it is (above 1: over-delivery)
  overDelivered?: boolean;
}
export interface OwedPeriod {
  periodId: string;
  start: number;
  end: number;
  current: boolean;
  recorded: boolean;
  deliveredOfOwed: number | null;
  label?: string; // the period in words, from the API
  allocations: OwedAllocation[];
}
export interface OverviewData {
  position: number;
  since: number;
  until: number;
  stepS: number;
  capacityGpus: number;
  occupancy: OccupancyPoint[];
  demandByHourOfWeek: number[][];
  waits: ClassWait[];
  preemptionsPerDay: { day: string; count: number }[];
  owedDelivered: OwedPeriod[];
}

/** The browser's offset from UTC in seconds (east positive), for the hour-of-week and per-day figures. */
export function utcOffsetSeconds(d: Date = new Date()): number {
  return -d.getTimezoneOffset() * 60;
}

/** Stacked series [ms, GPUs] for funded, unfunded and idle. */
export function occupancySeries(points: OccupancyPoint[]): Record<"funded" | "unfunded" | "idle", [number, number][]> {
  return {
    funded: points.map((p) => [p.t * 1000, p.funded]),
    unfunded: points.map((p) => [p.t * 1000, p.unfunded]),
    idle: points.map((p) => [p.t * 1000, p.idle]),
  };
}

/** The busy share of the latest step (funded + unfunded over capacity), or null with no capacity. */
export function latestBusy(points: OccupancyPoint[]): { busy: number; capacity: number; fraction: number | null } {
  const last = points.at(-1);
  if (!last) return { busy: 0, capacity: 0, fraction: null };
  const busy = last.funded + last.unfunded;
  return { busy, capacity: last.capacity, fraction: last.capacity > 0 ? busy / last.capacity : null };
}

export interface OwedRow {
  name: string;
  owed: number;
  delivered: number;
  ratio: number | null;
  previousRatio: number | null;
}

/** Projects of the current period with anything owed or delivered, most owed first, with the ratio of
 * the previous period beside them. */
export function owedRows(periods: OwedPeriod[]): OwedRow[] {
  const current = periods.find((p) => p.current);
  const previous = periods.find((p) => !p.current);
  if (!current) return [];
  const prev = new Map((previous?.allocations ?? []).map((a) => [a.name, a]));
  return current.allocations
    .filter((a) => a.isProject && (a.owed > 0 || a.delivered > 0 || (prev.get(a.name)?.owed ?? 0) > 0))
    .map((a) => ({ name: a.name, owed: a.owed, delivered: a.delivered, ratio: a.ratio, previousRatio: prev.get(a.name)?.ratio ?? null }))
    .sort((a, b) => b.owed - a.owed || a.name.localeCompare(b.name));
}

/** Bars per project: owed and delivered GPU-hours in the current and the previous period. */
export function owedChart(periods: OwedPeriod[], limit = 12): { projects: string[]; series: { name: string; data: number[]; period: "current" | "previous"; kind: "owed" | "delivered" }[] } {
  const current = periods.find((p) => p.current);
  const previous = periods.find((p) => !p.current);
  const score = new Map<string, number>();
  for (const p of [current, previous]) for (const a of p?.allocations ?? []) if (a.isProject) score.set(a.name, (score.get(a.name) ?? 0) + a.owed + a.delivered);
  const projects = [...score.entries()].filter(([, s]) => s > 0).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).slice(0, limit).map(([n]) => n).sort();
  const val = (p: OwedPeriod | undefined, n: string, k: "owed" | "delivered") => (p?.allocations.find((a) => a.name === n)?.[k] ?? 0) / 3600;
  const series: { name: string; data: number[]; period: "current" | "previous"; kind: "owed" | "delivered" }[] = [];
  for (const [period, p] of [["previous", previous], ["current", current]] as const) {
    if (!p) continue;
    for (const kind of ["owed", "delivered"] as const) series.push({ name: `${kind} (${period})`, period, kind, data: projects.map((n) => val(p, n, kind)) });
  }
  return { projects, series };
}

/** Heatmap cells [hour, day, GPUs] and the largest value (at least 1, for the colour scale). */
export function heatmapCells(grid: number[][]): { cells: [number, number, number][]; max: number } {
  const cells: [number, number, number][] = [];
  let max = 0;
  grid.forEach((row, d) => row.forEach((v, h) => {
    cells.push([h, d, v]);
    max = Math.max(max, v);
  }));
  return { cells, max: Math.max(1, max) };
}

/** "current (since 00:00)", "2026-11-29 (recorded)", "2026-11-29 (computed)". */
export function periodLabel(p: OwedPeriod, fmt: (t: number) => string): string {
  if (p.current) return `current, since ${fmt(p.start)}`;
  return `${fmt(p.start)} – ${fmt(p.end)} (${p.recorded ? "closed, recorded" : "not closed, computed"})`;
}

/** Wait classes worth a row: those with jobs in the range. */
export function waitRows(waits: ClassWait[]): ClassWait[] {
  return waits.filter((w) => w.jobs > 0);
}
