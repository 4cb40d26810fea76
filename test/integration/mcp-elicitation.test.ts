import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import type { ApprovalAnswer, ApprovalRequest, Approver } from "../../src/approvals/approver.js";
import type { Envelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { EVERYTHING } from "../support/mcp-servers.js";
import { collect } from "../support/wait.js";

/*
 * MCP's elicitation with a real server: server-everything's `trigger-elicitation-request` asks the
 * user a form of every kind of field while it runs (it offers the tool only to a client that declares
 * `elicitation`). The question reaches whoever answers the agent's approvals, as a request of
 * `everything__elicitation`; the tool's result says what the server got.
 */

let model: ScriptedModelServer;
let ws: string;
let dispose: () => void;
beforeEach(async () => {
  model = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "README.md": "# project\n" }));
  model.script(
    {
      match: { system: '"lead"', turn: 1 },
      reply: { toolCalls: [{ name: "everything__trigger-elicitation-request", arguments: {} }] },
      times: Number.POSITIVE_INFINITY,
    },
    {
      match: { system: '"lead"', turn: 2 },
      reply: (request) => ({ text: String(request.messages.at(-1)?.content) }),
      times: Number.POSITIVE_INFINITY,
    },
  );
});
afterEach(async () => {
  await model.close();
  dispose();
});

async function runtime(approver: Approver | undefined, policy = "ask") {
  const config = testConfig(
    {
      defaultModel: "scripted",
      approval: { policy },
      providers: { openai: { baseURL: model.baseURL, models: { scripted: {} } } },
      mcpServers: {
        everything: {
          command: process.execPath,
          args: [EVERYTHING],
          autoApprove: ["trigger-elicitation-request"],
        },
      },
    },
    [{ name: "lead", description: "Leads.", tools: ["everything__trigger-elicitation-request"] }],
  );
  return new Runtime({ config, workspace: ws, env: {}, ...(approver ? { approver } : {}) }).open();
}

/** An approver that answers the server's question as `answer` says, and records what it was asked. */
function answering(answer: ApprovalAnswer) {
  const asked: ApprovalRequest[] = [];
  const approver: Approver = {
    decide: async (request) => {
      asked.push(request);
      return answer;
    },
  };
  return { asked, approver };
}

async function run(approver: Approver | undefined, policy?: string) {
  const rt = await runtime(approver, policy);
  const handle = rt.start({ task: "ask me", agent: "lead" });
  const output = await handle.done;
  const events: Envelope[] = (await collect(rt.bus.eventLog.read({ runId: handle.runId }))).map(
    (e) => e.envelope,
  );
  await rt.close();
  return { output, finished: events.find((e) => e.type === "elicitation.finished")?.data, events };
}

describe("MCP elicitation", () => {
  it("puts the server's form to whoever answers approvals; answers that fit reach the server", async () => {
    const { asked, approver } = answering({
      approved: true,
      by: "user",
      reason: JSON.stringify({
        name: "Ann Lee",
        check: true,
        integer: 7,
        titledMultipleSelectEnum: ["fish-2"],
      }),
    });
    const { output, finished } = await run(approver);
    expect(asked).toHaveLength(1);
    const question = asked[0] as ApprovalRequest;
    expect(question.tool).toBe("everything__elicitation");
    expect(question.callId).toMatch(/-question-1$/);
    expect(question.detail).toContain("Please provide inputs for the following fields:");
    expect(question.detail).toContain("name (a string, required) String: Your full, legal name");
    expect(output.result).toContain("User provided the requested information");
    expect(output.result).toContain("- Name: Ann Lee");
    expect(output.result).toContain("- Agreed to terms: true");
    expect(output.result).toContain("- Favorite Integer: 7");
    expect(finished).toMatchObject({ server: "everything", action: "accept" });
  });

  it("a person's no declines it; answers that do not fit the form cancel it, saying why", async () => {
    const declined = await run(answering({ approved: false, by: "user", reason: "not today" }).approver);
    expect(declined.output.result).toContain("User declined to provide the requested information");
    expect(declined.finished).toMatchObject({ action: "decline", why: "not today" });

    // A plain yes, with no answers: the form's required name is missing.
    const bare = await run(answering({ approved: true, by: "user" }).approver);
    expect(bare.output.result).toContain("User cancelled");
    expect(bare.finished).toMatchObject({
      action: "cancel",
      why: expect.stringContaining("name is required"),
    });
  });

  it("asks nobody under never-ask: cancelled at once", async () => {
    const { asked, approver } = answering({ approved: true, by: "user", reason: '{"name":"x"}' });
    const { output, finished } = await run(approver, "never-ask");
    expect(asked).toHaveLength(0);
    expect(output.result).toContain("User cancelled");
    expect(finished).toMatchObject({ action: "cancel", why: expect.stringContaining("never-ask") });
  });
});
