import { describe, expect, it } from "vitest";
import { renderToStaticMarkup } from "react-dom/server";
import { SplitPanel } from "./Tree";

const split = [
  { cluster: "ceres", gpuModel: "H100", owed: 7200, delivered: 3600, demand: 7200 },
  { cluster: "jupiter", gpuModel: "V100", owed: 3600, delivered: 3600, demand: 3600 },
];

describe("the tree screen's split by cluster and GPU model", () => {
  it("shows the selected allocation's owed and delivered per cluster, in weighted GPU-hours", () => {
    const html = renderToStaticMarkup(<SplitPanel row={{ name: "vision", window: "last 7 days", split }} />);
    expect(html).toContain("weighted GPU-hours");
    expect(html).toContain('data-testid="split-ceres"');
    expect(html).toContain('data-testid="split-jupiter"');
    expect(html).toContain("2.00 GPU·h"); // ceres owed
    expect(html).toContain("50 %");
    expect(html).not.toContain("one cluster and model");
  });
  it("says so when nothing was owed or delivered, and when all of it is in one place", () => {
    expect(renderToStaticMarkup(<SplitPanel row={{ name: "nlp", window: "last 7 days", split: [] }} />)).toContain("split-empty");
    expect(renderToStaticMarkup(<SplitPanel row={{ name: "nlp", split: split.slice(0, 1) }} />)).toContain("one cluster and model");
    expect(renderToStaticMarkup(<SplitPanel row={null} />)).toContain("Select an allocation");
  });
});
