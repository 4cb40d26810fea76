/**
 * Recovery: a daemon is SIGKILLed while its agent runs a shell command; a new daemon is started at
 * once. Measured: from the kill, and from the new daemon's "ready" line, to the next event of the
 * resumed run as an attached `troupe run` client sees it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ScriptedModelServer } from "../src/testing/scripted-model-server.js";
import { stopChild } from "./processes.js";

export interface Recovery {
  /** kill -9 of the old daemon → the run's next event at the client. */
  fromKillMs: number;
  /** The new daemon's "ready" line → the run's next event at the client. */
  fromReadyMs: number;
}

const now = () => Number(process.hrtime.bigint()) / 1e6;

/** Resolves when `predicate` holds for what `stream` has written so far, with the time it held. */
function whenOutput(child: ChildProcess, stream: "stdout" | "stderr", predicate: (text: string) => boolean) {
  return new Promise<number>((resolve, reject) => {
    let text = "";
    child[stream]?.on("data", (chunk) => {
      text += chunk;
      if (predicate(text)) resolve(now());
    });
    let errors = "";
    if (stream === "stdout") child.stderr?.on("data", (chunk) => (errors += chunk));
    child.once("exit", (code) =>
      reject(new Error(`a troupe process exited (${code}) early: ${`${text}${errors}`.trim()}`)),
    );
  });
}

export async function measureRecovery(bin: string, url: string, prefix: string): Promise<Recovery> {
  const model = await ScriptedModelServer.start([
    { match: { turn: 1 }, reply: { toolCalls: [{ name: "shell", arguments: { command: "sleep 30" } }] } },
    { match: { turn: 2 }, reply: { text: "Recovered." } },
  ]);
  const dir = mkdtempSync(join(tmpdir(), "troupe-bench-recovery-"));
  mkdirSync(join(dir, "config/agents"), { recursive: true });
  writeFileSync(
    join(dir, "config/troupe.yaml"),
    // The run asks for yolo (no approval for its command): the daemon must allow clients that much.
    `nats:\n  prefix: ${prefix}\ndefaultAgent: worker\ndefaultModel: scripted\ndaemon:\n  maxApproval: yolo\n`,
  );
  writeFileSync(
    join(dir, "config/agents/worker.yaml"),
    "name: worker\ndescription: Works.\ntools: [shell]\n",
  );
  const env = {
    ...process.env,
    NATS_URL: url,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  };
  const config = ["--config", join(dir, "config")];
  const children: ChildProcess[] = [];
  const start = (args: string[]) => {
    const child = spawn(process.execPath, [bin, ...config, ...args], {
      cwd: dir,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    return child;
  };
  try {
    const first = start(["daemon"]);
    await whenOutput(first, "stderr", (text) => text.includes("troupe daemon ready"));
    const client = start(["run", "--json", "--approval", "yolo", "Do it"]);
    await whenOutput(client, "stdout", (text) => text.includes('"tool.started"'));
    await new Promise((resolve) => setTimeout(resolve, 200));
    const killed = now();
    await stopChild(first, "SIGKILL");
    // What the client prints from here on comes from the resumed run.
    const next = whenOutput(client, "stdout", (text) => text.includes("\n"));
    const second = start(["daemon"]);
    const ready = await whenOutput(second, "stderr", (text) => text.includes("troupe daemon ready"));
    const resumed = await next;
    return { fromKillMs: resumed - killed, fromReadyMs: resumed - ready };
  } finally {
    for (const child of children) await stopChild(child);
    await model.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
