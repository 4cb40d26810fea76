import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { connect, nkeyAuthenticator } from "@nats-io/transport-node";
import { afterEach, expect, it } from "vitest";
import { answersNats, freePort } from "../../src/bus/embedded-nats.js";
import { roleInbox } from "../../src/bus/permissions.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, TROUPE_BIN, tempTree } from "../support/cli.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (observer seed, the weakest role): a pull request to a consumer of its own that has nothing
 * to deliver, its reply aimed at a run's event subject. The server stores its answer in the event
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
  const port = await freePort();
  const prefix = "atk";
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: coder\ndefaultModel: scripted\ndaemon:\n  maxApproval: ask\n`,
    "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
  });
  cleanups.push(dispose);
  const env = {
    ...process.env,
    NATS_URL: `nats://127.0.0.1:${port}`,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  };
  const cfg = ["--config", join(dir, "config")];
  let daemon: ChildProcess | undefined;
  let dstderr = "";
  const startDaemon = () => {
    dstderr = "";
    const d = spawn(process.execPath, [TROUPE_BIN, ...cfg, "daemon"], {
      cwd: dir,
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    d.stderr.on("data", (c) => (dstderr += c));
    daemon = d;
    return d;
  };
  const stopDaemon = async () => {
    const d = daemon;
    if (!d || d.exitCode !== null || d.signalCode !== null) return;
    const gone = new Promise((r) => d.once("exit", r));
    d.kill("SIGTERM");
    process.stderr.write(`stopping daemon ${d.pid}\n`);
    const timer = setTimeout(() => d.kill("SIGKILL"), 5000); // one stuck at start does not stop on SIGTERM
    await gone;
    clearTimeout(timer);
  };
  cleanups.push(async () => {
    await stopDaemon();
    // A daemon killed before it was ready leaves its nats-server: ours, stopped by the pid in server.json.
    if (await answersNats("127.0.0.1", port)) {
      const { readFileSync } = await import("node:fs");
      const { pid } = JSON.parse(readFileSync(join(dir, ".data", "nats", "server.json"), "utf8")) as {
        pid: number;
      };
      process.kill(pid, "SIGTERM");
      await waitFor("nats gone", async () => !(await answersNats("127.0.0.1", port)), 10_000);
    }
  });
  startDaemon();
  await waitFor("daemon ready", () => dstderr.includes("troupe daemon ready"), 20_000);

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
  await stopDaemon();
  startDaemon();
  await waitFor("daemon ready again", () => dstderr.includes("troupe daemon ready"), 20_000);

  // The attacker, with the observer's seed.
  const seed = (await runTroupe([...cfg, "credentials", "observer"], { cwd: dir, env })).stdout.trim();
  const nc = await connect({
    servers: env.NATS_URL,
    authenticator: nkeyAuthenticator(new TextEncoder().encode(seed)),
    inboxPrefix: roleInbox(prefix, "observer"),
  });
  cleanups.push(() => nc.close());
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
  await stopDaemon();
  startDaemon();
  const ready = await waitFor(
    "daemon ready a third time",
    () => dstderr.includes("troupe daemon ready"),
    20_000,
  ).then(
    () => true,
    () => false,
  );
  expect({ replay: replay.code, ready }).toEqual({ replay: 0, ready: true });
}, 120_000);
