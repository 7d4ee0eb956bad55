import { describe, expect, it } from "vitest";
import { actorOf, apiFilter, applyFilter, type Cursor, cursorFor } from "./audit";

const ev = (position: number, type: string, streamId: string, recordedAt: number, actor?: string) => ({
  position, type, streamId, recordedAt, metadata: actor === undefined ? {} : { actor },
});

describe("the audit stream", () => {
  const events = [ev(1, "AllocationsSet", "allocation-cluster", 100, "alice"), ev(2, "JobSubmitted", "job-a", 200, "bob"), ev(3, "JobPlaced", "job-a", 300)];

  it("reads the actor from the metadata, a dash without one", () => {
    expect(actorOf(events[0])).toBe("alice");
    expect(actorOf(events[2])).toBe("—");
    expect(actorOf({ metadata: null })).toBe("—");
  });

  it("names a person signed in through the provider, with their subject", () => {
    expect(actorOf({ metadata: { actor: "u-17", actor_name: "Ada Lovelace" } })).toBe("Ada Lovelace (u-17)");
    expect(actorOf({ metadata: { actor: "svc", actor_name: "svc" } })).toBe("svc");
  });

  it.each([
    ["a stream part", { stream: "job-" }, [2, 3]],
    ["a type", { type: "AllocationsSet" }, [1]],
    ["an actor part", { actor: "bo" }, [2]],
    ["a time range", { since: 150, until: 250 }, [2]],
    ["nothing", {}, [1, 2, 3]],
  ])("filters by %s", (_what, f, positions) => {
    expect(applyFilter(events, f).map((e) => e.position)).toEqual(positions);
  });

  it("asks the API for the stream as a prefix and the type as a list of one, from the cursor's time", () => {
    expect(apiFilter({ stream: "job-", type: "JobPlaced", actor: "", until: 500 }, { since: 42 }))
      .toEqual({ streamPrefix: "job-", types: ["JobPlaced"], actor: null, since: 42, until: 500 });
    expect(apiFilter({}, { since: undefined })).toEqual({ streamPrefix: null, types: null, actor: null, since: null, until: null });
  });

  it("goes on from the cached cursor of the same filter, afresh when the filter reaches further back", () => {
    const cache = new Map<string, Cursor>();
    const first = cursorFor(cache, { type: "JobPlaced", since: 1000 });
    expect(first.cursor).toEqual({ after: undefined, events: [], since: 1000 });
    cache.set(first.key, { after: "c1", events: [events[2]], since: 1000 });
    // a live tick a few seconds later: the same filter, the clock moved
    expect(cursorFor(cache, { type: "JobPlaced", since: 1005 }).cursor.after).toBe("c1");
    // "last 24 h" instead of "last hour": older events are wanted, read afresh
    expect(cursorFor(cache, { type: "JobPlaced", since: 500 }).cursor).toEqual({ after: undefined, events: [], since: 500 });
    // another filter has its own cursor
    expect(cursorFor(cache, { type: "JobSubmitted", since: 1000 }).cursor.after).toBeUndefined();
  });
});
