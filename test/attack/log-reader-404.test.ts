import { spawn } from "node:child_process";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { TROUPE_BIN } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (once any reader's seed; no role but the daemon's may make a consumer now, so the daemon's
 * seed plays it, and the worker's is refused): a pull request to a consumer of its own that has
 * nothing to deliver, its reply aimed at a run's event subject. The server stores its answer in the event
 * stream: a 404 status, headers and no payload (a direct get of a missing key, for a role that may
 * read a bucket, does the same). The log reader took a delivery with no payload and headers for a
 * status message of its own consumer and did not count it: the next delivery was "out of sequence",
 * the consumer made again from the same place, and so on for good. A delivery is now known by its
 * ack subject, whatever it holds. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

function spawnFor(args: string[], cwd: string, env: NodeJS.ProcessEnv, ms: number) {
  const child = spawn(process.execPath, [TROUPE_BIN, ...args], {
    cwd,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (c) => (out += c));
  cleanups.push(() => child.kill("SIGKILL"));
  return new Promise<{ code: unknown; out: string }>((resolve) => {
    const timer = setTimeout(() => resolve({ code: "still running", out }), ms);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

it("one stored 404 on a run's subject: troupe replay still ends, and a restarted daemon gets ready", async () => {
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: { toolCalls: [{ name: "shell", arguments: { command: "echo hi" } }] },
      times: 10,
    },
    { match: { turn: 2 }, reply: { text: "ran it" }, times: 10 },
  ]);
  cleanups.push(() => model.close());
  const prefix = "atk";
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: coder\ndefaultModel: scripted\ndaemon:\n  maxApproval: ask\n`,
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
    },
    model.baseURL,
    cleanups,
  );
  const { dir, env, cfg } = h;
  await h.start();

  // A run waiting for an approval; the daemon restarted under it comes back and resumes it (the control).
  const client = spawn(
    process.execPath,
    [TROUPE_BIN, ...cfg, "run", "--json", "--approval", "ask", "run it"],
    { cwd: dir, env, stdio: ["ignore", "pipe", "ignore"] },
  );
  cleanups.push(() => client.kill("SIGKILL"));
  let out = "";
  client.stdout.on("data", (c) => (out += c));
  await waitFor("approval requested", () => out.includes('"approval.requested"'), 15_000);
  const { runId, agentId } = JSON.parse(out.split("\n")[0] ?? "{}") as { runId: string; agentId: string };
  await h.stop();
  await h.start();

  // A worker's seed may not make the consumer…
  const worker = await h.connectAs("worker", prefix);
  await expect(
    worker.request(`$JS.API.CONSUMER.CREATE.${prefix.toUpperCase()}_EVENTS.empty`, "{}"),
  ).rejects.toThrow(/Permissions Violation/);
  // …the daemon's may, and the reader keeps going past what it stores.
  const nc = await h.connectAs("daemon", prefix);
  const stream = `${prefix.toUpperCase()}_EVENTS`;
  const config = {
    name: "empty",
    ack_policy: "none",
    filter_subject: `${prefix}.evt.nothing.>`,
    inactive_threshold: 10_000_000_000,
  };
  await nc.request(
    `$JS.API.CONSUMER.CREATE.${stream}.empty`,
    JSON.stringify({ stream_name: stream, config }),
  );
  nc.publish(`$JS.API.CONSUMER.MSG.NEXT.${stream}.empty`, JSON.stringify({ batch: 1, no_wait: true }), {
    reply: `${prefix}.evt.${runId}.${agentId}.tool.started`,
  });
  await nc.flush();

  const replay = await spawnFor([...cfg, "replay", "--json", runId], dir, env, 10_000);
  await h.stop();
  const ready = await h.start().then(
    () => true,
    () => false,
  );
  expect({ replay: replay.code, ready }).toEqual({ replay: 0, ready: true });
}, 120_000);
