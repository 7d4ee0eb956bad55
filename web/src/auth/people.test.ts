import { describe, expect, it } from "vitest";
import { parseRules, ruleLine } from "./people";

describe("group mapping lines", () => {
  it("reads what it writes", () => {
    const rules = [{ group: "physics-researchers", role: "researcher", scopes: ["a1", "a2"] }, { group: "admins", role: "admin", scopes: [] }];
    expect(parseRules(rules.map(ruleLine).join("\n"))).toEqual({ rules, problem: null });
  });
  it.each([["nogroup"], ["=admin"], ["g="]])("names a malformed line: %s", (line) => {
    expect(parseRules(`a=admin\n${line}`).problem).toContain("line 2");
  });
});
