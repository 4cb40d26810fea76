import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import type { ApprovalRequest } from "../../src/approvals/approver.js";
import { formFromSchema } from "../../src/approvals/question-form.js";
import { ttyApprover } from "../../src/cli/tty-approver.js";

/** A server's question as its host asks it: a request of SERVER__elicitation, the form as the arguments. */
function question(message: string): ApprovalRequest {
  const form = formFromSchema(message, {
    type: "object",
    properties: {
      name: { type: "string", description: "Your name" },
      age: { type: "integer", minimum: 0 },
      nick: { type: "string" },
    },
    required: ["name", "age"],
  });
  if ("problem" in form) throw new Error(form.problem);
  return {
    runId: "r",
    agentId: "a",
    callId: "call_1-question-1",
    tool: "docs__elicitation",
    arguments: JSON.stringify(form),
    effect: "read",
    detail: message,
    paths: [],
  };
}

function terminal() {
  const input = new PassThrough();
  const output = new PassThrough();
  let printed = "";
  output.on("data", (chunk) => (printed += chunk));
  return { input, approver: ttyApprover(async () => {}, input, output), printed: () => printed };
}

describe("a server's question at the terminal", () => {
  it("shows the message quoted and the fields; y asks each field, checks it, skips an optional one left empty", async () => {
    const { input, approver, printed } = terminal();
    const answered = approver.decide(question("Who are you?\x1b[2J"), new AbortController().signal);
    input.write("y\n");
    input.write("Ann\n");
    input.write("old\n");
    input.write("-3\n");
    input.write("41\n");
    input.write("\n");
    expect(await answered).toEqual({
      approved: true,
      by: "user",
      reason: JSON.stringify({ name: "Ann", age: 41 }),
    });
    const shown = printed();
    expect(shown).toContain("the MCP server docs asks you:");
    // The server's text is shown with its control characters made visible, never sent raw.
    expect(shown).toContain('"Who are you?\\e[2J"');
    expect(shown).not.toContain("\x1b[2J");
    expect(shown).toContain("name (a string, required) Your name");
    expect(shown).toContain("? answer it (call_1-question-1)? y = fill in the form, n [reason] = decline: ");
    expect(shown).toContain("age is a number");
    expect(shown).toContain("age is at least 0");
    expect(shown).toContain("nick (Enter to skip): ");
  });

  it("n declines it, with the reason typed after it", async () => {
    const { input, approver } = terminal();
    const answered = approver.decide(question("Who?"), new AbortController().signal);
    input.write("n rather not\n");
    expect(await answered).toEqual({ approved: false, by: "user", reason: "rather not" });
  });
});
