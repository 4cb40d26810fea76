import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, inject, it } from "vitest";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { removePrefix } from "../support/buses.js";
import { TROUPE_BIN, tempTree } from "../support/cli.js";
import { waitFor } from "../support/wait.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it("a daemon killed with SIGKILL during a model call is restarted and the run finishes; the client follows throughout; the finished write ran once", async () => {
  const url = inject("natsUrl");
  const prefix = uniquePrefix();
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: { toolCalls: [{ name: "shell", arguments: { command: "echo ran >> log.txt" } }] },
    },
    { match: { turn: 2 }, reply: { text: "Appended once.", delayMs: 2500 }, times: Number.POSITIVE_INFINITY },
  ]);
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: worker\ndefaultModel: scripted\n`,
    "config/agents/worker.yaml": "name: worker\ndescription: Works.\ntools: [shell]\n",
  });
  cleanups.push(
    dispose,
    () => model.close(),
    () => removePrefix(url, prefix),
  );
  const env = {
    ...process.env,
    NATS_URL: url,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  };
  const startDaemon = async () => {
    const daemon = spawn(process.execPath, [TROUPE_BIN, "--config", join(dir, "config"), "daemon"], {
      cwd: dir,
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    daemon.stderr?.on("data", (chunk) => (stderr += chunk));
    cleanups.push(() => void daemon.kill("SIGKILL"));
    await waitFor("the daemon", () => stderr.includes("troupe daemon ready"), 15_000);
    return daemon;
  };

  const first = await startDaemon();
  const client = spawn(
    process.execPath,
    [TROUPE_BIN, "--config", join(dir, "config"), "run", "--json", "--approval", "yolo", "Append a line"],
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
  await waitFor(
    "the write to finish and the next model call to start",
    () => stdout.includes('"tool.finished"') && stdout.split('"state.changed"').length > 3,
    15_000,
  );
  expect(stdout).not.toContain('"agent.stopped"');
  first.kill("SIGKILL");
  await new Promise((resolve) => setTimeout(resolve, 300));
  await startDaemon();

  const code = await clientExit;
  expect(code).toBe(0);
  const events = stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { seq: number; type: string; data: unknown });
  expect(events.at(-1)).toMatchObject({
    type: "agent.stopped",
    data: { reason: "done", result: "Appended once." },
  });
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
  expect(readFileSync(join(dir, "log.txt"), "utf8")).toBe("ran\n");
}, 60_000);
