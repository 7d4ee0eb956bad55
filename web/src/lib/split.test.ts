import { describe, expect, it } from "vitest";
import { isSplit, placeLabel, splitBy, type PlaceRow } from "./split";

const row = (cluster: string, gpuModel: string, owed: number, delivered: number): PlaceRow =>
  ({ cluster, gpuModel, owed, delivered, demand: owed });

const ROWS = [row("ceres", "H100", 3600, 7200), row("jupiter", "A100", 1800, 900), row("jupiter", "V100", 1800, 0)];

describe("the split by cluster and GPU model", () => {
  it.each([
    ["cluster", [["ceres", 3600, 7200, 2], ["jupiter", 3600, 900, 0.25]]],
    ["model", [["H100", 3600, 7200, 2], ["A100", 1800, 900, 0.5], ["V100", 1800, 0, 0]]],
    ["place", [["ceres · H100", 3600, 7200, 2], ["jupiter · A100", 1800, 900, 0.5], ["jupiter · V100", 1800, 0, 0]]],
  ] as const)("sums by %s, largest owed first, the ratio as it is", (by, expected) => {
    expect(splitBy(ROWS, by).map((r) => [r.key, r.owed, r.delivered, r.ratio])).toEqual(expected);
  });
  it("sums to the allocation's figures", () => {
    for (const by of ["cluster", "model", "place"] as const) {
      const s = splitBy(ROWS, by);
      expect(s.reduce((a, r) => a + r.owed, 0)).toBe(7200);
      expect(s.reduce((a, r) => a + r.delivered, 0)).toBe(8100);
    }
  });
  it("names demand no node could take, and has no ratio where nothing was owed", () => {
    expect(placeLabel("", "")).toBe("no admissible node yet");
    expect(splitBy([row("", "", 0, 0)], "place")).toEqual([{ key: "no admissible node yet", owed: 0, delivered: 0, ratio: null }]);
  });
  it("is a split only with more than one place", () => {
    expect(isSplit(ROWS)).toBe(true);
    expect(isSplit([row("default", "H100", 1, 1)])).toBe(false);
    expect(isSplit([])).toBe(false);
  });
});
