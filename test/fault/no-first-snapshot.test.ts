import { spawn } from "node:child_process";
import { Kvm } from "@nats-io/kv";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { TROUPE_BIN } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* A daemon killed after a run's agent started but before its first snapshot was stored: the client
 * had already seen it call the model, and its record says running. The next daemon found no
 * snapshot and left the run as it was, running for good, its client waiting. The log says the
 * agent started and never stopped: it is rebuilt from there and finishes. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("a run whose daemon died before its agent's first snapshot is rebuilt from the log by the next daemon and finishes", async () => {
  const model = await ScriptedModelServer.start([
    { match: { turn: 1 }, reply: { text: "Answered.", delayMs: 1500 }, times: 10 },
  ]);
  cleanups.push(() => model.close());
  const prefix = "nosnap";
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: coder\ndefaultModel: scripted\n`,
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [read_file]\n",
    },
    model.baseURL,
    cleanups,
  );
  await h.start();
  const client = spawn(process.execPath, [TROUPE_BIN, ...h.cfg, "run", "--json", "Answer"], {
    cwd: h.dir,
    env: h.env,
    stdio: ["ignore", "pipe", "ignore"],
  });
  cleanups.push(() => client.kill("SIGKILL"));
  let out = "";
  client.stdout.on("data", (c) => (out += c));
  const exit = new Promise<number | null>((r) => client.once("exit", r));
  await waitFor("the model call", () => out.includes('"to":"callingModel"'), 15_000);
  const { runId, agentId } = JSON.parse(out.split("\n")[0] ?? "{}") as { runId: string; agentId: string };
  h.kill();
  // What a daemon killed a moment earlier leaves: the run's record and events, no snapshot yet.
  const kv = await new Kvm(await h.connectAs("daemon", prefix)).open(`${prefix}_snapshots`);
  await kv.delete(`${runId}.${agentId}`);
  expect(await kv.get(`${runId}.${agentId}`)).toMatchObject({ operation: "DEL" });

  await h.start();
  const finished = await Promise.race([
    exit,
    new Promise((r) => setTimeout(() => r("still waiting"), 20_000)),
  ]);
  expect(finished).toBe(0);
  expect(out).toMatch(/"type":"agent\.stopped"[^\n]*"result":"Answered\."/);
  expect(h.stderr()).toMatch(/rebuilt from the event log: it has no snapshot yet/);
}, 90_000);
