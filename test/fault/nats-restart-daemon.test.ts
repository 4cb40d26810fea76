import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { ScriptedModelServer, type ScriptRule } from "../../src/testing/scripted-model-server.js";
import { spawnTroupe, TROUPE_BIN, tempTree } from "../support/cli.js";
import { waitFor } from "../support/wait.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it("nats-server killed and restarted under a running daemon: the run goes on and the client sees every event", async () => {
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultAgent: worker\ndefaultModel: scripted\n",
    "config/agents/worker.yaml": "name: worker\ndescription: Works.\ntools: [read_file]\n",
    "notes.txt": "survives\n",
  });
  cleanups.push(dispose);
  let nats = await NatsServerProcess.start({ storeDir: join(dir, "nats-store") });
  cleanups.push(() => nats.stop());
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: { text: "Reading.", toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] },
    },
    {
      match: { turn: 2 },
      reply: { text: `It says: survives. ${"More. ".repeat(40)}`, chunks: 40, chunkDelayMs: 100 },
    },
  ]);
  cleanups.push(() => model.close());
  const env = {
    ...process.env,
    NATS_URL: nats.url,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  };
  const daemon = spawn(process.execPath, [TROUPE_BIN, "--config", join(dir, "config"), "daemon"], {
    cwd: dir,
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  cleanups.push(() => void daemon.kill("SIGKILL"));
  let daemonErr = "";
  daemon.stderr.on("data", (chunk) => (daemonErr += chunk));
  await waitFor("the daemon", () => daemonErr.includes("troupe daemon ready"), 15_000);

  const client = spawn(
    process.execPath,
    [TROUPE_BIN, "--config", join(dir, "config"), "run", "--json", "What do the notes say?"],
    {
      cwd: dir,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  cleanups.push(() => void client.kill("SIGKILL"));
  const clientExit = new Promise<number | null>((resolve) => client.once("exit", resolve));
  let stdout = "";
  client.stdout.on("data", (chunk) => (stdout += chunk));
  await waitFor("the second answer to stream", () => stdout.split('"model.delta"').length > 6, 15_000);

  await nats.kill("SIGKILL");
  await new Promise((resolve) => setTimeout(resolve, 500));
  nats = await nats.restart();

  expect(await clientExit).toBe(0);
  const events = stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { seq: number; type: string; data: { text?: string } });
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
  expect(events.at(-1)).toMatchObject({ type: "agent.stopped", data: { reason: "done" } });
  const streamed = events
    .filter((e) => e.type === "model.delta")
    .map((e) => e.data.text)
    .join("");
  expect(streamed).toBe(`Reading.It says: survives. ${"More. ".repeat(40)}`);
  expect(daemon.exitCode).toBeNull();
}, 60_000);

/** A project on a nats-server of its own (killed and restarted on its store), the scripted model, and `troupe ARGS` in it. */
async function ownNats(troupeYaml: string, rules: ScriptRule[]) {
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": troupeYaml,
    "config/agents/worker.yaml": "name: worker\ndescription: Works.\ntools: [shell]\n",
  });
  cleanups.push(dispose);
  let nats = await NatsServerProcess.start({ storeDir: join(dir, "nats-store") });
  cleanups.push(() => nats.stop());
  const model = await ScriptedModelServer.start(rules);
  cleanups.push(() => model.close());
  const env = {
    ...process.env,
    NATS_URL: nats.url,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  };
  const troupe = (args: string[]) => {
    const running = spawnTroupe(["--config", join(dir, "config"), ...args], { cwd: dir, env });
    cleanups.push(() => void running.child.kill("SIGKILL"));
    return running;
  };
  return {
    dir,
    troupe,
    kill: () => nats.kill("SIGKILL"),
    restart: async () => {
      nats = await nats.restart();
    },
  };
}

const ledger: ScriptRule[] = [
  {
    match: { turn: 1 },
    reply: {
      toolCalls: [{ name: "shell", arguments: { command: "echo once >> ledger.txt" }, id: "call_l" }],
    },
  },
  { match: { turn: 2 }, reply: { text: "Written." } },
];

it("a client that turns to the log while NATS is down rides out the restart and exits with the run's outcome", async () => {
  const { dir, troupe, kill, restart } = await ownNats(
    "defaultAgent: worker\ndefaultModel: scripted\n",
    ledger,
  );
  const daemon = troupe(["daemon"]);
  await waitFor("the daemon", () => daemon.stderr().includes("troupe daemon ready"), 15_000);
  const client = troupe(["run", "--json", "--approval", "ask", "Write the ledger"]);
  await waitFor("the approval request", () => client.stdout().includes('"approval.requested"'), 15_000);
  // Down before the follower's quiet spell is over: it turns to the log while there is no NATS.
  await kill();
  await new Promise((resolve) => setTimeout(resolve, 4000));
  await restart();
  await waitFor("the daemon back on NATS", () => daemon.stderr().includes("reconnected"), 15_000).catch(
    () => {},
  );
  const approve = troupe(["approve", "--allow"]);
  expect(await approve.exit).toBe(0);
  expect(await client.exit).toBe(0);
  expect(client.stdout().trim().split("\n").at(-1)).toContain('"agent.stopped"');
  expect(client.stderr()).not.toContain("troupe: timeout");
  expect(client.stderr()).toContain("troupe: reconnecting to NATS…\n");
  expect(readFileSync(join(dir, "ledger.txt"), "utf8")).toBe("once\n");
}, 60_000);

it("a client started while NATS and the daemon are down waits for them, submits once and finishes", async () => {
  const { dir, troupe, kill, restart } = await ownNats(
    "defaultAgent: worker\ndefaultModel: scripted\ndaemon:\n  maxApproval: yolo\n",
    ledger,
  );
  await kill();
  const client = troupe(["run", "--json", "--approval", "yolo", "Write the ledger"]);
  await new Promise((resolve) => setTimeout(resolve, 2000));
  await restart();
  await waitFor("the client waiting for a daemon", () => client.stderr().includes("waiting up to"), 10_000);
  const daemon = troupe(["daemon"]);
  await waitFor("the daemon", () => daemon.stderr().includes("troupe daemon ready"), 15_000);
  expect(await client.exit, client.stderr()).toBe(0);
  expect(client.stdout().trim().split("\n").at(-1)).toContain('"agent.stopped"');
  expect(readFileSync(join(dir, "ledger.txt"), "utf8")).toBe("once\n");
  expect(client.stderr()).toMatch(
    /^troupe: no daemon answers on \S+ \(prefix troupe\); waiting up to \d+ s/m,
  );
}, 60_000);
