import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ToolJournal } from "../../src/actors/agent-store.js";
import { historyFromLog } from "../../src/actors/log-history.js";
import { Runtime } from "../../src/actors/runtime.js";
import { findApproval } from "../../src/approvals/answer-approval.js";
import type { ApprovalAnswer, ApprovalRequest, Approver } from "../../src/approvals/approver.js";
import { BusApprover } from "../../src/approvals/bus-approver.js";
import type { AgentEvent } from "../../src/events/agent-events.js";
import { silentLogger } from "../../src/log.js";
import { countTextTokens } from "../../src/model/tokens.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { answerRef, newIdentity, trusting } from "../support/approvers.js";
import { type BusUnderTest, natsBus } from "../support/buses.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { collect, waitFor } from "../support/wait.js";

/*
 * Time spent waiting for a person is not wall time: an agent waiting on an approval does not run
 * out of maxWallMs (issue 34, point 6). maxWaitMs bounds the waiting instead, and denies the call,
 * not the run; a request its agent stops waiting on is closed with a line in the log saying why.
 */

let server: ScriptedModelServer;
let ws: string;
let dispose: () => void;
let nats: BusUnderTest;
const runtimes: Runtime[] = [];

beforeAll(() => {
  // The scripted server counts its replies' tokens in this process: its tokenizer loads before any wall runs.
  countTextTokens("warm up");
});
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "notes.md": "old\n" }));
  nats = await natsBus();
});
afterEach(async () => {
  for (const rt of runtimes.splice(0)) await rt.close();
  await nats.dispose();
  await server.close();
  dispose();
});

async function runtime(approver: Approver, budget: Record<string, number | string>) {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "coder", description: "Writes.", tools: ["write_file"], budget }],
  );
  const rt = await new Runtime({ config, workspace: ws, env: {}, bus: nats.bus, approver }).open();
  runtimes.push(rt);
  return rt;
}

/** A person who answers after `ms` (or never, when the wait is given up first). */
function answersAfter(ms: number, answer: ApprovalAnswer, asked: ApprovalRequest[] = []): Approver {
  return {
    decide: (request, signal) => {
      asked.push(request);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => resolve(answer), ms);
        signal.addEventListener("abort", () => {
          clearTimeout(timer);
          reject(signal.reason);
        });
      });
    },
  };
}

const WRITE = { name: "write_file", arguments: { path: "notes.md", content: "hello\n" } };

async function eventsOf(runId: string): Promise<AgentEvent[]> {
  return (await collect(nats.bus.eventLog.read({ runId }))).map((e) => e.envelope as AgentEvent);
}

describe("waiting for people", () => {
  it("is not charged to maxWallMs: a call answered long after the wall would have passed still runs, and the run finishes", async () => {
    server.script(
      { match: { turn: 1 }, reply: { toolCalls: [WRITE] } },
      { match: { turn: 2 }, reply: { text: "wrote it" } },
    );
    // The wall (800 ms, 80 ms of grace) is far shorter than the person takes to answer.
    const rt = await runtime(answersAfter(2000, { approved: true, by: "test" }), { maxWallMs: 800 });
    const handle = rt.start({ task: "Write hello into notes.md", approval: "ask" });
    const output = await handle.done;
    expect(output).toMatchObject({ reason: "done", result: "wrote it" });
    expect(readFileSync(join(ws, "notes.md"), "utf8")).toBe("hello\n");
    // What it waited is kept in its snapshot (for maxWaitMs, across a restart).
    const snapshot = handle.snapshot() as { context: { waitedMs: number } };
    expect(snapshot.context.waitedMs).toBeGreaterThanOrEqual(2000);
    // An agent rebuilt from the log (its snapshot lost) is not charged the wait either.
    const journal = await ToolJournal.open(nats.bus);
    const history = await historyFromLog(nats.bus, journal, handle.runId, handle.agentId);
    const events = await eventsOf(handle.runId);
    const span = (events.at(-1)?.ts ?? 0) - (events[0]?.ts ?? 0);
    expect(history?.waitedMs).toBeGreaterThanOrEqual(2000);
    expect(history?.elapsedMs).toBe(span - (history?.waitedMs ?? 0));
  });

  it("is not charged to a resumed agent either: its wall goes on from the time it had worked", async () => {
    const fixture = join(import.meta.dirname, "../fixtures/records/v1-machine2-awaiting-approval.json");
    const record = JSON.parse(readFileSync(fixture, "utf8"));
    // Stored while waiting on its write_file, with 100 ms of its 1 s wall left.
    record.budget = { maxTurns: 50, maxWallMs: 1000 };
    record.snapshot.context.budget = record.budget;
    record.elapsedMs = 900;
    await (await nats.bus.kv("snapshots")).put(`${record.runId}.${record.agentId}`, record);
    server.script({ match: { turn: 2 }, reply: { text: "wrote it" } });
    const rt = await runtime(answersAfter(1500, { approved: true, by: "test" }), { maxWallMs: 1000 });
    const handle = await rt.resume(record.runId, record.agentId, { as: "own-record" });
    expect(await handle?.done).toMatchObject({ reason: "done", result: "wrote it" });
    expect(readFileSync(join(ws, "notes.md"), "utf8")).toBe("hello\n");
  });

  it("is bounded by maxWaitMs: the call waited on is denied with the reason, the next is not asked, and the run goes on", async () => {
    server.script(
      {
        match: { turn: 1 },
        reply: { toolCalls: [WRITE, { ...WRITE, arguments: { path: "other.md", content: "x\n" } }] },
      },
      { match: { turn: 2 }, reply: { text: "could not write" } },
    );
    const asked: ApprovalRequest[] = [];
    const rt = await runtime(answersAfter(60_000, { approved: true, by: "test" }, asked), {
      maxWaitMs: "300ms",
    });
    const handle = rt.start({ task: "Write hello into notes.md", approval: "ask" });
    expect(await handle.done).toMatchObject({ reason: "done", result: "could not write" });
    expect(asked).toHaveLength(1);
    expect(readFileSync(join(ws, "notes.md"), "utf8")).toBe("old\n");
    const decided = (await eventsOf(handle.runId)).filter((e) => e.type === "approval.decided");
    expect(decided.map((e) => e.data)).toEqual([
      {
        callId: asked[0]?.callId,
        approved: false,
        by: "maxWaitMs",
        reason: expect.stringContaining("the time the agent may wait for people (maxWaitMs 300)"),
      },
    ]);
    const results = server.requests[1]?.body.messages.filter((m) => m.role === "tool") ?? [];
    expect(results).toHaveLength(2);
    for (const result of results) expect(result.content).toContain("wait for people (maxWaitMs 300)");
  });

  it("closes the request on the bus when maxWaitMs runs out, so an answer that comes later is told so", async () => {
    server.script(
      { match: { turn: 1 }, reply: { toolCalls: [WRITE] } },
      { match: { turn: 2 }, reply: { text: "could not write" } },
    );
    const alice = newIdentity("alice");
    const approver = new BusApprover(nats.bus, 60_000, trusting(alice), silentLogger);
    const rt = await runtime(approver, { maxWaitMs: 300 });
    const handle = rt.start({ task: "Write hello into notes.md", approval: "ask" });
    expect(await handle.done).toMatchObject({ reason: "done" });
    const record = await findApproval(nats.bus, "call_1_0");
    expect(record).toMatchObject({
      status: "closed",
      reason: expect.stringContaining("the time the agent may wait for people (maxWaitMs 300)"),
    });
    const late = await answerRef(
      nats.bus,
      alice,
      { runId: handle.runId, agentId: handle.agentId, callId: "call_1_0" },
      { approved: true },
    );
    expect(late.outcome).toBe("closed");
    expect(readFileSync(join(ws, "notes.md"), "utf8")).toBe("old\n");
  });

  it("closes a request its agent stops waiting on, saying why in the log before the agent's last word", async () => {
    server.script({ match: { turn: 1 }, reply: { toolCalls: [WRITE] } });
    const rt = await runtime(answersAfter(60_000, { approved: true, by: "test" }), {});
    const handle = rt.start({ task: "Write hello into notes.md", approval: "ask" });
    await waitFor("the request", async () =>
      (await eventsOf(handle.runId)).some((e) => e.type === "approval.requested"),
    );
    handle.abort("the user pressed Ctrl-C");
    expect(await handle.done).toMatchObject({ reason: "aborted" });
    const events = await eventsOf(handle.runId);
    const closed = events.findIndex((e) => e.type === "approval.closed");
    expect(events[closed]?.data).toEqual({
      callId: expect.any(String),
      why: "the agent stopped (aborted) before anyone answered",
    });
    expect(closed).toBeLessThan(events.findIndex((e) => e.type === "agent.stopped"));
  });
});
