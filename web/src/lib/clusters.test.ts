import { describe, expect, it } from "vitest";
import { acceptsText, byCluster, clusterChoices, countsText, fragmentationText, labFragmentation, mayWeigh, parseWeightChange, submitChoices, toggled, type ClusterFigures } from "./clusters";

const node = (id: string, cluster: string, path: string[], usedGpus = 0, state = "ready") =>
  ({ id, gpus: 8, path, state, usedGpus, freeGpus: state === "ready" ? 8 - usedGpus : 0, foreignGpus: 0, cluster });
const figures = (name: string, over: Partial<ClusterFigures> = {}): ClusterFigures => ({
  __typename: "ClusterOccupancy", name, nodes: 1, gpus: 8, busyGpus: 0, freeGpus: 8, drainingGpus: 0, downGpus: 0, largestWaitingGang: 0, fragmentedGpus: 0, gpuModels: [], ...over,
});

describe("the nodes by cluster", () => {
  it("groups the nodes by their cluster, by name, each with its blocks and the API's figures", () => {
    const nodes = [node("j1", "jupiter", ["jupiter", "r1", "j1"], 4), node("n2", "default", ["z", "b2", "n2"]), node("n1", "default", ["z", "b1", "n1"], 8)];
    const occ = [figures("default", { nodes: 2, gpus: 16, busyGpus: 8, freeGpus: 8 }), figures("jupiter", { busyGpus: 4, freeGpus: 4 })];
    const out = byCluster(nodes, occ);
    expect(out.map((c) => [c.name, c.nodes, c.blocks.map((b) => b.name), c.figures?.busyGpus])).toEqual([
      ["default", 2, ["z/b1", "z/b2"], 8],
      ["jupiter", 1, ["jupiter/r1"], 4],
    ]);
  });
  it("keeps a cluster the figures know when the nodes list does not have it yet, and the other way round", () => {
    const out = byCluster([node("n1", "ceres", ["n1"])], [figures("jupiter")]);
    expect(out.map((c) => [c.name, c.nodes, c.figures?.name ?? null])).toEqual([["ceres", 1, null], ["jupiter", 0, "jupiter"]]);
  });
  it.each([
    [{ gpus: 16, busyGpus: 12, freeGpus: 4, drainingGpus: 0, downGpus: 0 }, "12/16 GPUs busy · 4 free"],
    [{ gpus: 16, busyGpus: 2, freeGpus: 4, drainingGpus: 6, downGpus: 4 }, "2/16 GPUs busy · 4 free · 6 draining · 4 down"],
    [{ gpus: 8, busyGpus: 0, freeGpus: 0, drainingGpus: 0, downGpus: 8 }, "0/8 GPUs busy · 0 free · 8 down"],
  ])("words %o as %s", (counts, text) => {
    expect(countsText(counts)).toBe(text);
  });
});

describe("the queue's clusters and what a job accepts", () => {
  it("offers all clusters, then each by name", () => {
    expect(clusterChoices([{ name: "jupiter" }, { name: "default" }])).toEqual([
      { value: "", label: "all clusters" }, { value: "default", label: "default" }, { value: "jupiter", label: "jupiter" }]);
  });
  it.each([
    [[], "GPU model", "any GPU model"],
    [null, "cluster", "any cluster"],
    [["h100", "a100"], "GPU model", "h100, a100"],
  ] as const)("%o → %s", (names, what, text) => {
    expect(acceptsText(names, what)).toBe(text);
  });
  it("offers the GPU models and clusters of the registered nodes, each once, by name", () => {
    const models = [
      { __typename: "GpuModel" as const, model: "h100", weight: 1, gpus: 16, nodes: 2, clusters: ["default", "ceres"] },
      { __typename: "GpuModel" as const, model: "a100", weight: 0.55, gpus: 4, nodes: 1, clusters: ["ceres"] },
    ];
    expect(submitChoices(models)).toEqual({ gpuModels: ["a100", "h100"], clusters: ["ceres", "default"] });
  });
  it("ticks and unticks a choice, keeping the choices' order", () => {
    const order = ["a100", "h100", "v100"];
    expect(toggled([], "v100", order)).toEqual(["v100"]);
    expect(toggled(["v100"], "a100", order)).toEqual(["a100", "v100"]);
    expect(toggled(["a100", "v100"], "a100", order)).toEqual(["v100"]);
  });
});

describe("the weights form", () => {
  it.each([
    [{ role: "admin", capabilities: ["operate", "work"] }, true],
    [{ role: "researcher", capabilities: ["work"] }, false],
    [{ role: "admin", capabilities: null }, true],
    [{ role: "manager", capabilities: null }, false],
  ])("%o may change weights: %s", (id, may) => {
    expect(mayWeigh(id)).toBe(may);
  });
  it.each([
    ["", "0.5", "why", "model"],
    ["a100", "", "why", "weight"],
    ["a100", "0", "why", "weight"],
    ["a100", "-1", "why", "weight"],
    ["a100", "lots", "why", "weight"],
    ["a100", "0.55", "  ", "reason"],
  ])("%s weight %s reason %s: mend %s first", (model, weight, reason, field) => {
    const out = parseWeightChange(model, weight, reason);
    expect(out.ok ? null : out.field).toBe(field);
  });
  it("reads a weight and a reason as the mutation's arguments", () => {
    expect(parseWeightChange("a100", " 0.55 ", " older hardware ")).toEqual({ ok: true, weights: [{ model: "a100", weight: 0.55 }], reason: "older hardware" });
  });
});

describe("each cluster's fragmentation (ADR 0091)", () => {
  it.each([
    ["against the largest gang that may run there", { freeGpus: 3, largestWaitingGang: 8, fragmentedGpus: 3 }, "3 of 3 free GPUs unusable by the largest waiting gang that may run here (8 GPUs)"],
    ["no waiting gang", { freeGpus: 8, largestWaitingGang: 0, fragmentedGpus: 0 }, "0 of 8 free GPUs unusable by the largest waiting gang that may run here (none waits)"],
    ["not known yet", { freeGpus: 8, largestWaitingGang: null, fragmentedGpus: null }, null],
  ])("%s", (_what, f, text) => {
    expect(fragmentationText(f)).toBe(text);
  });
  it("sums the clusters' own figures for the lab, or says nothing while one is not known", () => {
    const jupiter = { freeGpus: 3, largestWaitingGang: 8, fragmentedGpus: 3 };
    const ceres = { freeGpus: 16, largestWaitingGang: 16, fragmentedGpus: 0 };
    // lab-wide, jupiter's 3 GPUs and ceres' 16 were measured against one 16-GPU gang that cannot run on jupiter
    expect(labFragmentation([jupiter, ceres])).toEqual({ unusable: 3, free: 19 });
    expect(labFragmentation([jupiter, { ...ceres, fragmentedGpus: null }])).toBeNull();
    expect(labFragmentation([])).toEqual({ unusable: 0, free: 0 });
  });
});
