import { expect, it } from "vitest";
import { answerPlace } from "../../src/approvals/approval-record.js";
import { signAnswer } from "../../src/trust/signed-answer.js";
import { newIdentity } from "../support/approvers.js";

const approval = "run-1.coder-1.call_1";
const ana = newIdentity("ana");
const answerOf = (requestId: string) =>
  signAnswer(ana, { runId: "run-1", callId: "call_1", requestId, approved: true });

it("an answer of the run is this wait's, misplaced for it, or another's", () => {
  expect(answerPlace(`${approval}.req.a1`, {}, approval, "req")).toBe("here");
  expect(answerPlace("run-1.call_1.req.a1", {}, approval, "req")).toEqual({
    misplaced: `under run-1.call_1.req.a1: an answer goes under ${approval}.req.<answerId>`,
  });
  expect(answerPlace(`${approval}.a1`, {}, approval, "req")).toEqual({
    misplaced: `under ${approval}.a1: an answer goes under ${approval}.req.<answerId>`,
  });
  // Under another digest: misplaced unless it says it answers that request (an earlier one's answer).
  expect(answerPlace(`${approval}.old.a1`, answerOf("req"), approval, "req")).toEqual({
    misplaced: `under ${approval}.old.a1: this request's answers go under ${approval}.req.<answerId>`,
  });
  expect(answerPlace(`${approval}.old.a1`, answerOf("old"), approval, "req")).toBe("elsewhere");
  expect(answerPlace("run-1.coder-1.call_2.req.a1", {}, approval, "req")).toBe("elsewhere");
  expect(answerPlace("run-1.junk.a1", {}, approval, "req")).toBe("elsewhere");
});
