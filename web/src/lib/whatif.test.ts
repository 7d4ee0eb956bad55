import { describe, expect, it } from "vitest";
import { askUntilDone, isStillRunning, pointsDelta, previewRows, proposalKey, ratioTrend, replayCaption, shouldPreview, waitRows, waitTrend, type WhatIfPreview } from "./whatif";
import { GraphQLRequestError } from "../api/client";

const alloc = (name: string, extra: Partial<WhatIfPreview["allocations"][number]> = {}) => ({
  name, parent: "research", depth: 2, isProject: true, changed: false, shareBefore: 0.3, shareAfter: 0.3,
  entitlementBefore: 0.15, entitlementAfter: 0.15, owedBefore: 3600, deliveredBefore: 1800, ratioBefore: 0.5,
  owedAfter: 3600, deliveredAfter: 1800, ratioAfter: 0.5, ...extra,
});

const PREVIEW: WhatIfPreview = {
  parent: "research", since: 0, until: 7 * 86400, windowS: 7 * 86400, jobs: 312, jobsCapped: false, capacityGpus: 32,
  cached: false, wallS: 1.234, summary: "…",
  allocations: [
    alloc("zeta"),
    alloc("ee9e8c", { changed: true, shareAfter: 0.4, ratioAfter: 0.62 }),
    alloc("research", { parent: "cluster", depth: 1, isProject: false }),
    alloc("7f04ca", { changed: true, shareAfter: 0.35, ratioAfter: 0.41 }),
  ],
  waits: [
    { jobClass: "debug", jobs: 10, p50BeforeS: 30, p90BeforeS: 600, p50AfterS: 30, p90AfterS: 300 },
    { jobClass: "batch", jobs: 300, p50BeforeS: 60, p90BeforeS: 3600, p50AfterS: 60, p90AfterS: 3610 },
    { jobClass: "large", jobs: 0, p50BeforeS: null, p90BeforeS: null, p50AfterS: null, p90AfterS: null },
  ],
};

describe("when to ask for a preview", () => {
  const ok = { changed: [{ child: "a", share: 0.2 }], sumError: null, rowErrors: {} };
  it.each([
    [ok, true],
    [{ ...ok, changed: [] }, false],
    [{ ...ok, sumError: "the shares sum to 1.2" }, false],
    [{ ...ok, rowErrors: { a: "not a number" } }, false],
  ])("%# shouldPreview", (v, expected) => expect(shouldPreview(v)).toBe(expected));
  it("keys a proposal by its content, not its order", () => {
    expect(proposalKey("r", [{ child: "b", share: 0.1 }, { child: "a", share: 0.2 }])).toBe(proposalKey("r", [{ child: "a", share: 0.2 }, { child: "b", share: 0.1 }]));
    expect(proposalKey("r", [{ child: "a", share: 0.2 }])).not.toBe(proposalKey("r", [{ child: "a", share: 0.25 }]));
    expect(proposalKey("r", [{ child: "a", share: 0.2 }])).not.toBe(proposalKey("s", [{ child: "a", share: 0.2 }]));
  });
});

describe("reading the preview", () => {
  it.each([
    [0.5, 0.62, "better", "+12 pts"],
    [0.5, 0.41, "worse", "−9 pts"],
    [0.5, 0.503, "same", "±0"],
    [null, 0.5, "unknown", "—"],
    [null, null, "same", "—"],
  ] as const)("ratio %s → %s is %s (%s)", (b, a, trend, delta) => {
    expect(ratioTrend(b, a)).toBe(trend);
    expect(pointsDelta(b, a)).toBe(delta);
  });
  it.each([
    [600, 300, "better"],
    [3600, 3610, "same"], // 10 s of an hour is noise
    [30, 31.5, "worse"],
    [null, 30, "unknown"],
  ] as const)("p90 wait %s → %s is %s", (b, a, trend) => expect(waitTrend(b, a)).toBe(trend));
  it("puts the parent first, then the changed children, then the rest", () => {
    const rows = previewRows(PREVIEW);
    expect(rows.map((r) => r.name)).toEqual(["research", "7f04ca", "ee9e8c", "zeta"]);
    expect(rows.find((r) => r.name === "ee9e8c")).toMatchObject({ trend: "better", delta: "+12 pts" });
  });
  it("shows the wait classes that had jobs, with their trend", () => {
    expect(waitRows(PREVIEW).map((w) => [w.jobClass, w.trend])).toEqual([["debug", "better"], ["batch", "same"]]);
  });
  it("says what was replayed", () => {
    expect(replayCaption(PREVIEW)).toBe("312 jobs of the last 7 days on 32 GPUs · simulated in 1.2 s");
    expect(replayCaption({ ...PREVIEW, jobs: 1, windowS: 3600, jobsCapped: true, cached: true })).toBe("1 job of the last 1 h on 32 GPUs (the newest, capped) · from cache");
  });
});

describe("waiting for a long replay", () => {
  const running = () => new GraphQLRequestError("still replaying", [{ message: "still replaying", extensions: { code: "WHATIF_TIMEOUT" } }]);
  const noSleep = async () => {};
  it("asks again while the server says the run continues, then returns its answer", async () => {
    let calls = 0;
    const waited: number[] = [];
    const out = await askUntilDone(async () => {
      calls++;
      if (calls < 3) throw running();
      return "done";
    }, { attempts: 5, delayMs: 10, sleep: noSleep, onWaiting: (n) => waited.push(n) });
    expect([out, calls, waited]).toEqual(["done", 3, [1, 2]]);
  });
  it("gives up after the attempts, and never retries other errors", async () => {
    await expect(askUntilDone(async () => { throw running(); }, { attempts: 2, delayMs: 1, sleep: noSleep })).rejects.toThrow("still replaying");
    let calls = 0;
    await expect(askUntilDone(async () => { calls++; throw new GraphQLRequestError("not authenticated", [{ message: "x", extensions: { code: "UNAUTHENTICATED" } }]); }, { attempts: 5, delayMs: 1, sleep: noSleep })).rejects.toThrow("not authenticated");
    expect(calls).toBe(1);
    expect(isStillRunning(new Error("plain"))).toBe(false);
  });
});
