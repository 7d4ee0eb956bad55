import { describe, expect, it } from "vitest";
import { blockOf, blocks } from "./topology";

// a ready node as the server reads it (Node.freeGpus: not held, on a ready node)
const node = (id: string, path: string[], gpus: number, usedGpus: number, foreignGpus = 0) =>
  ({ id, path, gpus, usedGpus, foreignGpus, freeGpus: Math.max(0, gpus - usedGpus - foreignGpus), state: "ready" });

describe("topology", () => {
  const nodes = [node("n2", ["z", "b1", "n2"], 8, 8), node("n1", ["z", "b1", "n1"], 8, 2), node("n3", ["z", "b2", "n3"], 8, 0), node("solo", ["solo"], 4, 0)];

  it("groups nodes into blocks by their path without the last element", () => {
    expect(blockOf(["z", "b1", "n1"])).toBe("z/b1");
    expect(blockOf(["solo"])).toBe("(no block)");
    const bl = blocks(nodes);
    expect(bl.map((b) => [b.name, b.nodes.map((n) => n.id), b.used, b.free])).toEqual([
      ["(no block)", ["solo"], 0, 4],
      ["z/b1", ["n1", "n2"], 10, 6],
      ["z/b2", ["n3"], 0, 8],
    ]);
  });

  it("never counts more used than the node has as negative free", () => {
    expect(blocks([node("x", ["b", "x"], 4, 6)])[0].free).toBe(0);
  });

  it("counts GPUs another scheduler holds as foreign, neither Steward's nor free", () => {
    const withForeign = [node("s0", ["r", "s0"], 8, 2, 3), node("s1", ["r", "s1"], 8, 6, 5)];
    const [b] = blocks(withForeign);
    expect(b.nodes.map((n) => [n.id, n.used, n.foreign, n.free])).toEqual([["s0", 2, 3, 3], ["s1", 6, 2, 0]]);
    expect([b.used, b.foreign, b.free]).toEqual([8, 5, 3]);
  });

  it("shows the server's free GPUs: none on a draining node, in its block", () => {
    const draining = { ...node("d", ["r", "d"], 4, 0), state: "draining", freeGpus: 0 };
    const [b] = blocks([draining, node("g", ["r", "g"], 4, 1)]);
    expect([b.free, b.nodes.map((n) => n.free)]).toEqual([3, [0, 3]]);
  });
});
