import { describe, expect, it } from "vitest";
import {
  ACTIONS, actableProjects, actionReason, canSubmitAgain, defaultWhose, formFromJob, fieldOfRefusal, initialProject, jobActions, jobFilter, matchesSearch,
  ownerLabel, parseSubmission, policyCapNote, powersOf, previewHint, previewOf, type Powers,
} from "./acting";
import type { SubmitForm } from "./outlook";

const WORKER: Powers = { work: true, preempt: false };
const MANAGER: Powers = { work: false, preempt: true };
const ADMIN: Powers = { work: true, preempt: true };
const NOBODY: Powers = { work: false, preempt: false };

describe("what one may do", () => {
  it.each([
    [{ role: "researcher" as const, capabilities: ["work"] }, WORKER],
    [{ role: "manager" as const, capabilities: ["set_allocations", "preempt"] }, MANAGER],
    [{ role: "admin" as const, capabilities: ["work", "preempt", "operate"] }, ADMIN],
    [{ role: "auditor" as const, capabilities: ["read_audit"] }, NOBODY],
    // the API did not say: the role's defaults
    [{ role: "researcher" as const, capabilities: null }, WORKER],
    [{ role: "manager" as const, capabilities: null }, MANAGER],
    [{ role: "auditor" as const, capabilities: null }, NOBODY],
  ])("%o → %o", (identity, powers) => {
    expect(powersOf(identity)).toEqual(powers);
  });

  it("offers the projects (leaves) the API shows, to those who may work", () => {
    const seen = [{ name: "b2", isProject: true }, { name: "research", isProject: false }, { name: "a1", isProject: true }];
    expect(actableProjects(seen, WORKER)).toEqual(["a1", "b2"]);
    expect(actableProjects(seen, MANAGER)).toEqual([]);
  });

  it.each([
    [["a1", "b2"], null, "a1"], [["a1", "b2"], "b2", "b2"], [["a1", "b2"], "gone", "a1"], [[], "a1", ""],
  ])("starts the form on a project one may use (%o, last %s)", (projects, last, expected) => {
    expect(initialProject(projects, last)).toBe(expected);
  });
});

const FORM: SubmitForm = { project: "a1", gpus: "2", minRuntimeS: "600", jobClass: "batch", resumable: false, command: "python train.py" };

describe("the form as the mutation to send", () => {
  it("sends a job with submitJob", () => {
    expect(parseSubmission(FORM).submission).toEqual({
      op: "submitJob", input: { project: "a1", gpus: 2, minRuntimeS: 600, jobClass: "batch", resumable: false, command: ["python", "train.py"] },
    });
  });
  it("opens a session with openSession, its protection the session's cap", () => {
    expect(parseSubmission({ ...FORM, jobClass: "interactive", minRuntimeS: "3600" }).submission).toEqual({
      op: "openSession", input: { project: "a1", gpus: 2, command: ["python", "train.py"], capS: 3600 },
    });
  });
  it.each([
    ["minRuntimeS", { jobClass: "interactive", minRuntimeS: "0" }], // a session needs a cap
    ["minRuntimeS", { jobClass: "interactive", minRuntimeS: "28801" }], // above 8 h
    ["minRuntimeS", { minRuntimeS: "28801" }],
    ["gpus", { gpus: "0" }],
    ["command", { command: "  " }],
    ["project", { project: "" }],
  ])("names the bad field (%s) and sends nothing", (field, change) => {
    const out = parseSubmission({ ...FORM, ...change });
    expect(out.submission).toBeNull();
    expect(Object.keys(out.errors)).toEqual([field]);
  });
  it("sends the GPU models and clusters a job accepts, and neither when none is ticked (any)", () => {
    const asked = parseSubmission({ ...FORM, gpuModels: ["h100", "a100"], clusters: ["ceres"] }).submission;
    expect(asked).toEqual({ op: "submitJob", input: { project: "a1", gpus: 2, minRuntimeS: 600, jobClass: "batch", resumable: false,
      command: ["python", "train.py"], gpuModels: ["h100", "a100"], clusters: ["ceres"] } });
    const any = parseSubmission({ ...FORM, gpuModels: [], clusters: [] }).submission;
    expect(any?.input).not.toHaveProperty("gpuModels");
    expect(any?.input).not.toHaveProperty("clusters");
    expect(parseSubmission({ ...FORM, jobClass: "interactive", gpuModels: [], clusters: [] }).submission?.op).toBe("openSession");
  });
  it.each([
    [{ gpuModels: ["h100", "a100"], clusters: ["ceres"] }, { gpuModels: ["h100", "a100"], clusters: ["ceres"] }],
    [{ gpuModels: ["h100"] }, { gpuModels: ["h100"] }],
    [{ clusters: ["ceres"] }, { clusters: ["ceres"] }],
    [{ gpuModels: [], clusters: [] }, {}], // none ticked: any, and neither is sent
  ])("opens a session with the GPU models and clusters it accepts (%o), as a job would", (change, sent) => {
    const out = parseSubmission({ ...FORM, jobClass: "interactive", minRuntimeS: "3600", ...change });
    expect(out.errors).toEqual({});
    expect(out.submission).toEqual({ op: "openSession", input: { project: "a1", gpus: 2, command: ["python", "train.py"], capS: 3600, ...sent } });
  });
  it("previews a session as an interactive job with what it accepts", () => {
    const session = parseSubmission({ ...FORM, jobClass: "interactive", minRuntimeS: "3600", gpuModels: ["h100"], clusters: ["ceres"] }).submission;
    expect(session && previewOf(session)).toEqual({ project: "a1", gpus: 2, command: ["python", "train.py"], minRuntimeS: 3600,
      jobClass: "interactive", resumable: true, gpuModels: ["h100"], clusters: ["ceres"] });
    const job = parseSubmission({ ...FORM, gpuModels: ["h100"] }).submission;
    expect(job && previewOf(job)).toEqual(job?.input);
  });
  it("accepts a job with no protection (unfunded), not a session", () => {
    expect(parseSubmission({ ...FORM, minRuntimeS: "0" }).submission?.op).toBe("submitJob");
  });
});

describe("the preview's hint", () => {
  it.each([
    [{}, "Fill in the project, GPUs and protection to see what it would get now."],
    [{ jobClass: "interactive" }, "Fill in the project, GPUs and cap to see what it would get now."],
    [{ jobClass: "interactive", clusters: ["ceres"] }, "Fill in the project, GPUs and cap to see what it would get now."],
    [{ gpuModels: ["h100"] }, "Fill in the project, GPUs and protection to see what it would get now."],
  ])("%o → %s", (change, hint) => {
    expect(previewHint({ ...FORM, ...change })).toBe(hint);
  });
});

describe("the policy's cap", () => {
  it.each([
    [600, { askedProtectionS: 600 }, null],
    [28800, { askedProtectionS: 14400 }, "The policy caps protection at 4 h: the job would be protected for 4 h, not 8 h."],
    [3000, { askedProtectionS: 1800 }, "The policy caps protection at 30 min: the job would be protected for 30 min, not 50 min."],
    [600, null, null],
  ])("asked %s, preview %o", (asked, outlook, note) => {
    expect(policyCapNote(asked, outlook)).toBe(note);
  });
});

describe("the API's refusal at its field", () => {
  it.each([
    ["capS", "a session cap is in (0, 28800] seconds", "minRuntimeS"],
    ["jobId", "the job id is too long", null],
    [null, "min_runtime_s must be in [0, 28800], got 30000", "minRuntimeS"],
    [null, "a job asks for at least 1 GPU, got 0 gpus", "gpus"],
    [null, "project 'zz' is not in the tree", "project"],
    [null, "the ledger is busy", null],
    [null, "unknown GPU model 'b200': the registered GPU models are a100, h100", "gpuModels"],
    [null, "gpu_models names one twice: h100, h100", "gpuModels"],
    [null, "unknown cluster 'ceres': the registered clusters are default, jupiter", "clusters"],
    [null, "the job asks for 16 GPUs, but the largest placement this cluster could ever give is 8 GPUs (cluster 'jupiter', all 2 registered nodes it accepts)", "gpus"],
    ["clusters", "allocation 'a1' is pinned to cluster 'ceres'", "clusters"],
  ])("field %s, %s → %s", (field, message, expected) => {
    expect(fieldOfRefusal(field, message)).toBe(expected);
  });
});

describe("the actions a job offers", () => {
  it.each([
    [{ state: "RUNNING", jobClass: "batch" }, WORKER, ["cancel"]],
    [{ state: "QUEUED", jobClass: "debug" }, WORKER, ["cancel"]],
    [{ state: "COMPLETED", jobClass: "batch" }, WORKER, []],
    [{ state: "RUNNING", jobClass: "interactive" }, WORKER, ["close"]],
    [{ state: "SUSPENDED", jobClass: "interactive" }, WORKER, ["restore"]],
    [{ state: "CANCELLED", jobClass: "interactive" }, WORKER, ["restore"]],
    [{ state: "RESTORED", jobClass: "interactive" }, WORKER, []],
    [{ state: "RUNNING", jobClass: "batch" }, MANAGER, ["requeue"]],
    [{ state: "QUEUED", jobClass: "batch" }, MANAGER, []],
    [{ state: "RUNNING", jobClass: "interactive" }, ADMIN, ["close", "requeue"]],
    [{ state: "RUNNING", jobClass: "batch" }, NOBODY, []],
  ])("%o for %o: %o", (job, powers, expected) => {
    expect(jobActions(job, powers)).toEqual(expected);
  });

  it("asks before each, naming the job", () => {
    for (const a of Object.values(ACTIONS)) expect(a.question("j-1")).toContain("j-1");
  });

  it.each([
    ["requeue", "", false], ["requeue", "  ", false], ["requeue", "node maintenance", true],
    ["cancel", "", true], ["close", "", true], ["restore", "", true],
  ] as const)("%s with reason %j: sendable %s", (kind, reason, ok) => {
    expect(actionReason(kind, reason).ok).toBe(ok);
  });
});

describe("my jobs", () => {
  it.each([["researcher", "mine"], ["manager", "all"], ["admin", "all"], ["auditor", "all"]])("%s starts on %s", (role, whose) => {
    expect(defaultWhose(role)).toBe(whose);
  });
  it("asks the API for one's own", () => {
    expect(jobFilter({ whose: "mine" })).toEqual({ mine: true, states: null, jobClass: null });
    expect(jobFilter({ whose: "all", state: "RUNNING", jobClass: "debug" })).toEqual({ mine: false, states: ["RUNNING"], jobClass: "debug" });
  });

  const JOB = { id: "j-4f2a", project: "7f04ca", command: ["python", "train.py"], owner: { subject: "researcher:7f04ca", name: "Ada Lovelace" } };
  it.each([
    ["", true], ["4F2A", true], ["7f04", true], ["train", true], ["ada", true], ["researcher:7f04ca", true],
    ["ada train", true], ["ada eval", false], ["ee9e8c", false],
  ])("search %j matches: %s", (q, hit) => {
    expect(matchesSearch(JOB, q)).toBe(hit);
  });
  it("names owners as people", () => {
    expect(ownerLabel(JOB.owner)).toBe("Ada Lovelace");
    expect(ownerLabel({ subject: "researcher:7f04ca", name: "" })).toBe("researcher:7f04ca");
    expect(ownerLabel(null)).toBe("—");
  });
});

describe("submit again", () => {
  const JOB = { project: "a1", gpus: 2, minRuntimeS: 600, jobClass: "batch", resumable: false, command: ["python", "train.py", "--lr", "0.1"] };
  it("fills the form with the job's shape, which parses back to the same input", () => {
    const form = formFromJob(JOB);
    expect(form).toEqual({ project: "a1", gpus: "2", minRuntimeS: "600", jobClass: "batch", resumable: false, command: "python train.py --lr 0.1", gpuModels: [], clusters: [] });
    expect(parseSubmission(form).submission).toEqual({ op: "submitJob", input: { ...JOB } });
  });
  it("keeps the GPU models and clusters the job accepted", () => {
    const form = formFromJob({ ...JOB, gpuModels: ["a100"], clusters: ["jupiter"] });
    expect([form.gpuModels, form.clusters]).toEqual([["a100"], ["jupiter"]]);
    expect(parseSubmission(form).submission).toEqual({ op: "submitJob", input: { ...JOB, gpuModels: ["a100"], clusters: ["jupiter"] } });
  });
  it.each([
    [{ state: "FAILED", jobClass: "batch" }, WORKER, true],
    [{ state: "CANCELLED", jobClass: "debug" }, WORKER, true],
    [{ state: "COMPLETED", jobClass: "batch" }, WORKER, true],
    [{ state: "RUNNING", jobClass: "batch" }, WORKER, false],
    [{ state: "CANCELLED", jobClass: "interactive" }, WORKER, false], // restored instead
    [{ state: "FAILED", jobClass: "batch" }, MANAGER, false],
  ])("%o for %o: %s", (job, powers, expected) => {
    expect(canSubmitAgain(job, powers)).toBe(expected);
  });
});
