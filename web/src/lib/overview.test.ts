import { describe, expect, it } from "vitest";
import { heatmapCells, latestBusy, occupancySeries, owedChart, owedRows, periodLabel, utcOffsetSeconds, waitRows, type OwedPeriod } from "./overview";

const a = (name: string, owed: number, delivered: number, isProject = true) => ({ name, isProject, owed, delivered, demand: owed, entitled: owed, ratio: owed > 0 ? Math.min(1, delivered / owed) : null });
const PERIODS: OwedPeriod[] = [
  { periodId: "cur", start: 100, end: 200, current: true, recorded: false, deliveredOfOwed: 0.75, allocations: [a("research", 9000, 7200, false), a("p1", 7200, 3600), a("p2", 3600, 3600), a("idle", 0, 0)] },
  { periodId: "prev", start: 0, end: 100, current: false, recorded: true, deliveredOfOwed: 1, allocations: [a("p1", 3600, 3600), a("gone", 3600, 1800)] },
];

describe("overview figures from the API", () => {
  it("stacks occupancy in milliseconds and reads the latest step", () => {
    const pts = [{ t: 10, funded: 4, unfunded: 2, idle: 10, capacity: 16 }, { t: 20, funded: 8, unfunded: 4, idle: 4, capacity: 16 }];
    expect(occupancySeries(pts).funded).toEqual([[10000, 4], [20000, 8]]);
    expect(latestBusy(pts)).toEqual({ busy: 12, capacity: 16, fraction: 0.75 });
    expect(latestBusy([])).toEqual({ busy: 0, capacity: 0, fraction: null });
  });
  it("lists projects owed something now or before, most owed first, with the previous ratio", () => {
    expect(owedRows(PERIODS).map((r) => [r.name, r.ratio, r.previousRatio])).toEqual([["p1", 0.5, 1], ["p2", 1, null]]);
    expect(owedRows([])).toEqual([]);
  });
  it("charts owed and delivered GPU-hours for the current and previous period", () => {
    const c = owedChart(PERIODS);
    expect(c.projects).toEqual(["gone", "p1", "p2"]);
    expect(c.series.map((s) => s.name)).toEqual(["owed (previous)", "delivered (previous)", "owed (current)", "delivered (current)"]);
    expect(c.series[2].data).toEqual([0, 2, 1]);
    expect(owedChart(PERIODS, 1).projects).toEqual(["p1"]);
  });
  it("turns the 7 × 24 grid into heatmap cells", () => {
    const grid = Array.from({ length: 7 }, () => new Array<number>(24).fill(0));
    grid[0][9] = 6;
    const h = heatmapCells(grid);
    expect(h.cells).toHaveLength(168);
    expect(h.cells.find(([x, y]) => x === 9 && y === 0)).toEqual([9, 0, 6]);
    expect(h.max).toBe(6);
    expect(heatmapCells([[0]]).max).toBe(1);
  });
  it("labels periods by where their figures come from", () => {
    const fmt = (t: number) => `t${t}`;
    expect(periodLabel(PERIODS[0], fmt)).toBe("current, since t100");
    expect(periodLabel(PERIODS[1], fmt)).toBe("t0 – t100 (closed, recorded)");
    expect(periodLabel({ ...PERIODS[1], recorded: false }, fmt)).toBe("t0 – t100 (not closed, computed)");
  });
  it("keeps wait classes with jobs and gives the UTC offset east-positive", () => {
    expect(waitRows([{ jobClass: "debug", jobs: 0, started: 0, waiting: 0, p50S: null, p90S: null, maxS: null }, { jobClass: "batch", jobs: 2, started: 1, waiting: 1, p50S: 5, p90S: 9, maxS: 10 }]).map((w) => w.jobClass)).toEqual(["batch"]);
    expect(utcOffsetSeconds({ getTimezoneOffset: () => -60 } as Date)).toBe(3600);
  });
});
