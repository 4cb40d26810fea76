import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { readApproval } from "../../src/approvals/answer-approval.js";
import { BusApprover } from "../../src/approvals/bus-approver.js";
import { NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { silentLogger } from "../../src/log.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { answerRef, newIdentity, trusting } from "../support/approvers.js";
import { testConfig } from "../support/config.js";
import { waitFor } from "../support/wait.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it("a subagent the model asks for while NATS is away starts once NATS is back: the parent gets its answer", async () => {
  const dir = mkdtempSync(join(tmpdir(), "troupe-outage-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  let nats = await NatsServerProcess.start({ storeDir: join(dir, "store") });
  cleanups.push(() => nats.stop());
  const model = await ScriptedModelServer.start([
    // The lead's answer comes while NATS is down: the child is spawned in the outage.
    {
      match: { system: '"lead"', turn: 1 },
      reply: { toolCalls: [{ name: "subagent_scout", arguments: { task: "look" } }], delayMs: 1500 },
    },
    { match: { system: '"scout"' }, reply: { text: "the scout saw it" } },
    { match: { system: '"lead"', turn: 2 }, reply: { text: "done with the scout's help" } },
  ]);
  cleanups.push(() => model.close());
  const config = testConfig(
    { defaultModel: "scripted", providers: { openai: { baseURL: model.baseURL, models: { scripted: {} } } } },
    [
      { name: "lead", description: "Leads.", subagents: ["scout"] },
      { name: "scout", description: "Scouts.", readOnly: true },
    ],
  );
  const bus = await NatsBus.connect({ url: nats.url, prefix: "outage" });
  cleanups.push(() => bus.close());
  const runtime = await new Runtime({ config, bus, workspace: dir, env: {} }).open();
  cleanups.push(() => runtime.close());
  const handle = runtime.start({ task: "go", agent: "lead" });
  await new Promise((resolve) => setTimeout(resolve, 500));
  await nats.kill("SIGKILL");
  await new Promise((resolve) => setTimeout(resolve, 3000));
  nats = await nats.restart();
  const output = await handle.done;
  expect(output).toMatchObject({ reason: "done", result: "done with the scout's help" });
  const toLead = model.requests.find((r) => r.body.messages.some((m) => m.role === "tool"));
  expect(String(toLead?.body.messages.find((m) => m.role === "tool")?.content)).toContain("the scout saw it");
}, 60_000);

it("an approval waited on across a NATS restart is still decided by the answer that comes after it", async () => {
  const dir = mkdtempSync(join(tmpdir(), "troupe-outage-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  let nats = await NatsServerProcess.start({ storeDir: join(dir, "store") });
  cleanups.push(() => nats.stop());
  const host = await NatsBus.connect({ url: nats.url, prefix: "outage2" });
  cleanups.push(() => host.close());
  const alice = newIdentity("alice");
  const request = {
    runId: "r1",
    agentId: "a1",
    callId: "c1",
    tool: "shell",
    arguments: "{}",
    effect: "execute" as const,
    detail: "make",
    paths: [],
  };
  const decided = new BusApprover(host, 60_000, trusting(alice), silentLogger).decide(
    request,
    new AbortController().signal,
  );
  await waitFor("the pending record", async () => (await readApproval(host, request)) !== undefined);
  await nats.kill("SIGKILL");
  await new Promise((resolve) => setTimeout(resolve, 3000));
  nats = await nats.restart();
  const approver = await NatsBus.connect({ url: nats.url, prefix: "outage2" });
  cleanups.push(() => approver.close());
  expect((await answerRef(approver, alice, request, { approved: true })).outcome).toBe("decided");
  expect(await decided).toEqual({ approved: true, by: "alice" });
}, 60_000);

it("a KV watch begun while NATS is away starts when it is back, and sees what is written then", async () => {
  const dir = mkdtempSync(join(tmpdir(), "troupe-outage-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  let nats = await NatsServerProcess.start({ storeDir: join(dir, "store") });
  cleanups.push(() => nats.stop());
  const bus = await NatsBus.connect({ url: nats.url, prefix: "outage3" });
  cleanups.push(() => bus.close());
  const kv = await bus.kv("approvals");
  await nats.kill("SIGKILL");
  const seen: unknown[] = [];
  const watching = new AbortController();
  cleanups.push(() => watching.abort());
  const done = (async () => {
    for await (const change of kv.watch({ key: "k1", signal: watching.signal })) {
      seen.push(change.value);
      if (seen.length === 1) watching.abort();
    }
  })();
  await new Promise((resolve) => setTimeout(resolve, 1500));
  nats = await nats.restart();
  const writer = await NatsBus.connect({ url: nats.url, prefix: "outage3" });
  cleanups.push(() => writer.close());
  await (await writer.kv("approvals")).put("k1", { written: "after" });
  await done;
  expect(seen).toEqual([{ written: "after" }]);
}, 60_000);
