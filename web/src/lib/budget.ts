// The budget report as the API serves it (Query.budgetReport), turned into the table's rows and the trend
// chart's series. No figure is computed here: owed, delivered and the ratio come from the server.

import type { OwedPeriod } from "./overview";

export interface BudgetRow {
  period: string;
  periodId: string;
  current: boolean;
  name: string;
  owed: number; // GPU-seconds
  delivered: number;
  ratio: number | null; // as it is: above 1 is over-delivery
}

/** One row per period and project with anything owed or delivered, newest period first, projects by name. */
export function budgetRows(periods: OwedPeriod[]): BudgetRow[] {
  const rows: BudgetRow[] = [];
  for (const p of [...periods].sort((a, b) => b.start - a.start)) {
    for (const a of [...p.allocations].sort((x, y) => x.name.localeCompare(y.name))) {
      if (!a.isProject || (a.owed === 0 && a.delivered === 0)) continue;
      rows.push({ period: p.label ?? p.periodId, periodId: p.periodId, current: p.current, name: a.name, owed: a.owed, delivered: a.delivered, ratio: a.ratio });
    }
  }
  return rows;
}

/** The trend: per project (at most `limit`, most owed first), delivered ÷ owed per period, oldest first
 * (null where nothing was owed: a gap in the line). */
export function budgetTrend(periods: OwedPeriod[], limit = 8): { starts: number[]; series: { name: string; data: (number | null)[] }[] } {
  const ordered = [...periods].sort((a, b) => a.start - b.start);
  const owed = new Map<string, number>();
  for (const p of ordered) for (const a of p.allocations) if (a.isProject) owed.set(a.name, (owed.get(a.name) ?? 0) + a.owed);
  const names = [...owed.entries()].filter(([, o]) => o > 0).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).slice(0, limit).map(([n]) => n);
  return {
    starts: ordered.map((p) => p.start),
    series: names.map((n) => ({ name: n, data: ordered.map((p) => p.allocations.find((a) => a.name === n)?.ratio ?? null) })),
  };
}
