import { describe, expect, it } from "vitest";
import { sessionAddress } from "./address";

describe("a session's published address (ADR 0055)", () => {
  it.each([
    ["an http URL is a link", "http://gpu-07:8888/lab", "http://gpu-07:8888/lab"],
    ["an https URL is a link", "https://gpu-07/", "https://gpu-07/"],
    ["ssh is not a link", "ssh://gpu-07:2222", null],
    ["host:port is not a link", "gpu-07:8888", null],
    ["a scheme the server would refuse is never a link", "javascript:alert(1)", null],
  ])("%s", (_case, address, href) => {
    expect(sessionAddress(address)?.href ?? null).toBe(href);
    expect(sessionAddress(address)?.text).toBe(address);
  });

  it("says how to use an ssh address", () => {
    expect(sessionAddress("ssh://gpu-07:2222")?.hint).toBe("ssh -p 2222 gpu-07");
  });

  it("is nothing before the session publishes one", () => {
    expect(sessionAddress(null)).toBeNull();
    expect(sessionAddress("")).toBeNull();
  });
});
