import { describe, expect, it } from "vitest";
import { formatDuration, formatGpuHours, formatPercent, formatRatio, formatRelative, formatShare, humanise, shortHash } from "./format";

describe("formatting", () => {
  it.each([[0, "0 s"], [45, "45 s"], [65, "1 min 05 s"], [3600, "1 h 00 min"], [7500, "2 h 05 min"], [90000, "1 d 1 h"], [172800, "2 d"], [-5, "0 s"]])(
    "duration %s -> %s", (s, text) => expect(formatDuration(s)).toBe(text));
  it("duration of nothing is a dash", () => {
    expect(formatDuration(null)).toBe("—");
    expect(formatDuration(Number.NaN)).toBe("—");
  });
  it.each([[0.35, "35 %"], [0.3333, "33.3 %"], [1, "100 %"], [0, "0 %"], [null, "—"]])("percent %s -> %s", (f, text) => expect(formatPercent(f)).toBe(text));
  it.each([[0.85, "85 %"], [1, "100 %"], [1.35, "135 % (over-delivery)"], [null, "—"]])("ratio %s -> %s, never capped", (r, text) => expect(formatRatio(r)).toBe(text));
  it.each([[0, "0 GPU·h"], [36, "0.010 GPU·h"], [3600, "1.00 GPU·h"], [3600 * 42.5, "42.5 GPU·h"], [3600 * 12345, "12,345 GPU·h"]])(
    "GPU-hours %s -> %s", (s, text) => expect(formatGpuHours(s)).toBe(text));
  it("relative times read both ways", () => {
    expect(formatRelative(1000 + 300, 1000)).toBe("in 5 min 00 s");
    expect(formatRelative(1000 - 190, 1000)).toBe("3 min 10 s ago");
    expect(formatRelative(1000, 1000)).toBe("now");
  });
  it("shares, codes and hashes", () => {
    expect(formatShare(0.30000000000000004)).toBe("0.3");
    expect(humanise("NO_FREE_GPUS")).toBe("no free gpus");
    expect(shortHash("abcdef0123456789", 6)).toBe("abcdef…");
    expect(shortHash(undefined)).toBe("—");
  });
});
