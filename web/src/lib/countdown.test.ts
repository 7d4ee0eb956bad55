import { describe, expect, it } from "vitest";
import { countdown, sessionCountdown } from "./countdown";

describe("countdown", () => {
  const now = 10_000;
  const warnings = [3600, 900, 300];
  it("is ok far from the end, with the next warning ahead", () => {
    const c = countdown(now + 2 * 3600, now, warnings);
    expect(c.level).toBe("ok");
    expect(c.label).toBe("2 h 00 min left");
    expect(c.nextWarningS).toBe(3600);
  });
  it("warns inside the first warning and is critical inside the last", () => {
    expect(countdown(now + 1800, now, warnings).level).toBe("warning");
    expect(countdown(now + 1800, now, warnings).nextWarningS).toBe(900);
    expect(countdown(now + 299, now, warnings).level).toBe("critical");
    expect(countdown(now + 299, now, warnings).nextWarningS).toBeNull();
  });
  it("reads 'cap reached' at and after the end", () => {
    expect(countdown(now, now)).toMatchObject({ level: "expired", label: "cap reached", remainingS: 0 });
    expect(countdown(now - 5, now).level).toBe("expired");
  });
  it("without warnings is ok until the end", () => {
    expect(countdown(now + 10, now)).toMatchObject({ level: "ok", nextWarningS: null });
  });
  it("has nothing to count without an end", () => {
    expect(countdown(null, now)).toMatchObject({ level: "none", label: "—" });
  });
});

describe("a session's cap countdown comes from the API's fields", () => {
  const now = 1_796_200_000;
  it.each([
    // (what the API serves as SessionOpened recorded it, label, level, next warning)
    ["a 2 h cap opened a minute ago (the bug showed 7 h 59 min)", { sessionCapAt: now + 2 * 3600 - 60, sessionWarningsAt: [now + 3540, now + 6240] }, "1 h 59 min left", "ok", 3600],
    ["inside the first recorded warning", { sessionCapAt: now + 1800, sessionWarningsAt: [now - 1800, now + 900] }, "30 min 00 s left", "warning", 900],
    ["inside the last recorded warning", { sessionCapAt: now + 120, sessionWarningsAt: [now - 1800, now - 60] }, "2 min 00 s left", "critical", null],
    ["a cap recorded without warnings", { sessionCapAt: now + 600, sessionWarningsAt: [] }, "10 min 00 s left", "ok", null],
    ["the cap reached", { sessionCapAt: now - 1, sessionWarningsAt: [now - 100] }, "cap reached", "expired", null],
    ["no SessionOpened yet: nothing to count, no estimate", { sessionCapAt: null, sessionWarningsAt: null }, "—", "none", null],
  ])("%s", (_name, job, label, level, next) => {
    expect(sessionCountdown(job, now)).toMatchObject({ label, level, nextWarningS: next });
  });
});
