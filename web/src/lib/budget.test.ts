import { describe, expect, it } from "vitest";
import { budgetRows, budgetTrend } from "./budget";
import type { OwedPeriod } from "./overview";

const alloc = (name: string, owed: number, delivered: number, isProject = true) =>
  ({ name, isProject, owed, delivered, demand: owed, entitled: owed, ratio: owed > 0 ? delivered / owed : null });
const period = (start: number, current: boolean, allocations: ReturnType<typeof alloc>[]): OwedPeriod =>
  ({ periodId: `p${start}`, start, end: start + 86400, current, recorded: !current, deliveredOfOwed: null, label: `day ${start}`, allocations });

const PERIODS = [
  period(86400, true, [alloc("b", 3600, 7200), alloc("a", 7200, 3600), alloc("team", 10800, 10800, false)]),
  period(0, false, [alloc("a", 3600, 3600), alloc("b", 0, 0)]),
];

describe("budget report", () => {
  it("lists projects per period, newest first, and keeps a ratio above 1 as it is", () => {
    const rows = budgetRows(PERIODS);
    expect(rows.map((r) => `${r.periodId}/${r.name}`)).toEqual(["p86400/a", "p86400/b", "p0/a"]);
    expect(rows.find((r) => r.name === "b")!.ratio).toBe(2);
  });
  it("draws the ratio per project over the periods, oldest first, with gaps where nothing was owed", () => {
    const t = budgetTrend(PERIODS);
    expect(t.starts).toEqual([0, 86400]);
    expect(t.series).toEqual([{ name: "a", data: [1, 0.5] }, { name: "b", data: [null, 2] }]);
  });
});
