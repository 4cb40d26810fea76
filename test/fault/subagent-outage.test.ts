import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { testConfig } from "../support/config.js";

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
