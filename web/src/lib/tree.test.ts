import { describe, expect, it } from "vitest";
import { buildTree, editableParents, entitlements, flatten, treeFromEvents } from "./tree";

const rows = [
  { name: "research", parent: "cluster", share: 0.5 },
  { name: "product", parent: "cluster", share: 0.3 },
  { name: "a1", parent: "research", share: 0.7 },
  { name: "a2", parent: "research", share: 0.3 },
  { name: "p1", parent: "product", share: 1 },
];

describe("allocation tree", () => {
  it("entitlement is the product of the shares on the path", () => {
    const e = entitlements(rows);
    expect(e.get("a1")).toBeCloseTo(0.35);
    expect(e.get("p1")).toBeCloseTo(0.3);
  });
  it("builds depth-first, largest share first", () => {
    expect(flatten(buildTree(rows)).map((n) => `${n.depth}:${n.name}`)).toEqual(["0:research", "1:a1", "1:a2", "0:product", "1:p1"]);
  });
  it("a manager edits inside their subtree, a researcher or auditor nowhere, an admin everywhere", () => {
    expect(editableParents(rows, "manager", "research")).toEqual(["research"]);
    expect(editableParents(rows, "manager", "cluster")).toEqual(["cluster", "product", "research"]);
    expect(editableParents(rows, "researcher", null)).toEqual([]);
    expect(editableParents(rows, "auditor", null)).toEqual([]);
    expect(editableParents(rows, "admin", null)).toEqual(["cluster", "product", "research"]);
  });
  it("replays AllocationsSet events up to a time", () => {
    const events = [
      { type: "AllocationsSet", recordedAt: 1, payload: { parent: "cluster", shares: { research: 0.5 } } },
      { type: "AllocationsSet", recordedAt: 5, payload: { parent: "cluster", shares: { research: 0.6 } } },
      { type: "JobSubmitted", recordedAt: 6, payload: {} },
    ];
    expect(treeFromEvents(events, 3)).toEqual([{ name: "research", parent: "cluster", share: 0.5 }]);
    expect(treeFromEvents(events, 10)).toEqual([{ name: "research", parent: "cluster", share: 0.6 }]);
  });
});
