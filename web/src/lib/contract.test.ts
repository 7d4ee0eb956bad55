import { describe, expect, it } from "vitest";
import { assignmentsOf, contractFacts } from "./contract";
import { DEFAULT_SESSION_CAP_S } from "./countdown";

const job = { state: "RUNNING", jobClass: "interactive", startedAt: 1000, minRuntimeS: 600, funded: true };
const e = (type: string, recordedAt: number, payload: Record<string, unknown>) => ({ type, recordedAt, payload });

describe("contract facts from the job's events", () => {
  it("takes the recorded protection, cap and warnings", () => {
    const f = contractFacts(job, [
      e("JobSubmitted", 900, { job_id: "s2", restored_from: "s1" }),
      e("JobStarted", 1000, { started_at: 1000, protected_until: 1300 }),
      e("SessionOpened", 1000, { cap_at: 5000, warnings_at: [1400, 4100] }),
    ]);
    expect(f).toMatchObject({ protectionEndsAt: 1300, protectionSource: "events", capAt: 5000, capSource: "events", warningsAt: [1400, 4100], restoredFrom: "s1", restoredTo: null });
  });
  it("the latest start counts (a requeued job started again)", () => {
    const f = contractFacts(job, [e("JobStarted", 1000, { protected_until: 1300 }), e("JobStarted", 2000, { protected_until: 2600 })]);
    expect(f.protectionEndsAt).toBe(2600);
  });
  it("estimates where no event says: start + min runtime, start + the default cap", () => {
    const f = contractFacts(job, []);
    expect(f).toMatchObject({ protectionEndsAt: 1600, protectionSource: "estimate", capAt: 1000 + DEFAULT_SESSION_CAP_S, capSource: "estimate", warningsAt: null });
    expect(contractFacts({ ...job, funded: false }, []).protectionEndsAt).toBeNull();
  });
  it("lists checkpoints and preemptions with their times, and whom a session was restored as", () => {
    const f = contractFacts(job, [
      e("CheckpointSaved", 1500, { path: "/ck/1", saved_at: 1490 }),
      e("JobPreempted", 1600, { reason: "fair_share" }),
      e("SessionRestored", 1700, { new_job_id: "s3" }),
    ]);
    expect(f.checkpoints).toEqual([{ at: 1500, type: "CheckpointSaved", path: "/ck/1", saved_at: 1490 }]);
    expect(f.preemptions).toEqual([{ at: 1600, type: "JobPreempted", reason: "fair_share" }]);
    expect(f.restoredTo).toBe("s3");
  });
  it("ignores payload values of the wrong kind", () => {
    const f = contractFacts(job, [e("JobStarted", 1000, { protected_until: "soon" }), e("SessionOpened", 1000, { cap_at: null, warnings_at: "x" })]);
    expect(f).toMatchObject({ protectionSource: "estimate", capSource: "estimate", warningsAt: null });
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
