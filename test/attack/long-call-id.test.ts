import { afterEach, beforeEach, expect, inject, it } from "vitest";
import { z } from "zod";
import { Runtime } from "../../src/actors/runtime.js";
import { readApproval } from "../../src/approvals/answer-approval.js";
import { BusApprover } from "../../src/approvals/bus-approver.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { memoryLogger } from "../../src/log.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { defineTool, type Tool } from "../../src/tools/tool.js";
import { answerRef, newIdentity, trusting } from "../support/approvers.js";
import { removePrefix } from "../support/buses.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { waitFor } from "../support/wait.js";

/*
 * A tool call's id is the model's to choose, of any length. It keys the call's approval and its
 * journal entry in KV: one that made a subject longer than the server's control line (4 KiB) had the
 * server drop the host's connection at each write, over and over, and the run never got on.
 */
let server: ScriptedModelServer;
let ws: string;
let dispose: () => void;
const prefix = uniquePrefix();
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({}));
});
afterEach(async () => {
  await server.close();
  dispose();
  await removePrefix(inject("natsUrl"), prefix);
});

const alice = newIdentity("alice");

it.each([
  ["5,000 letters", "c".repeat(5000)],
  ["3,000 characters that are not a subject's", "é/".repeat(1500)],
])(
  "a call id of %s is asked, answered, run once and journaled, and the host's connection stays up",
  async (_, callId) => {
    let marks = 0;
    const tools = [
      defineTool({
        name: "mark",
        description: "Marks.",
        effect: "write",
        parameters: z.object({}),
        execute: () => ({ ok: true, output: `marked ${++marks}` }),
      }) as Tool,
    ];
    server.script(
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "mark", arguments: {}, id: callId }] } },
      { match: { turn: 2 }, reply: { text: "done" } },
    );
    const config = testConfig(
      {
        defaultModel: "scripted",
        providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
      },
      [{ name: "worker", description: "Works.", tools: ["mark"] }],
    );
    const { log, records } = memoryLogger("warn");
    const bus = await NatsBus.connect({ url: inject("natsUrl"), prefix, log });
    const rt = await new Runtime({
      config,
      workspace: ws,
      env: {},
      tools,
      bus,
      approver: new BusApprover(bus, 60_000, trusting(alice), log),
      log,
    }).open();
    try {
      const handle = rt.start({ task: "Mark it", approval: "ask" });
      const ref = { runId: handle.runId, agentId: handle.agentId, callId };
      await waitFor(
        "the call's approval asked",
        async () => (await readApproval(bus, ref)) !== undefined,
        10_000,
      );
      const answer = await answerRef(
        bus,
        alice,
        { runId: handle.runId, agentId: handle.agentId, callId },
        { approved: true },
        10_000,
      );
      expect(answer.outcome).toBe("decided");
      expect((await handle.done).result).toBe("done");
      expect(marks).toBe(1);
      expect(records.filter((record) => /disconnected|control line/i.test(JSON.stringify(record)))).toEqual(
        [],
      );
    } finally {
      await rt.close();
      await bus.close();
    }
  },
  30_000,
);
