import { describe, expect, it } from "vitest";
import { type Verification, verificationOf } from "./verify";
import { verdict, verdictClass } from "./verify";

const base: Verification = { ok: true, checked: 10, firstBad: null, message: "", truncated: false, reached: 10 };

describe("verdict", () => {
  it.each([
    ["a whole range that verifies", base, "✔ Intact", "ok"],
    ["a truncated range with nothing wrong", { ...base, ok: false, truncated: true }, "⚠ Not all checked", "partial"],
    ["a truncated range with a bad position", { ...base, ok: false, truncated: true, firstBad: 7 }, "✘ Broken", "error"],
    ["a range that does not verify", { ...base, ok: false, firstBad: 3 }, "✘ Broken", "error"],
    ["a log cut short (no first bad position)", { ...base, ok: false }, "✘ Broken", "error"],
  ])("%s", (_what, v, text, cls) => {
    expect(verdict(v)).toBe(text);
    expect(verdictClass(v)).toBe(cls);
  });
});

describe("verificationOf", () => {
  const api = { __typename: "Verification" as const, fromPosition: 1, toPosition: 10, checked: 10, ok: true, firstBadPosition: null, problem: null, truncated: false, askedToPosition: 10, head: 10 };
  it("reads an intact range: what was checked, up to where", () => {
    expect(verificationOf(api)).toEqual({ ok: true, truncated: false, reached: 10, checked: 10, firstBad: null, message: "positions 1–10 hash-chain to each other" });
  });
  it("keeps the server's problem and the first bad position", () => {
    const v = verificationOf({ ...api, ok: false, firstBadPosition: 7, problem: "hash mismatch: position 7" });
    expect(v).toMatchObject({ ok: false, firstBad: 7, message: "hash mismatch: position 7" });
    expect(verdict(v)).toBe("✘ Broken");
  });
  it("a truncated range says how far it got and is not all checked", () => {
    const v = verificationOf({ ...api, ok: false, truncated: true, toPosition: 5, checked: 5, askedToPosition: 10, problem: "not checked past position 5" });
    expect(v).toMatchObject({ truncated: true, reached: 5, firstBad: null, message: "not checked past position 5" });
    expect(verdict(v)).toBe("⚠ Not all checked");
  });
  it("a broken range without words says so", () => {
    expect(verificationOf({ ...api, ok: false }).message).toBe("the chain is broken");
  });
});
