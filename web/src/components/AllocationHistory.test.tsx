import { describe, expect, it } from "vitest";
import { renderToStaticMarkup } from "react-dom/server";
import { AllocationHistoryTable, PreemptionStoryList } from "./AllocationHistory";
import { formatTime } from "../lib/format";
import { type AllocationChange, historyRows, preemptionFacts, readableEvidence } from "../lib/history";

const T = 1764651600; // 2025-12-02 05:00:00 UTC
const change = (over: Partial<AllocationChange> = {}): AllocationChange => ({
  position: 12, recordedAt: T, actor: "maria", reason: "a1 has a deadline", parent: "team-a", allocation: "a1",
  shareBefore: 0.6, shareAfter: 0.7, debugQuotaBefore: null, debugQuotaAfter: null, debugQuotaSet: false, ...over,
});

describe("allocation history", () => {
  it.each([
    [change(), "0.6 → 0.7", "default"],
    [change({ shareBefore: null, shareAfter: 0.25 }), "new → 0.25", "default"],
    [change({ shareBefore: 0.7, debugQuotaAfter: 4, debugQuotaSet: true }), "0.7 → 0.7", "default → 4 GPUs"],
    [change({ debugQuotaBefore: 4, debugQuotaAfter: null, debugQuotaSet: true }), "0.6 → 0.7", "4 GPUs → default"],
    [change({ debugQuotaBefore: 2, debugQuotaAfter: 2 }), "0.6 → 0.7", "2 GPUs"],
  ])("row %#: share and debug quota before → after", (e, share, quota) => {
    const [row] = historyRows([e]);
    expect([row.share, row.quota, row.when, row.by]).toEqual([share, quota, formatTime(T), "maria"]);
  });

  it("renders who, when (a local date, not an epoch), why, before → after", () => {
    const html = renderToStaticMarkup(<AllocationHistoryTable entries={[change({ position: 13, allocation: "a2", actor: "" }), change()]} />);
    expect(html).toContain("data-testid=\"allocation-history\"");
    expect(html).toContain(formatTime(T));
    expect(html).not.toContain(String(T));
    expect(html).toContain("a1 has a deadline");
    expect(html).toContain("0.6 → 0.7");
    expect(html.indexOf("#13")).toBeLessThan(html.indexOf("#12"));
    expect(html).toContain("<td>—</td>");
  });

  it.each([
    [change(), "—"],
    [change({ displayNameAfter: "Vision", displayNameSet: true }), "its id → “Vision”"],
    [change({ displayNameBefore: "Vision", displayNameAfter: null, displayNameSet: true }), "“Vision” → its id"],
    [change({ displayNameBefore: "Vision", displayNameAfter: "Vision" }), "“Vision”"],
  ])("row %#: the display name before → after", (e, name) => {
    expect(historyRows([e])[0].name).toBe(name);
  });

  it("says so when there is nothing to see", () => {
    expect(renderToStaticMarkup(<AllocationHistoryTable entries={[]} under="ops" />)).toContain("No allocation changes under ops that you may see.");
  });
});

describe("readable preemption evidence", () => {
  const story = {
    reason: "fair_share", beneficiary_job_id: "y", beneficiary_allocation: "a2", beneficiary_gpus: 8,
    gain_gpu_s: 28800, cost_gpu_s: 3600, lost_gpu_s: 3600, requested_by: null, note: null, requested_at: T, stopped_at: T + 120,
  };

  it("says who gained, by how much, and when in the browser's zone", () => {
    expect(preemptionFacts(story)).toEqual([
      ["Gained", "job y (allocation a2), 8 GPUs"],
      ["By how much", "8.00 GPU·h of earlier start against 1.00 GPU·h of work lost here"],
      ["Requested", formatTime(T)],
      ["Stopped", formatTime(T + 120)],
    ]);
    const html = renderToStaticMarkup(<PreemptionStoryList story={story} />);
    expect(html).toContain("job y (allocation a2), 8 GPUs");
    expect(html).not.toContain(String(T));
  });

  it("gives a manager's note", () => {
    expect(preemptionFacts({ requested_by: "maria", requested_role: "manager", note: "room for the review", lost_gpu_s: 7200 })).toEqual([
      ["Work lost", "2.00 GPU·h since the last checkpoint"],
      ["Asked by", "maria (manager)"],
      ["Note", "room for the review"],
    ]);
    expect(renderToStaticMarkup(<PreemptionStoryList story={null} />)).toBe("");
  });

  it("turns every time in the evidence into a date, and leaves the rest", () => {
    expect(readableEvidence({ started_at: T, gpus: 8, victim: { protected_until: T, lost_gpu_s: 5 }, rooms: [{ ready_at: T }], start_without: null })).toEqual({
      started_at: formatTime(T), gpus: 8, victim: { protected_until: formatTime(T), lost_gpu_s: 5 }, rooms: [{ ready_at: formatTime(T) }], start_without: null,
    });
  });
});
