import { describe, expect, it } from "vitest";
import { assignmentsOf, contractFacts } from "./contract";

const e = (type: string, recordedAt: number, payload: Record<string, unknown>) => ({ type, recordedAt, payload });

describe("contract history from the job's events", () => {
  it("names whom a session was restored from", () => {
    const f = contractFacts([e("JobSubmitted", 900, { job_id: "s2", restored_from: "s1" })]);
    expect(f).toMatchObject({ restoredFrom: "s1", restoredTo: null });
  });
  it("lists checkpoints and preemptions with their times, and whom a session was restored as", () => {
    const f = contractFacts([
      e("CheckpointSaved", 1500, { path: "/ck/1", saved_at: 1490 }),
      e("JobPreempted", 1600, { reason: "fair_share" }),
      e("SessionRestored", 1700, { new_job_id: "s3" }),
    ]);
    expect(f.checkpoints).toEqual([{ at: 1500, type: "CheckpointSaved", path: "/ck/1", saved_at: 1490 }]);
    expect(f.preemptions).toEqual([{ at: 1600, type: "JobPreempted", reason: "fair_share" }]);
    expect(f.restoredTo).toBe("s3");
  });
  it("carries no contract times: those are the API's fields (Job.protectedUntil, sessionCapAt)", () => {
    const f = contractFacts([e("JobStarted", 1000, { protected_until: 1300 }), e("SessionOpened", 1000, { cap_at: 5000, warnings_at: [1400] })]);
    expect(Object.keys(f).sort()).toEqual(["checkpoints", "preemptions", "restoredFrom", "restoredTo"]);
  });
  it("ignores payload values of the wrong kind", () => {
    const f = contractFacts([e("SessionRestored", 1000, { new_job_id: 7 }), e("JobSubmitted", 900, { restored_from: "" })]);
    expect(f).toMatchObject({ restoredTo: null, restoredFrom: null });
  });
});

describe("assignmentsOf", () => {
  it.each([
    [{ n1: [0, 1], n2: [3] }, { n1: [0, 1], n2: [3] }],
    [{}, {}],
    [null, {}],
    [[1, 2], {}],
    [{ n1: "0,1" }, {}],
  ])("%j → %j", (value, out) => {
    expect(assignmentsOf(value)).toEqual(out);
  });
});
