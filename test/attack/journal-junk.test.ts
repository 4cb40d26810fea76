import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { TROUPE_BIN } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (worker seed; an observer's write lands nowhere now, test/attack/reply-subject-writes.test.ts): "a finished write or command is never run again" (at most once, with notice).
 * Someone with a seed has the server write a stream API's JSON reply over the journal entry of a command
 * while it runs (STREAM.MSG.GET on the event stream, its reply subject the entry's key). The daemon
 * dies during the command; the next one found no journal entry it could read and ran the command
 * again. What is under a call's key and is not an entry now counts as a start of unknown outcome. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("a command cut short by a crash is not run again, whatever a worker's seed wrote over its journal entry", async () => {
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: { toolCalls: [{ name: "shell", arguments: { command: "echo ran >> ledger.txt; sleep 6" } }] },
      times: 10,
    },
    { match: { turn: 2 }, reply: { text: "done" }, times: 10 },
  ]);
  cleanups.push(() => model.close());
  const prefix = "atk";
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: coder\ndefaultModel: scripted\n`,
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
    },
    model.baseURL,
    cleanups,
  );
  const { dir, env, cfg } = h;
  await h.start();

  const client = spawn(
    process.execPath,
    [TROUPE_BIN, ...cfg, "run", "--json", "--approval", "auto-edit", "append"],
    { cwd: dir, env, stdio: ["ignore", "pipe", "ignore"] },
  );
  cleanups.push(() => client.kill("SIGKILL"));
  let out = "";
  client.stdout.on("data", (c) => (out += c));
  const exit = new Promise((r) => client.once("exit", r));
  await waitFor("the command started", () => out.includes('"tool.started"'), 15_000);
  const { existsSync } = await import("node:fs");
  await waitFor("its line written", () => existsSync(join(dir, "ledger.txt")), 5000);
  const { runId, agentId } = JSON.parse(out.split("\n")[0] ?? "{}") as { runId: string; agentId: string };

  const nc = await h.connectAs("worker", prefix);
  nc.publish(`$JS.API.STREAM.MSG.GET.${prefix.toUpperCase()}_EVENTS`, JSON.stringify({ seq: 1 }), {
    reply: `$KV.${prefix}_journal.${runId}.${agentId}.call_1_0`,
  });
  await nc.flush();
  await new Promise((r) => setTimeout(r, 300));

  h.kill();
  await h.start();
  await exit;
  expect(readFileSync(join(dir, "ledger.txt"), "utf8")).toBe("ran\n");
}, 90_000);
