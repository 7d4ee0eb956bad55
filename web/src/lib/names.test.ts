import { describe, expect, it } from "vitest";
import { isNamed, labelOf, matchesName, nameOf, NO_NAMES } from "./names";

const names = new Map([["a1", "Vision Lab"], ["a2", "a2"], ["b1", "Speech & Audio"]]);

describe("display names (ADR 0055)", () => {
  it.each([
    ["a named project", "a1", "Vision Lab", "Vision Lab (a1)", true],
    ["a project whose name is its id", "a2", "a2", "a2", false],
    ["a project the names do not know (yet)", "zz", "zz", "zz", false],
  ])("%s", (_case, id, name, label, named) => {
    expect(nameOf(names, id)).toBe(name);
    expect(labelOf(names, id)).toBe(label);
    expect(isNamed(names, id)).toBe(named);
  });

  it("falls back to ids before the names load", () => {
    expect(nameOf(NO_NAMES, "a1")).toBe("a1");
    expect(labelOf(NO_NAMES, "a1")).toBe("a1");
  });

  it.each([
    ["the id", "a1", "a1", true],
    ["part of the name, any case", "a1", "vision", true],
    ["the name with spaces around", "b1", "  Speech & ", true],
    ["nothing", "a1", "", true],
    ["another project's name", "a1", "speech", false],
  ])("a search by %s", (_case, id, query, found) => {
    expect(matchesName(names, id, query)).toBe(found);
  });

  it("finds a project by its name even when its id says nothing", () => {
    expect(matchesName(names, "b1", "audio")).toBe(true);
    expect(matchesName(names, "b1", "B1")).toBe(true);
  });
});
