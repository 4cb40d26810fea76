import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import type { ApprovalRequest } from "../../src/approvals/approver.js";
import type { ApprovalPolicy } from "../../src/config/policy-schemas.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { collect } from "../support/wait.js";

/* troupe.yaml's `permissions` in a run: an allow rule runs a command the policy would ask about,
 * a deny rule refuses one the policy would run, and the model reads which rule it was. */

let server: ScriptedModelServer;
let ws: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "README.md": "# a project\n" }));
});
afterEach(async () => {
  await server.close();
  dispose();
});

async function run(policy: ApprovalPolicy, permissions: { allow?: string[]; deny?: string[] }) {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
      permissions,
    },
    [{ name: "coder", description: "Codes.", tools: ["read_file", "shell"] }],
  );
  const asked: ApprovalRequest[] = [];
  const rt = await new Runtime({
    config,
    workspace: ws,
    env: {},
    approver: {
      decide: async (request) => {
        asked.push(request);
        return { approved: false, by: "test", reason: "not today" };
      },
    },
  }).open();
  try {
    const handle = rt.start({ task: "Make the files", approval: policy });
    await handle.done;
    const events = (await collect(rt.bus.eventLog.read({ runId: handle.runId }))).map((e) => e.envelope);
    return { asked, events };
  } finally {
    await rt.close();
  }
}

it("an allow rule runs a command without asking under ask; one it does not cover is asked", async () => {
  server.script(
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [
          { name: "shell", arguments: { command: "touch allowed.txt" } },
          { name: "shell", arguments: { command: "touch allowed.txt; touch other.txt" } },
        ],
      },
    },
    { match: { turn: 2 }, reply: { text: "done" } },
  );
  const { asked } = await run("ask", { allow: ["shell(touch allowed.txt *)"] });
  expect(existsSync(join(ws, "allowed.txt"))).toBe(true);
  expect(asked.map((request) => request.detail)).toEqual(["touch allowed.txt; touch other.txt"]);
  expect(existsSync(join(ws, "other.txt"))).toBe(false);
  server.assertComplete();
});

it("a deny rule refuses a command under never-ask, which would run it, and the model reads the rule", async () => {
  server.script(
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [
          { name: "shell", arguments: { command: "ls && touch denied.txt" } },
          { name: "shell", arguments: { command: "touch kept.txt" } },
        ],
      },
    },
    { match: { turn: 2 }, reply: { text: "done" } },
  );
  const { asked, events } = await run("never-ask", { allow: ["shell"], deny: ["shell(touch denied*)"] });
  expect(asked).toEqual([]);
  expect(existsSync(join(ws, "denied.txt"))).toBe(false);
  const tools = server.requests[1]?.body.messages.filter((m) => m.role === "tool") ?? [];
  expect(tools[0]?.content).toContain('denied by permissions.deny "shell(touch denied*)" in troupe.yaml');
  // never-ask runs the other read-only: the rule refused the one, the policy decided the other.
  expect(tools[1]?.content).not.toContain("permissions.deny");
  expect(events.filter((e) => e.type === "approval.requested")).toEqual([]);
  server.assertComplete();
});
