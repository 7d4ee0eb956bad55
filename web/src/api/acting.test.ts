import { afterEach, describe, expect, it, vi } from "vitest";
import * as client from "./client";
import { act } from "./acting";

afterEach(() => vi.restoreAllMocks());

describe("requeue from the UI", () => {
  it.each([
    [3, 3], // the attempt the drawer showed: a late click never stops the attempt that followed (ADR 0061)
    [null, null], // not known: the API's current attempt
    [undefined, null],
  ])("asks requestPreemption for attempt %s (sent: %s)", async (shown, sent) => {
    const spy = vi.spyOn(client, "request").mockResolvedValue({
      requestPreemption: { __typename: "PreemptionRequested", job: { id: "j1", state: "RUNNING" } },
    } as never);
    const answer = await act("requeue", "j1", "room for the deadline", shown);
    expect(answer).toEqual({ ok: true, jobId: "j1" });
    expect(spy.mock.calls[0][1]).toEqual({ job: "j1", reason: "room for the deadline", attempt: sent });
  });

  it("shows the ledger's refusal once the job moved on to a newer attempt", async () => {
    vi.spyOn(client, "request").mockResolvedValue({
      requestPreemption: { __typename: "Rejected", code: "invalid_transition", reason: "job j1 runs attempt 4, not 3" },
    } as never);
    expect(await act("requeue", "j1", "late", 3)).toEqual({
      ok: false, refusal: { message: "job j1 runs attempt 4, not 3", field: null, code: "invalid_transition" },
    });
  });
});
