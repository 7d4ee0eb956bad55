import { describe, expect, it } from "vitest";
import { answerText } from "./Notifications";

const choice = { allocation: "a1", channel: "email" as const, target: "alice@lab.example", kinds: ["job_failed", "preemption"] };

describe("answerText: the one line the server's answer says", () => {
  it.each([
    [{ __typename: "NotificationsChosen" }, choice, "Saved: job_failed, preemption of a1 to alice@lab.example."],
    [{ __typename: "NotificationsChosen" }, { ...choice, kinds: [] }, "Stopped: nothing of a1 goes to alice@lab.example."],
    [{ __typename: "Rejected", code: "unknown_project", reason: "unknown allocation 'zz'" }, choice, "Refused: unknown allocation 'zz'"],
    [{ __typename: "InvalidInput", field: "target", message: "'x' is not one e-mail address" }, choice, "Not saved: 'x' is not one e-mail address"],
    [{ __typename: "NotAuthorised", message: "no allocation 'b1' you may follow" }, choice, "Not allowed: no allocation 'b1' you may follow"],
  ])("%o", (result, c, text) => {
    expect(answerText(result, c)).toBe(text);
  });
});
