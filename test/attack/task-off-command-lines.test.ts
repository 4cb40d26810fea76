import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, expect, inject, it } from "vitest";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { removePrefix } from "../support/buses.js";
import { exited, runTroupe, TROUPE_BIN, tempTree } from "../support/cli.js";
import { daemonProcesses } from "../support/daemon-process.js";

/* ATTACK (another local user running `ps`): a task given to `troupe run` sat on the command line of
 * its process, readable by every user in /proc/PID/cmdline for as long as the run went on, and the
 * same for whatever Troupe starts. While a run works (its model calls, a sandboxed command, a hook),
 * no process on the machine has the task on its command line; `troupe run -` takes it from stdin,
 * off every command line from the start. */

const { cleanups, startDaemon } = daemonProcesses();
const TASK = `Summarise the merger plan ${Math.random().toString(36).slice(2)} for the board`;

/** The command lines of every process on the machine that hold `text`. */
function holding(text: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const line = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
      if (line.includes(text)) found.push(`${pid}: ${line}`);
    } catch {}
  }
  return found;
}

let server: ScriptedModelServer;
let seen: { scans: number; hits: string[]; children: Set<string> };
let timer: NodeJS.Timeout | undefined;

/** Looks at every process now: what holds the task, and which of Troupe's children are there. */
function scan(): void {
  seen.scans++;
  seen.hits.push(...holding(TASK));
  for (const line of holding("--norc"))
    seen.children.add(line.includes("bwrap") ? "sandboxed command" : "hook");
}

beforeEach(async () => {
  seen = { scans: 0, hits: [], children: new Set() };
  server = await ScriptedModelServer.start();
  // From the first model call on (the process has started, the task is in hand), and on every call.
  const first = (reply: object) => () => {
    timer ??= setInterval(scan, 20);
    scan();
    return reply;
  };
  server.script(
    {
      match: { turn: 1 },
      reply: first({ toolCalls: [{ name: "shell", arguments: { command: "sleep 0.6; echo slept" } }] }),
    },
    { match: { turn: 2 }, reply: first({ text: "Summarised.", delayMs: 300 }) },
  );
});
afterEach(async () => {
  clearInterval(timer);
  timer = undefined;
  await server.close();
});

const hooks = "hooks:\n  beforeTool:\n    - command: sleep 0.4\n  afterTool:\n    - command: sleep 0.4\n";
const agent = "name: worker\ndescription: Works.\ntools: [shell]\n";

function expectNothingSeen() {
  expect(seen.scans).toBeGreaterThan(10);
  // The scans saw Troupe's children at work: the sandboxed command and the hooks.
  expect([...seen.children].sort()).toEqual(["hook", "sandboxed command"]);
  expect(seen.hits).toEqual([]);
  // The task did reach the model.
  expect(JSON.stringify(server.requests[0]?.body.messages)).toContain(TASK);
}

it("troupe run --local TASK: while it works, neither it nor a command or hook it starts shows the task", async () => {
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `defaultAgent: worker\ndefaultModel: scripted\n${hooks}`,
    "config/agents/worker.yaml": agent,
  });
  cleanups.push(dispose);
  const result = await runTroupe(
    ["--config", join(dir, "config"), "run", "--local", "--approval", "auto-edit", TASK],
    { cwd: dir, env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "" } },
  );
  expect(result.code, result.stderr).toBe(0);
  expectNothingSeen();
});

it("troupe run TASK on a daemon: neither the client, the daemon nor what it starts shows the task", async () => {
  const url = inject("natsUrl");
  const prefix = uniquePrefix();
  cleanups.push(() => removePrefix(url, prefix));
  const env = { NATS_URL: url, OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "" };
  const { dir } = await startDaemon(env, prefix, `tools: [shell]\n`, hooks);
  const result = await runTroupe(["--config", join(dir, "config"), "run", "--approval", "auto-edit", TASK], {
    cwd: dir,
    env,
  });
  expect(result.code).toBe(0);
  expectNothingSeen();
});

it("troupe run - takes the task from stdin: it is on no command line from the start", async () => {
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `defaultAgent: worker\ndefaultModel: scripted\n${hooks}`,
    "config/agents/worker.yaml": agent,
  });
  cleanups.push(dispose);
  const child = spawn(
    process.execPath,
    [TROUPE_BIN, "--config", join(dir, "config"), "run", "--local", "--approval", "auto-edit", "-"],
    {
      cwd: dir,
      env: {
        ...process.env,
        TROUPE_DATA_DIR: join(dir, ".data"),
        OPENAI_BASE_URL: server.baseURL,
        OPENAI_API_KEY: "",
      },
      stdio: ["pipe", "pipe", "pipe"],
    },
  );
  let stderr = "";
  child.stderr.on("data", (chunk) => (stderr += chunk));
  child.stdout.resume();
  // Looked at from before the task is even written.
  timer = setInterval(scan, 20);
  child.stdin.end(`${TASK}\n`);
  expect(await exited(child), stderr).toBe(0);
  expectNothingSeen();
});
