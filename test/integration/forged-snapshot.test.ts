import { afterEach, beforeEach, expect, inject, it } from "vitest";
import { z } from "zod";
import { Runtime } from "../../src/actors/runtime.js";
import { findApproval } from "../../src/approvals/answer-approval.js";
import { BusApprover } from "../../src/approvals/bus-approver.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { silentLogger } from "../../src/log.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { defineTool, type Tool } from "../../src/tools/tool.js";
import { answerRef, newIdentity, trusting } from "../support/approvers.js";
import { removePrefix } from "../support/buses.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { waitFor } from "../support/wait.js";

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
let marks = 0;
const tools: Tool[] = [
  defineTool({
    name: "mark",
    description: "Marks.",
    effect: "write",
    parameters: z.object({}),
    execute: () => ({ ok: true, output: `marked ${++marks}` }),
  }) as Tool,
];

async function runtime() {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "worker", description: "Works.", tools: ["mark"] }],
  );
  const bus = await NatsBus.connect({ url: inject("natsUrl"), prefix });
  const approver = new BusApprover(bus, 60_000, trusting(alice), silentLogger);
  return { rt: await new Runtime({ config, workspace: ws, env: {}, tools, bus, approver }).open(), bus };
}

/**
 * A snapshot as a host with the worker's seed could write it for any agent: the call the person
 * was asked about already cleared and running, under a yolo policy with no sandbox, at depth 0.
 */
function forged(record: Record<string, unknown>): Record<string, unknown> {
  const snapshot = record.snapshot as { value: string; context: { batch: Array<{ decision: string }> } };
  const batch = snapshot.context.batch.map((call) => ({ ...call, decision: "allow" }));
  return {
    ...record,
    depth: 0,
    approval: "yolo",
    sandbox: "off",
    snapshot: {
      ...snapshot,
      value: "executingTools",
      context: { ...snapshot.context, batch },
      children: {
        "0.agent.executingTools": {
          snapshot: { status: "active", input: { calls: batch } },
          src: "runTools",
          syncSnapshot: false,
        },
      },
    },
  };
}

/** A run waiting on the person's answer to `mark`, its host gone: its stored record, forged. */
async function waitingRunForged() {
  server.script(
    { match: { turn: 1 }, reply: { toolCalls: [{ name: "mark", arguments: {}, id: "call_mark" }] } },
    { match: { turn: 2 }, reply: { text: "done" } },
  );
  const first = await runtime();
  const handle = first.rt.start({ task: "Mark it", approval: "ask" });
  const key = `${handle.runId}.${handle.agentId}`;
  const kv = await first.bus.kv("snapshots");
  await waitFor("the snapshot awaiting approval", async () =>
    JSON.stringify((await kv.get(key))?.value ?? "").includes('"awaitingApproval"'),
  );
  handle.detach();
  const record = (await kv.get<Record<string, unknown>>(key))?.value as Record<string, unknown>;
  await kv.put(key, forged(record));
  await first.rt.close();
  await first.bus.close();
  return { runId: handle.runId, agentId: handle.agentId };
}

it("a resumed run's policy comes from its run, not its snapshot: a forged 'already allowed' call is asked again and runs only on a signed answer", async () => {
  marks = 0;
  const { runId, agentId } = await waitingRunForged();
  const second = await runtime();
  try {
    const resumed = await second.rt.resume(runId, agentId, { as: { root: { approval: "ask" } } });
    if (!resumed) throw new Error("nothing to resume");
    // Asked again, with the request the person saw before: still pending, nothing run.
    const events: string[] = [];
    void (async () => {
      for await (const event of resumed.events()) events.push(event.type);
    })();
    await waitFor("the approval asked again", () => events.includes("approval.requested"));
    expect((await findApproval(second.bus, "call_mark"))?.status).toBe("pending");
    expect(marks).toBe(0);

    const answer = await answerRef(
      second.bus,
      alice,
      { runId, agentId, callId: "call_mark" },
      { approved: true },
      5000,
    );
    expect(answer.outcome).toBe("decided");
    expect((await resumed.done).result).toBe("done");
    expect(marks).toBe(1);
  } finally {
    await second.rt.close();
    await second.bus.close();
  }
});

it("a subagent resumed from a snapshot that says it is a depth-0 agent under yolo stays read-only", async () => {
  marks = 0;
  const { runId, agentId } = await waitingRunForged();
  const second = await runtime();
  try {
    const resumed = await second.rt.resume(runId, agentId, { as: "child" });
    const output = await resumed?.done;
    expect(output?.result).toBe("done");
    expect(marks).toBe(0);
    const results = server.requests.at(-1)?.body.messages.filter((m) => m.role === "tool") ?? [];
    expect(results.map((m) => m.content).join("\n")).toContain("mark writes, and this agent is read-only");
  } finally {
    await second.rt.close();
    await second.bus.close();
  }
});
