import { describe, expect, it } from "vitest";
import { person } from "./person";

describe("person", () => {
  it.each([
    ["user-rui", "Rui Researcher", "Rui Researcher (user-rui)"],
    ["alice", undefined, "alice"],
    ["alice", "alice", "alice"],
    [undefined, undefined, "—"],
  ])("%s / %s -> %s", (subject, name, shown) => {
    expect(person(subject, name)).toBe(shown);
  });
});
