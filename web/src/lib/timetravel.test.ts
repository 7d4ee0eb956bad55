import { describe, expect, it } from "vitest";
import { describeAsOf, parseLocalDate, pinArgs, readPin, toLocalDateInput, waitingOf, type StateJobs } from "./timetravel";

const local = (y: number, mo: number, d: number, h: number, mi: number, s = 0) => new Date(y, mo - 1, d, h, mi, s).getTime() / 1000;

describe("readPin", () => {
  it.each([
    ["both empty: now", "", "", { pin: null, error: null }],
    ["a position", "", "42", { pin: { position: 42 }, error: null }],
    ["a position wins over a date", "2026-12-02T07:12", " 7 ", { pin: { position: 7 }, error: null }],
    ["a date, to the minute", "2026-12-02T07:12", "", { pin: { at: local(2026, 12, 2, 7, 12) }, error: null }],
    ["a date, to the second", "2026-12-02T07:12:09", "", { pin: { at: local(2026, 12, 2, 7, 12, 9) }, error: null }],
    ["position 0", "", "0", { pin: null, error: 'a log position is a whole number from 1, not "0"' }],
    ["a negative position", "", "-3", { pin: null, error: 'a log position is a whole number from 1, not "-3"' }],
    ["a fraction", "", "1.5", { pin: null, error: 'a log position is a whole number from 1, not "1.5"' }],
    ["beyond safe integers", "", "9007199254740993", { pin: null, error: 'a log position is a whole number from 1, not "9007199254740993"' }],
    ["not a date", "yesterday", "", { pin: null, error: 'not a date and time: "yesterday"' }],
    ["no 31 February", "2026-02-31T10:00", "", { pin: null, error: 'not a date and time: "2026-02-31T10:00"' }],
  ])("%s", (_what, date, position, want) => {
    expect(readPin(date, position)).toEqual(want);
  });
});

describe("dates", () => {
  it("round-trips the input's value in the viewer's zone", () => {
    const t = local(2026, 12, 2, 7, 12, 9);
    expect(toLocalDateInput(t)).toBe("2026-12-02T07:12:09");
    expect(parseLocalDate(toLocalDateInput(t))).toBe(t);
  });
  it("pins give the query's arguments", () => {
    expect(pinArgs(null)).toEqual({ position: null, at: null });
    expect(pinArgs({ position: 5 })).toEqual({ position: 5, at: null });
    expect(pinArgs({ at: 12.5 })).toEqual({ position: null, at: 12.5 });
  });
});

describe("describeAsOf", () => {
  const fmt = (t: number) => `t${t}`;
  it.each([
    ["live", { position: 9, asOf: 100, pinned: false, head: 9 }, "Now: the log up to position 9, figures to t100."],
    ["pinned at the head", { position: 9, asOf: 90, pinned: true, head: 9 }, "As of position 9, recorded t90: the figures of the log up to it. This is the log's head."],
    ["pinned before the head", { position: 4, asOf: 40, pinned: true, head: 9 }, "As of position 4, recorded t40: the figures of the log up to it. The log has moved on to position 9 since."],
  ])("%s", (_what, a, text) => {
    expect(describeAsOf(a, fmt)).toBe(text);
  });
});

describe("waitingOf", () => {
  const job = (id: string, state: string) => ({ id, project: "p", state, gpus: 1 });
  it("counts the waiting jobs from the counts, not from a page that was cut", () => {
    const s: StateJobs = {
      jobCounts: [{ state: "COMPLETED", count: 158 }, { state: "PREEMPTED", count: 2 }, { state: "QUEUED", count: 40 }],
      jobs: [job("a", "QUEUED"), job("b", "COMPLETED"), job("c", "PREEMPTED")],
      jobsTruncated: true,
    };
    const w = waitingOf(s);
    expect(w.count).toBe(42);
    expect(w.shown.map((j) => j.id)).toEqual(["a", "c"]);
    expect(w.note).toBe("2 of 42 waiting listed: the page holds the first 3 of 200 jobs by submission.");
  });
  it("says nothing more when the page holds every waiting job", () => {
    const s: StateJobs = { jobCounts: [{ state: "QUEUED", count: 1 }], jobs: [job("a", "QUEUED")], jobsTruncated: false };
    expect(waitingOf(s)).toEqual({ count: 1, shown: [job("a", "QUEUED")], note: null });
  });
});
