import { describe, expect, it } from "vitest";
import { outlookHeadline, parseQuota, qualificationFromEvidence, parseSubmit, previewInput, qualificationLabel, quotaText, type SubmitForm, type SubmitOutlook } from "./outlook";

const FORM: SubmitForm = { project: "a1", gpus: "2", minRuntimeS: "600", jobClass: "debug", resumable: false, command: "python train.py" };
const OUTLOOK: SubmitOutlook = { funded: false, reason: "entitlement_used", fundedByLane: false, protectionS: 0, askedProtectionS: 600, project: "a1", allocation: "a1", inUseGpus: 4, entitledGpus: 2.88, qualification: null, message: "" };

describe("the submit form", () => {
  it("becomes the API's input", () => {
    expect(parseSubmit(FORM).input).toEqual({ project: "a1", gpus: 2, minRuntimeS: 600, jobClass: "debug", resumable: false, command: ["python", "train.py"] });
  });
  it.each([
    ["gpus", { gpus: "0" }], ["gpus", { gpus: "1.5" }], ["minRuntimeS", { minRuntimeS: "-1" }],
    ["minRuntimeS", { minRuntimeS: "30000" }], ["minRuntimeS", { minRuntimeS: "" }], ["project", { project: " " }], ["command", { command: "" }],
  ])("names the bad field (%s)", (fieldName, change) => {
    const out = parseSubmit({ ...FORM, ...change });
    expect(out.input).toBeNull();
    expect(Object.keys(out.errors)).toEqual([fieldName]);
  });
  it("previews before the command is typed, not with a bad field", () => {
    expect(previewInput({ ...FORM, command: "" })?.command).toEqual(["(preview)"]);
    expect(previewInput({ ...FORM, gpus: "0" })).toBeNull();
  });
});

describe("the outlook in words", () => {
  it("says why a job runs unfunded", () => {
    expect(outlookHeadline(OUTLOOK)).toBe("Unfunded: no allocation left");
    expect(outlookHeadline({ ...OUTLOOK, reason: "unfunded_by_request" })).toBe("Unfunded: no protection asked");
    expect(outlookHeadline({ ...OUTLOOK, funded: true, reason: "funded" })).toBe("Funded");
    expect(outlookHeadline({ ...OUTLOOK, funded: true, reason: "funded", fundedByLane: true })).toBe("Funded by the debug lane");
  });
  it("labels the debug qualification", () => {
    const q = { qualified: false, reason: "over_quota", quotaGpus: 1, inUseGpus: 1, aheadGpus: 0 };
    expect(qualificationLabel(q)).toEqual({ text: "debug: over quota", tone: "warn" });
    expect(qualificationLabel({ ...q, qualified: true, reason: "within_quota" }).tone).toBe("ok");
    expect(qualificationLabel({ ...q, reason: "not_debug" }).text).toBe("debug: not qualified (not debug)");
  });
});

describe("debug quotas", () => {
  it("says where a quota comes from", () => {
    expect(quotaText({ gpus: 4, setGpus: null, isDefault: true, setOn: null })).toBe("4 (default)");
    expect(quotaText({ gpus: 2, setGpus: 2, isDefault: false, setOn: "a1" })).toBe("2 (set)");
    expect(quotaText({ gpus: 3, setGpus: null, isDefault: false, setOn: "team-a" })).toBe("3 (from team-a)");
    expect(quotaText(null)).toBe("—");
  });
  it.each([["", null], ["0", 0], [" 12 ", 12]])("reads %j", (text, gpus) => {
    expect(parseQuota(text)).toEqual({ ok: true, gpus });
  });
  it.each(["-1", "1.5", "two", "1e3"])("refuses %j", (text) => {
    expect(parseQuota(text).ok).toBe(false);
  });
});

describe("why pending", () => {
  it("reads the qualification the scheduler recorded", () => {
    const evidence = { now: 1, debug_quota: { qualified: false, reason: "over_quota", quota_gpus: 2, in_use_gpus: 2, ahead_gpus: 1 } };
    expect(qualificationFromEvidence(evidence)).toEqual({ qualified: false, reason: "over_quota", quotaGpus: 2, inUseGpus: 2, aheadGpus: 1 });
    expect(qualificationFromEvidence({ now: 1 })).toBeNull();
    expect(qualificationFromEvidence(null)).toBeNull();
  });
});
