import { describe, expect, it } from "vitest";
import { parseShare, validateShares } from "./shares";

describe("parseShare", () => {
  it.each([
    ["0.35", 0.35], [".35", 0.35], ["35%", 0.35], ["35 %", 0.35], ["1", 1], ["0", 0], ["100%", 1], [" 0.5 ", 0.5],
  ])("reads %s as %s", (text, value) => {
    expect(parseShare(text)).toEqual({ ok: true, value });
  });
  it.each([["", "enter a share"], ["abc", "not a number"], ["-0.1", "not a number"], ["1.2", "at most 1"], ["120%", "at most 100 %"], ["0.3.1", "not a number"]])(
    "refuses %j", (text, message) => {
      const r = parseShare(text);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error).toContain(message);
    });
});

const rows = (texts: Record<string, string>, originals: Record<string, number> = {}) =>
  Object.entries(texts).map(([child, text]) => ({ child, text, original: originals[child] ?? 0 }));

describe("validateShares", () => {
  it("accepts a change whose shares sum to at most 1 with a reason", () => {
    const v = validateShares(rows({ a: "0.5", b: "0.3" }, { a: 0.4, b: 0.3 }), "rebalance for Q3");
    expect(v.ok).toBe(true);
    expect(v.total).toBeCloseTo(0.8);
    expect(v.remaining).toBeCloseTo(0.2);
    expect(v.changed).toEqual([{ child: "a", share: 0.5 }]);
  });
  it("accepts exactly 1 despite floating point (0.1 + 0.2 + 0.7)", () => {
    const v = validateShares(rows({ a: "0.1", b: "0.2", c: "0.7" }), "why");
    expect(v.sumError).toBeNull();
    expect(v.ok).toBe(true);
  });
  it("refuses a sum over 1 and says by how much", () => {
    const v = validateShares(rows({ a: "0.6", b: "0.6" }), "why");
    expect(v.ok).toBe(false);
    expect(v.sumError).toMatch(/sum to 1\.2, more than 1 by 0\.2/);
  });
  it("needs a reason that is not blank", () => {
    const v = validateShares(rows({ a: "0.6" }, { a: 0.5 }), "   ");
    expect(v.ok).toBe(false);
    expect(v.reasonError).toMatch(/reason/);
  });
  it("reports a bad field by child and leaves it out of the sum", () => {
    const v = validateShares(rows({ a: "x", b: "0.4" }), "why");
    expect(v.rowErrors).toEqual({ a: '"x" is not a number' });
    expect(v.total).toBeCloseTo(0.4);
    expect(v.ok).toBe(false);
  });
  it("is not ok when nothing changed", () => {
    const v = validateShares(rows({ a: "0.5" }, { a: 0.5 }), "why");
    expect(v.changed).toEqual([]);
    expect(v.ok).toBe(false);
  });
  it("accepts percentages mixed with fractions", () => {
    const v = validateShares(rows({ a: "45%", b: "0.55" }), "why");
    expect(v.total).toBeCloseTo(1);
    expect(v.ok).toBe(true);
  });
});
