import { describe, expect, it } from "vitest";
import { renderToStaticMarkup } from "react-dom/server";
import { SessionCap } from "./Jobs";

const now = 1_796_200_000;

describe("a running session's cap on the Jobs screen", () => {
  it("counts down to the cap the API serves, not to start + 8 h", () => {
    const started = now - 60; // opened a minute ago with a 3 h cap: the old estimate read "7 h 59 min left"
    const html = renderToStaticMarkup(<SessionCap session={{ id: "s1", sessionCapAt: started + 3 * 3600, sessionWarningsAt: [started + 2 * 3600] }} now={now} />);
    expect(html).toContain("2 h 59 min left");
    expect(html).not.toContain("7 h");
    expect(html).toContain('data-testid="cap-s1"');
    expect(html).not.toContain("cap soon");
  });
  it("marks the session inside a recorded warning", () => {
    const html = renderToStaticMarkup(<SessionCap session={{ id: "s1", sessionCapAt: now + 600, sessionWarningsAt: [now - 3000, now + 300] }} now={now} />);
    expect(html).toContain("cap-warning");
    expect(html).toContain("cap soon");
  });
  it("says the cap is not recorded yet rather than guessing it", () => {
    const html = renderToStaticMarkup(<SessionCap session={{ id: "s1", sessionCapAt: null, sessionWarningsAt: null }} now={now} />);
    expect(html).toContain("cap not recorded yet");
    expect(html).not.toContain("left");
  });
});
