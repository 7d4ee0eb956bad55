import { describe, expect, it } from "vitest";
import { demandByHourOfWeek, occupancySeries, owedVsDelivered, p90WaitByClass, preemptionsPerDay, quantile } from "./stats";
import { blocks, fragmentation } from "./topology";
import { rankBySubmitOrder } from "./queue";

const job = (o: Partial<Parameters<typeof occupancySeries>[0][0]>) => ({ id: "j", project: "p", state: "RUNNING", gpus: 1, submittedAt: 0, ...o });

describe("fleet statistics", () => {
  it("quantile interpolates", () => {
    expect(quantile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9)).toBeCloseTo(9.1);
    expect(quantile([], 0.9)).toBeNull();
  });
  it("occupancy splits funded, unfunded and idle per step", () => {
    const s = occupancySeries([job({ gpus: 4, startedAt: 0, endedAt: 100, funded: true }), job({ gpus: 2, startedAt: 50, endedAt: 100, funded: false })], 8, 0, 100, 50);
    expect(s.funded).toEqual([4, 4]);
    expect(s.unfunded).toEqual([0, 2]);
    expect(s.idle).toEqual([4, 2]);
  });
  it("p90 wait counts still-waiting jobs with their wait so far", () => {
    const w = p90WaitByClass([job({ jobClass: "batch", submittedAt: 0, startedAt: 10 }), job({ jobClass: "interactive", state: "QUEUED", submittedAt: 90 })], 100);
    expect(w.batch).toBe(10);
    expect(w.interactive).toBe(10);
  });
  it("demand lands in its hour of week", () => {
    const monday9 = new Date(2026, 10, 30, 9, 15).getTime() / 1000; // Monday 30 Nov 2026
    const grid = demandByHourOfWeek([job({ submittedAt: monday9, gpus: 8 })]);
    expect(grid[0][9]).toBe(8);
  });
  it("preemptions count per day", () => {
    const t = new Date(2026, 10, 30, 12).getTime() / 1000;
    expect(preemptionsPerDay([{ type: "JobPreempted", recordedAt: t }, { type: "JobPreempted", recordedAt: t + 60 }, { type: "JobStarted", recordedAt: t }])).toEqual([{ day: "2026-11-30", count: 2 }]);
  });
  it("owed is capped by demand, delivered is what ran", () => {
    // entitlement 0.5 of 8 GPUs = 4 GPUs; the project asks for 2 GPUs for the whole hour and runs half of it.
    const rows = owedVsDelivered([job({ gpus: 2, submittedAt: 0, startedAt: 1800, endedAt: 3600 })], new Map([["p", 0.5]]), 8, 0, 3600, 3600);
    expect(rows[0].owed).toBe(2 * 3600);
    expect(rows[0].delivered).toBe(2 * 1800);
    expect(rows[0].ratio).toBeCloseTo(0.5);
  });
});

describe("topology and queue fallbacks", () => {
  const nodes = [
    { id: "n1", gpus: 8, path: ["b1", "n1"] }, { id: "n2", gpus: 8, path: ["b1", "n2"] }, { id: "n3", gpus: 8, path: ["b2", "n3"] },
  ];
  it("groups nodes in blocks with occupancy", () => {
    const bl = blocks(nodes, new Map([["n1", 6]]));
    expect(bl.map((b) => [b.name, b.used, b.free])).toEqual([["b1", 6, 10], ["b2", 0, 8]]);
  });
  it("fragmentation: free GPUs the largest waiting gang cannot use", () => {
    const bl = blocks(nodes, new Map([["n1", 6], ["n2", 1]]));
    expect(fragmentation(bl, 4)).toEqual({ unusable: 2, free: 17 }); // n1's 2 free are too few
    expect(fragmentation(bl, 16)).toEqual({ unusable: 17, free: 17 }); // no block has 16 whole free GPUs
    expect(fragmentation(bl, 0).unusable).toBe(0);
  });
  it("ranks waiting jobs overall and in their project", () => {
    const r = rankBySubmitOrder([
      { id: "a", project: "x", state: "QUEUED", gpus: 1, submittedAt: 3 },
      { id: "b", project: "y", state: "QUEUED", gpus: 1, submittedAt: 1 },
      { id: "c", project: "x", state: "RUNNING", gpus: 1, submittedAt: 0 },
      { id: "d", project: "x", state: "PREEMPTED", gpus: 1, submittedAt: 2 },
    ]);
    expect(r.map((e) => [e.job.id, e.position, e.positionInProject])).toEqual([["b", 1, 1], ["d", 2, 1], ["a", 3, 2]]);
  });
});
