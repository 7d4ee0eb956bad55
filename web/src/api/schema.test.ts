import { describe, expect, it } from "vitest";
import { argsFor, fromSDL, has, nodeTypeOf, nodesOf, select, splitSelection } from "./schema";

const SDL = `
type Query { jobs(first: Int! = 50, filter: JobFilter = null): JobConnection! job(id: ID!): Job queue: Queue! }
type Job { id: ID! state: String! gpus: Int! events: [Event!]! }
type Event { position: Int! type: String! }
type JobConnection { edges: [JobEdge!]! pageInfo: PageInfo! }
type JobEdge { cursor: String! node: Job! }
type PageInfo { hasNextPage: Boolean! endCursor: String }
type Queue { entries: [Job!]! }
enum Mode { FAST SLOW }
input JobFilter { states: [String!] project: String mode: Mode }
`;

describe("schema-driven queries", () => {
  const schema = fromSDL(SDL);
  it("knows which fields exist", () => {
    expect(has(schema, "Query.jobs")).toBe(true);
    expect(has(schema, "Query.whyPending")).toBe(false);
    expect(has(schema, "Job.gpus")).toBe(true);
  });
  it("selects only existing fields, recursively", () => {
    expect(select(schema, "Job", ["id", "nope", "gpus", "events { position nope2 type }", "missing { x }"])).toBe("id gpus events { position type }");
  });
  it("sees through Relay connections", () => {
    expect(nodeTypeOf(schema, "Query.jobs")).toEqual({ type: "Job", connection: true });
    expect(nodeTypeOf(schema, "Query.job")).toEqual({ type: "Job", connection: false });
    expect(nodesOf({ edges: [{ node: 1 }, { node: 2 }] })).toEqual([1, 2]);
    expect(nodesOf([3])).toEqual([3]);
  });
  it("passes only declared arguments, spelling input objects and enums", () => {
    expect(argsFor(schema, "Query.jobs", { first: 10, limit: 10, filter: { states: ["QUEUED"], project: "p", bogus: 1, mode: "FAST" } }))
      .toBe('(first: 10, filter: { states: ["QUEUED"], project: "p", mode: FAST })');
    expect(argsFor(schema, "Query.job", { id: 'a"b' })).toBe('(id: "a\\"b")');
  });
  it("splits selections at the top level", () => {
    expect(splitSelection("a b { c d } e")).toEqual(["a", "b { c d }", "e"]);
  });
});
