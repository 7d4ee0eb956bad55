import { describe, expect, it } from "vitest";
import { routingOf } from "./routing";

const placed = (routing: unknown) => ({ type: "JobPlaced", evidence: { rule: "best_fit", routing } });
const CERES = { cluster: "ceres", reason: "placed on ceres (H100): would wait 0 s there against an estimated 40 min on jupiter" };
const MOVED = { cluster: "ceres", moved_from: "jupiter", reason: "moved from jupiter to ceres (H100): would wait 0 s there" };

describe("a job's routing reason", () => {
  it.each([
    ["never placed", [], null],
    ["placed with one cluster and no request", [{ type: "JobPlaced", evidence: { rule: "best_fit" } }], null],
    ["routed", [placed(CERES)], { cluster: "ceres", reason: CERES.reason, movedFrom: null }],
    ["moved out of its room", [placed(MOVED)], { cluster: "ceres", reason: MOVED.reason, movedFrom: "jupiter" }],
    ["the latest placement's (after a preemption)",
      [placed(MOVED), { type: "JobPreempted", evidence: {} }, placed(CERES)], { cluster: "ceres", reason: CERES.reason, movedFrom: null }],
    ["malformed evidence", [placed({ cluster: 3 })], null],
  ] as const)("%s", (_, decisions, expected) => {
    expect(routingOf(decisions)).toEqual(expected);
  });
});
