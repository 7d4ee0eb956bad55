import { describe, expect, it } from "vitest";
import { renderToStaticMarkup } from "react-dom/server";
import { ClusterSection } from "./Nodes";
import { byCluster, type ClusterFigures } from "../lib/clusters";
import type { NodeRow } from "../api/queries";
import { WeightForm, WeightsTable } from "../components/GpuModelWeights";
import { AcceptsPicker } from "../components/SubmitPanel";

const node = (id: string, cluster: string, gpuModel: string, path: string[], usedGpus: number): NodeRow => ({
  __typename: "Node", id, gpus: 4, gpuModel, path, executor: "local", state: "ready", usedGpus, freeGpus: 4 - usedGpus, foreignGpus: 0, jobs: [], otherJobs: 0, cluster,
});
const counts = { nodes: 1, gpus: 4, busyGpus: 1, freeGpus: 3, drainingGpus: 0, downGpus: 0 };
const jupiter: ClusterFigures = {
  __typename: "ClusterOccupancy", name: "jupiter", nodes: 2, gpus: 8, busyGpus: 1, freeGpus: 3, drainingGpus: 4, downGpus: 0,
  largestWaitingGang: 8, fragmentedGpus: 3,
  gpuModels: [
    { __typename: "ModelOccupancy", gpuModel: "a100", ...counts },
    { __typename: "ModelOccupancy", gpuModel: "v100", ...counts, busyGpus: 0, freeGpus: 0, drainingGpus: 4 },
  ],
};
const models = [
  { __typename: "GpuModel" as const, model: "a100", weight: 0.55, gpus: 4, nodes: 1, clusters: ["jupiter"] },
  { __typename: "GpuModel" as const, model: "h100", weight: 1, gpus: 16, nodes: 2, clusters: ["default"] },
];

describe("the Nodes screen by cluster (issue 25)", () => {
  it("shows each cluster with its totals, its GPU models and its own blocks", () => {
    const nodes = [node("j1", "jupiter", "a100", ["jupiter", "r1", "j1"], 1), node("j2", "jupiter", "v100", ["jupiter", "r2", "j2"], 0),
      node("n1", "default", "h100", ["zone-a", "block-1", "n1"], 4)];
    const [, cluster] = byCluster(nodes, [jupiter]);
    const html = renderToStaticMarkup(<ClusterSection cluster={cluster} />);
    expect(html).toContain('data-testid="cluster-jupiter"');
    expect(html).toMatch(/data-testid="cluster-jupiter-totals"[^>]*>2 nodes · 1\/8 GPUs busy · 3 free · 4 draining \(13 %\)</);
    expect(html).toMatch(/data-testid="cluster-jupiter-model-a100"[^>]*><strong>a100<\/strong> · 1 node · 1\/4 GPUs busy · 3 free</);
    expect(html).toContain("0/4 GPUs busy · 0 free · 4 draining");
    expect(html).toContain("jupiter/r1");
    expect(html).toContain("jupiter/r2");
    expect(html).not.toContain("zone-a"); // the default cluster's blocks are its own section's
    expect(html).toMatch(/data-testid="cluster-jupiter-fragmentation"[^>]*>3 of 3 free GPUs unusable by the largest waiting gang that may run here \(8 GPUs\)</);
  });
  it("says how many nodes a cluster has before its figures arrive", () => {
    const [cluster] = byCluster([node("n1", "default", "h100", ["n1"], 0)], []);
    expect(renderToStaticMarkup(<ClusterSection cluster={cluster} />)).toMatch(/cluster-default-totals"[^>]*>1 nodes</);
  });
});

describe("the GPU model weights", () => {
  it("lists each model with its weight, GPUs, nodes and clusters", () => {
    const html = renderToStaticMarkup(<WeightsTable models={models} />);
    expect(html).toMatch(/data-testid="weight-a100"><th scope="row">a100<\/th><td class="num">0.55<\/td><td class="num">4<\/td><td class="num">1<\/td><td>jupiter<\/td>/);
    expect(renderToStaticMarkup(<WeightsTable models={[]} />)).toContain("No node is registered yet.");
  });
  it("offers a form with the model, the new weight and the reason", () => {
    const html = renderToStaticMarkup(<WeightForm models={models} onSaved={() => undefined} />);
    expect(html).toContain('aria-label="Change a GPU model&#x27;s weight"');
    expect(html).toContain("a100 (now 0.55)");
    expect(html).toContain('id="weight-weight"');
    expect(html).toContain('id="weight-reason"');
    expect(html).toContain("Save weight");
  });
});

describe("the submit panel's GPU models and clusters", () => {
  it("ticks what the job accepts (none: any) and names the refusal at the field", () => {
    const html = renderToStaticMarkup(<AcceptsPicker kind="gpuModels" choices={["a100", "h100"]} chosen={["h100"]} onToggle={() => undefined} error="unknown GPU model 'b200'" />);
    expect(html).toContain("(none ticked: any)");
    expect(html).toMatch(/<input type="checkbox" id="submit-gpuModels"[^>]*data-testid="submit-gpuModels-a100"/);
    expect(html).toContain('data-testid="submit-gpuModels-h100" checked=""');
    expect(html).toContain('data-testid="submit-gpuModels-a100"/>'); // not ticked
    expect(html).toContain('data-testid="submit-gpuModels-error"');
  });
  it("offers every box, for a job and a session alike (openSession takes them too), and shows nothing without choices", () => {
    const html = renderToStaticMarkup(<AcceptsPicker kind="clusters" choices={["ceres", "jupiter"]} chosen={["ceres"]} onToggle={() => undefined} error={null} />);
    expect(html).toContain('data-testid="submit-clusters-jupiter"');
    expect(html).not.toContain("disabled");
    expect(renderToStaticMarkup(<AcceptsPicker kind="clusters" choices={[]} chosen={[]} onToggle={() => undefined} error={null} />)).toBe("");
  });
});
