import { describe, expect, it } from "vitest";
import { challengeOf, isCallback, randomString } from "./oidc";

describe("PKCE", () => {
  it("derives the S256 challenge of RFC 7636's example verifier", async () => {
    expect(await challengeOf("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")).toBe("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
  });
  it("makes verifiers of URL-safe characters, 43 to 128 long, never twice the same", () => {
    const a = randomString(48);
    expect(a).toMatch(/^[A-Za-z0-9_-]{43,128}$/);
    expect(randomString(48)).not.toBe(a);
  });
});

describe("the provider's return", () => {
  it.each([
    ["?code=abc&state=s", true],
    ["?error=access_denied&state=s", true],
    ["?code=abc", false],
    ["", false],
  ])("%s is a callback: %s", (search, expected) => {
    expect(isCallback(search)).toBe(expected);
  });
});
