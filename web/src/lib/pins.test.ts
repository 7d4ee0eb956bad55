import { describe, expect, it } from "vitest";
import { pinChanges, pinProblem, pinText } from "./pins";

describe("pins on the tree screen (ADR 0067)", () => {
  it.each([
    [{ name: "a", pin: "ceres", pinnedTo: "ceres" }, "ceres"],
    [{ name: "a", pin: null, pinnedTo: "ceres" }, "ceres (inherited)"],
    [{ name: "a", pin: null, pinnedTo: null }, "any cluster"],
    [{ name: "a" }, "any cluster"],
  ])("says where %o runs: %s", (row, text) => {
    expect(pinText(row)).toBe(text);
  });

  it("sends only the pins that changed, an emptied one as null (unpin)", () => {
    const rows = [{ name: "a", pin: "ceres" }, { name: "b", pin: null }, { name: "c", pin: "jupiter" }];
    expect(pinChanges(rows, { a: "ceres", b: " jupiter ", c: "" })).toEqual([
      { child: "b", cluster: "jupiter" },
      { child: "c", cluster: null },
    ]);
    expect(pinChanges(rows, {})).toEqual([]);
  });

  it.each([
    ["ceres", null],
    ["", null],
    ["lab-1.gpu_2", null],
    ["bad name", "a cluster name is"],
    ["-x", "a cluster name is"],
  ])("checks the typed name %s", (text, problem) => {
    const found = pinProblem(text);
    if (problem === null) expect(found).toBeNull();
    else expect(found).toContain(problem);
  });
});
