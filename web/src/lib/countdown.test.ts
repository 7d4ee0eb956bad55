import { describe, expect, it } from "vitest";
import { countdown, protectionEndsAt, sessionCapEndsAt, DEFAULT_SESSION_CAP_S } from "./countdown";

describe("session cap countdown", () => {
  const now = 10_000;
  it("is ok far from the cap, with the next warning ahead", () => {
    const c = countdown(now + 2 * 3600, now);
    expect(c.level).toBe("ok");
    expect(c.label).toBe("2 h 00 min left");
    expect(c.nextWarningS).toBe(3600);
  });
  it("warns inside the first warning and is critical inside the last", () => {
    expect(countdown(now + 1800, now).level).toBe("warning");
    expect(countdown(now + 1800, now).nextWarningS).toBe(900);
    expect(countdown(now + 299, now).level).toBe("critical");
    expect(countdown(now + 299, now).nextWarningS).toBeNull();
  });
  it("reads 'cap reached' at and after the cap", () => {
    expect(countdown(now, now)).toMatchObject({ level: "expired", label: "cap reached", remainingS: 0 });
    expect(countdown(now - 5, now).level).toBe("expired");
  });
  it("takes the policy's own warnings", () => {
    expect(countdown(now + 100, now, [120, 30]).level).toBe("warning");
    expect(countdown(now + 20, now, [120, 30]).level).toBe("critical");
  });
  it("has nothing to count without an end", () => {
    expect(countdown(null, now)).toMatchObject({ level: "none", label: "—" });
  });
});

describe("contract times", () => {
  it("protection is start + min runtime for funded work only", () => {
    expect(protectionEndsAt({ startedAt: 100, minRuntimeS: 60, funded: true })).toBe(160);
    expect(protectionEndsAt({ startedAt: 100, minRuntimeS: 60, funded: false })).toBeNull();
    expect(protectionEndsAt({ startedAt: 100, minRuntimeS: 0, funded: true })).toBeNull();
  });
  it("a session's cap is start + the default cap", () => {
    expect(sessionCapEndsAt({ startedAt: 100 })).toBe(100 + DEFAULT_SESSION_CAP_S);
    expect(sessionCapEndsAt({ startedAt: null })).toBeNull();
  });
});
