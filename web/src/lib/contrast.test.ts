import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { contrastRatio, textRules } from "./contrast";
import { PALETTE } from "../components/Chart";

const CSS = readFileSync(new URL("../styles.css", import.meta.url), "utf8");
const PAGE = "#f6f8fa"; // --bg
const PANEL = "#ffffff"; // --panel
// containers with their own dark background: text inside them is measured against it
const CONTAINERS: Record<string, string> = { ".topbar": "#24292f", ".who": "#24292f" };

describe("contrast (WCAG AA, 4.5:1 for text)", () => {
  it("measures known pairs", () => {
    expect(contrastRatio("#000", "#fff")).toBeCloseTo(21, 5);
    expect(contrastRatio("#fff", "#fff")).toBeCloseTo(1, 5);
    expect(contrastRatio("#767676", "#ffffff")).toBeGreaterThan(4.5);
  });
  const rules = textRules(CSS);
  it("finds the stylesheet's text colours", () => expect(rules.length).toBeGreaterThan(10));
  it.each(rules.map((r) => [r.selector, r] as const))("%s", (_sel, r) => {
    // text on its own background, or on the page and the panels when it sets none
    const container = CONTAINERS[r.selector.split(/\s+/)[0]];
    const grounds = r.background ? [r.background] : container ? [container] : [PAGE, PANEL];
    for (const bg of grounds) expect(contrastRatio(r.color, bg), `${r.color} on ${bg}`).toBeGreaterThanOrEqual(4.5);
  });
  it.each([
    ["the live badge", "#ffffff", "#1a7f37"],
    ["the polling badge", "#ffffff", "#6e5400"],
    ["the top bar", "#ffffff", "#24292f"],
    ["chart text on panels (delivered)", PALETTE.delivered, PANEL],
  ])("%s", (_what, fg, bg) => expect(contrastRatio(fg, bg)).toBeGreaterThanOrEqual(4.5));
});
