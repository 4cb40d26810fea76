import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection, nkeyAuthenticator } from "@nats-io/transport-node";
import { expect } from "vitest";
import { answersNats, freePort } from "../../src/bus/embedded-nats.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { KV_BUCKETS, roleInbox } from "../../src/bus/permissions.js";
import type { Role } from "../../src/config/roles.js";
import { decodeEnvelope, type Envelope, encodeEnvelope, makeEnvelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { serverTlsFiles } from "../../src/trust/server-tls.js";
import { runTroupe, TROUPE_BIN, tempTree } from "./cli.js";
import { waitFor } from "./wait.js";

/**
 * A project whose `troupe daemon` starts a nats-server of its own (nothing answers at its port), so
 * every role needs its seed, as on a user's machine. `files` are the project's (config/troupe.yaml
 * and the agents); the daemon can be stopped, killed and started again; everything it and its
 * server leave is ended in `cleanups`.
 */
export async function embeddedDaemon(
  files: Record<string, string>,
  modelBaseURL: string,
  cleanups: Array<() => unknown>,
) {
  const port = await freePort();
  const { dir, dispose } = tempTree(files);
  cleanups.push(dispose);
  const env = {
    ...process.env,
    NATS_URL: `nats://127.0.0.1:${port}`,
    OPENAI_BASE_URL: modelBaseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  };
  const cfg = ["--config", join(dir, "config")];
  let daemon: ChildProcess | undefined;
  let stderr = "";

  /** Starts a daemon and waits until it is ready, or until `timeoutMs` (then rejects). */
  const start = async (timeoutMs = 20_000) => {
    stderr = "";
    daemon = spawn(process.execPath, [TROUPE_BIN, ...cfg, "daemon"], {
      cwd: dir,
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    daemon.stderr?.on("data", (chunk) => (stderr += chunk));
    const child = daemon;
    const ended = () => child.exitCode !== null || child.signalCode !== null;
    await waitFor("the daemon ready", () => stderr.includes("troupe daemon ready") || ended(), timeoutMs);
    if (!stderr.includes("troupe daemon ready"))
      throw new Error(
        `the daemon exited (${child.exitCode ?? child.signalCode}) before it was ready: ${stderr}`,
      );
  };
  /** SIGTERM (the daemon stops its server), SIGKILL after 5 s (one stuck at start takes no SIGTERM). */
  const stop = async () => {
    const d = daemon;
    if (!d || d.exitCode !== null || d.signalCode !== null) return;
    const gone = new Promise((resolve) => d.once("exit", resolve));
    d.kill("SIGTERM");
    const timer = setTimeout(() => d.kill("SIGKILL"), 5000);
    await gone;
    clearTimeout(timer);
  };
  /** SIGKILL: the server it started lives on, for the next daemon to adopt. */
  const kill = () => daemon?.kill("SIGKILL");
  cleanups.push(async () => {
    await stop();
    // No promise of the daemon's was left rejected with no one to catch it (src/cli/unhandled.ts).
    expect(stderr).not.toContain("unhandled rejection");
    // A daemon killed (or stopped before it was ready) leaves its server: stopped by the pid it wrote.
    if (await answersNats("127.0.0.1", port)) {
      const record = join(dir, ".data", "nats", "server.json");
      process.kill((JSON.parse(readFileSync(record, "utf8")) as { pid: number }).pid, "SIGTERM");
      await waitFor("its nats-server gone", async () => !(await answersNats("127.0.0.1", port)), 10_000);
    }
  });

  /** A connection as `role`, with the seed `troupe credentials ROLE` prints and that role's inbox. */
  const connectAs = async (role: Role, prefix: string): Promise<NatsConnection> => {
    const seed = (await runTroupe([...cfg, "credentials", role], { cwd: dir, env })).stdout.trim();
    const nc = await connect({
      servers: env.NATS_URL,
      authenticator: nkeyAuthenticator(new TextEncoder().encode(seed)),
      // The server shows a certificate of the data dir's CA; a client that does not pin it is refused.
      tls: { caFile: serverTlsFiles(join(dir, ".data")).ca },
      inboxPrefix: roleInbox(prefix, role),
    });
    cleanups.push(() => nc.close());
    return nc;
  };

  /** A NatsBus of `role`, as `connectAs` connects (its seed in a file of the project's, 0600). */
  const busAs = async (role: Role, prefix: string): Promise<NatsBus> => {
    const seed = (await runTroupe([...cfg, "credentials", role], { cwd: dir, env })).stdout.trim();
    const nkeySeedFile = join(dir, `${role}.seed`);
    writeFileSync(nkeySeedFile, seed, { mode: 0o600 });
    const bus = await NatsBus.connect({
      url: env.NATS_URL,
      prefix,
      nkeySeedFile,
      tls: { caFile: serverTlsFiles(join(dir, ".data")).ca },
      inboxPrefix: roleInbox(prefix, role),
      role,
    });
    cleanups.push(() => bus.close());
    return bus;
  };

  return {
    dir,
    env,
    cfg,
    start,
    stop,
    kill,
    connectAs,
    busAs,
    stderr: () => stderr,
    pid: () => daemon?.pid,
    child: () => daemon,
  };
}

/**
 * A daemon on its default embedded server, on `prefix`, with one agent `a` and no model that
 * answers: for what the bus and the API do, not the agents.
 */
export function plainDaemon(prefix: string, cleanups: Array<() => unknown>) {
  return embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\n`,
      "config/agents/a.yaml": "name: a\ndescription: A.\n",
    },
    "http://127.0.0.1:9/v1",
    cleanups,
  );
}

/** The troupe.yaml of `coderDaemon`: `coder` the default agent on the scripted model, and `settings`. */
export function coderTroupeYaml(prefix: string, settings = ""): string {
  return `nats:\n  prefix: ${prefix}\ndefaultAgent: coder\ndefaultModel: scripted\n${settings}`;
}

/**
 * A daemon on its default embedded server, on `prefix`, whose one agent `coder` has the shell and
 * asks the model at `modelBaseURL`. `settings` is more of troupe.yaml; `files` more of the project.
 */
export async function coderDaemon(
  prefix: string,
  modelBaseURL: string,
  cleanups: Array<() => unknown>,
  settings = "",
  files: Record<string, string> = {},
) {
  return embeddedDaemon(
    {
      "config/troupe.yaml": coderTroupeYaml(prefix, settings),
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
      ...files,
    },
    modelBaseURL,
    cleanups,
  );
}

/**
 * `coderDaemon` and the scripted model it asks: at its first turn it runs `command` (after
 * `delayMs`, when given), at its second it answers `answer`. `settings` is more of troupe.yaml.
 */
export async function shellCoderDaemon(
  prefix: string,
  script: { command: string; answer: string; delayMs?: number },
  cleanups: Array<() => unknown>,
  settings = "",
) {
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [{ name: "shell", arguments: { command: script.command } }],
        ...(script.delayMs === undefined ? {} : { delayMs: script.delayMs }),
      },
      times: 5,
    },
    { match: { turn: 2 }, reply: { text: script.answer }, times: 5 },
  ]);
  cleanups.push(() => model.close());
  const h = await coderDaemon(prefix, model.baseURL, cleanups, settings);
  return { model, h };
}

/**
 * `troupe run --json --approval auto-edit append` against the daemon of `h`, followed until the
 * command it runs has started (`started`, on its output so far) and written ledger.txt: the run's
 * ids, its output as it grows, and its exit.
 */
export async function runToCommand(
  h: { dir: string; env: NodeJS.ProcessEnv; cfg: string[] },
  cleanups: Array<() => unknown>,
  started: (out: string) => boolean = (out) => out.includes('"tool.started"'),
): Promise<{ runId: string; agentId: string; out: () => string; exit: Promise<number | null> }> {
  const client = spawn(
    process.execPath,
    [TROUPE_BIN, ...h.cfg, "run", "--json", "--approval", "auto-edit", "append"],
    { cwd: h.dir, env: h.env, stdio: ["ignore", "pipe", "ignore"] },
  );
  cleanups.push(() => client.kill("SIGKILL"));
  let out = "";
  client.stdout?.on("data", (c) => (out += c));
  const exit = new Promise<number | null>((r) => client.once("exit", r));
  await waitFor("the command started", () => started(out), 15_000);
  // Written, not only made: `>>` makes the file before it writes the line, and a daemon killed in
  // between leaves it empty (the command's outcome unknown, not run again).
  const ledger = join(h.dir, "ledger.txt");
  await waitFor("its line written", () => existsSync(ledger) && statSync(ledger).size > 0, 5000);
  const { runId, agentId } = JSON.parse(out.split("\n")[0] ?? "{}") as { runId: string; agentId: string };
  return { runId, agentId, out: () => out, exit };
}

/**
 * `troupe run --json --approval ask TASK` against the daemon of `h`, followed until it asks to run
 * its command: the run's ids, the call asked about, its output as it grows, and its exit.
 */
export async function askingRun(
  h: { dir: string; env: NodeJS.ProcessEnv; cfg: string[] },
  task: string,
  cleanups: Array<() => unknown>,
): Promise<{
  runId: string;
  agentId: string;
  callId: string;
  out: () => string;
  exit: Promise<number | null>;
}> {
  const client = spawn(process.execPath, [TROUPE_BIN, ...h.cfg, "run", "--json", "--approval", "ask", task], {
    cwd: h.dir,
    env: h.env,
    stdio: ["ignore", "pipe", "ignore"],
  });
  cleanups.push(() => client.kill("SIGKILL"));
  let out = "";
  client.stdout?.on("data", (c) => (out += c));
  const exit = new Promise<number | null>((r) => client.once("exit", r));
  await waitFor("approval requested", () => out.includes('"approval.requested"'), 20_000);
  const { runId, agentId } = JSON.parse(out.split("\n")[0] ?? "{}") as { runId: string; agentId: string };
  const callId = /"callId":"([^"]+)"/.exec(out.slice(out.indexOf('"approval.requested"')))?.[1] ?? "";
  return { runId, agentId, callId, out: () => out, exit };
}

/** A request to the daemon's API on `prefix` (`runs.start`, `runs.steer`, …), as a client sends one, and its reply. */
export async function apiRequest(
  client: NatsConnection,
  prefix: string,
  verb: string,
  data: unknown,
): Promise<Envelope> {
  const msg = await client.request(
    `${prefix}.api.${verb}`,
    encodeEnvelope(makeEnvelope({ runId: "x", agentId: "cli", seq: 0, type: verb, data })),
    { timeout: 20_000 },
  );
  return decodeEnvelope(msg.data);
}

/**
 * What each of Troupe's streams in the hosts' account holds, as the daemon's seed sees it: its
 * messages (-1 when it is gone) and whether it is sealed. For an attack test's before and after.
 */
export async function hostsStreams(
  h: { connectAs(role: Role, prefix: string): Promise<NatsConnection> },
  prefix: string,
): Promise<() => Promise<Array<{ name: string; messages: number; sealed: boolean }>>> {
  const hosts = await jetstreamManager(await h.connectAs("daemon", prefix));
  const streams = [`${prefix.toUpperCase()}_EVENTS`, ...KV_BUCKETS.map((name) => `KV_${prefix}_${name}`)];
  return () =>
    Promise.all(
      streams.map((name) =>
        hosts.streams.info(name).then(
          ({ state, config }) => ({ name, messages: state.messages, sealed: config.sealed ?? false }),
          () => ({ name, messages: -1, sealed: false }),
        ),
      ),
    );
}
