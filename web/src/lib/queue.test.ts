import { describe, expect, it } from "vitest";
import { OTHER_TENANT, queueRows } from "./queue";

const job = { __typename: "Job" as const, id: "j1", project: "p1", state: "QUEUED", gpus: 8, minRuntimeS: 60, resumable: true, jobClass: "batch", priority: 0, command: ["true"], submittedAt: 10, attempt: 1, assignments: {}, funded: false, startedAt: null, endedAt: null, exitCode: null, position: 3, protectedUntil: null, sessionCapAt: null, sessionWarningsAt: null, projectName: "p1", sessionAddress: null };
const entry = { __typename: "QueueEntry" as const, position: 1, mine: true, positionInProject: 1, positionInClusters: 1, positionInCluster: null, reason: "insufficient_capacity", text: "needs 8 GPUs", blockingGpus: 8, blockingScope: "cluster", blockingUntil: null, source: "derived", job };

describe("queueRows", () => {
  it("lists one's own job with its reason and what blocks it", () => {
    expect(queueRows([entry])).toEqual([{ job, project: "p1", position: 1, positionInProject: 1, positionInClusters: 1, positionInCluster: null, reasonCode: "insufficient_capacity", text: "needs 8 GPUs", blocking: "8 GPUs" }]);
  });
  it("shows another tenant's job as its position only", () => {
    const [row] = queueRows([{ ...entry, position: 2, mine: false, positionInProject: null, positionInClusters: null, job: null, reason: null, text: null, blockingGpus: null }]);
    expect(row).toEqual({ job: null, project: OTHER_TENANT, position: 2, positionInProject: null, positionInClusters: null, positionInCluster: null, reasonCode: null, text: null, blocking: null });
  });
  it("carries the position in the chosen cluster, for one's own jobs and other tenants' alike", () => {
    const rows = queueRows([{ ...entry, positionInCluster: 1 }, { ...entry, position: 5, mine: false, job: null, positionInCluster: 2 }]);
    expect(rows.map((r) => [r.position, r.positionInCluster, r.project])).toEqual([[1, 1, "p1"], [5, 2, OTHER_TENANT]]);
  });
  it("keeps the scheduler's order", () => {
    expect(queueRows([{ ...entry, position: 2 }, { ...entry, position: 1 }]).map((r) => r.position)).toEqual([2, 1]);
  });
});
