import { describe, expect, it } from "vitest";
import { renderToStaticMarkup } from "react-dom/server";
import { PinEditor, SplitPanel } from "./Tree";
import type { Allocation } from "../api/queries";

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

describe("the tree screen's pins (ADR 0067)", () => {
  const row = (name: string, parent: string, pin: string | null, pinnedTo: string | null) =>
    ({ name, displayName: name, parent, depth: parent === "cluster" ? 1 : 2, share: 0.5, entitlement: 0.5, isProject: parent !== "cluster",
       usageInWindow: 0, entitledInWindow: 0, owed: 0, delivered: 0, deliveredOverOwed: null, window: "last 7 days", windowEnd: 0,
       burn: null, debugQuotaGpus: null, split: [], pin, pinnedTo }) as unknown as Allocation;
  const rows = [row("lab", "cluster", "ceres", "ceres"), row("p", "lab", null, "ceres"), row("q", "lab", "ceres", "ceres"),
    row("other", "cluster", null, null)];

  it("shows where each child runs now and lets the manager set or clear its pin where shares are set", () => {
    const html = renderToStaticMarkup(<PinEditor parent="cluster" rows={rows} onSaved={() => undefined} />);
    expect(html).toContain('data-testid="pin-editor"');
    expect(html).toMatch(/data-testid="pin-now-lab"[^>]*>ceres</);
    expect(html).toMatch(/data-testid="pin-now-other"[^>]*>any cluster</);
    expect(html).toMatch(/id="pin-lab"[^>]*value="ceres"|value="ceres"[^>]*id="pin-lab"/);
    expect(html).toContain("Save pins");
    expect(html).toContain("No change yet.");
  });
  it("marks an inherited pin", () => {
    const html = renderToStaticMarkup(<PinEditor parent="lab" rows={rows} onSaved={() => undefined} />);
    expect(html).toMatch(/data-testid="pin-now-p"[^>]*>ceres \(inherited\)</);
    expect(html).toMatch(/data-testid="pin-now-q"[^>]*>ceres</);
  });
});
