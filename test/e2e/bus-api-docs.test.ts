import { spawn } from "node:child_process";
import { readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { expect, it } from "vitest";
import { freePort } from "../../src/bus/embedded-nats.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, tempTree } from "../support/cli.js";
import { daemonProcesses, exited } from "../support/daemon-process.js";
import { waitFor } from "../support/wait.js";

const { cleanups, startDaemon, follow } = daemonProcesses();
const ROOT = resolve(import.meta.dirname, "../..");

/** The scripts docs/daemon.md shows, by the name their first line gives them: the page can't drift from what runs. */
function scriptsOfTheDocs(): Map<string, string> {
  const page = readFileSync(join(ROOT, "docs/daemon.md"), "utf8");
  const scripts = new Map<string, string>();
  for (const [, body] of page.matchAll(/```js\n([\s\S]*?)```/g)) {
    const name = /^\/\/ (\S+\.mjs):/.exec(body ?? "")?.[1];
    if (name && body) scripts.set(name, body);
  }
  return scripts;
}

function node(dir: string, args: string[], env: NodeJS.ProcessEnv) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((done) => {
    const child = spawn(process.execPath, args, { cwd: dir, env: { ...process.env, ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.once("close", (code) => done({ code, stdout, stderr }));
  });
}

it("the API and event scripts of docs/daemon.md drive a daemon on its embedded server as the client role", async () => {
  const scripts = scriptsOfTheDocs();
  expect([...scripts.keys()].sort()).toEqual(["api.mjs", "replay.mjs", "watch.mjs"]);
  // The scripts in a directory of their own, with the `nats` package (nats.js 2) as `npm install nats` gives it.
  const { dir: scriptDir, dispose } = tempTree({});
  cleanups.push(dispose);
  for (const [name, body] of scripts) writeFileSync(join(scriptDir, name), body);
  symlinkSync(join(ROOT, "node_modules"), join(scriptDir, "node_modules"));

  const model = await ScriptedModelServer.start([
    { match: { turn: 1 }, reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] } },
    { match: { turn: 2 }, reply: { text: "The notes say: daemon notes." } },
  ]);
  cleanups.push(() => model.close());
  const prefix = uniquePrefix();
  // Nothing answers at this port: the daemon starts its own server, which asks every role for its nkey.
  const url = `nats://127.0.0.1:${await freePort()}`;
  const { dir, daemon } = await startDaemon(
    { NATS_URL: url, OPENAI_BASE_URL: model.baseURL, OPENAI_API_KEY: "" },
    prefix,
  );
  // Stopped, not killed: a daemon stops the server it started (a killed one leaves it for the next).
  cleanups.push(async () => {
    daemon.kill("SIGTERM");
    await exited(daemon);
  });
  const seed = await runTroupe(["--config", join(dir, "config"), "credentials", "client"], { cwd: dir });
  expect(seed.stdout).toMatch(/^SU[A-Z2-7]+\n?$/);
  const ca = await runTroupe(["--config", join(dir, "config"), "credentials", "--ca"], { cwd: dir });
  const env = { NATS_URL: url, TROUPE_PREFIX: prefix, NATS_SEED: seed.stdout, NATS_CA: ca.stdout.trim() };

  // Anonymous is refused: the seed is what lets the script in.
  const anonymous = await node(scriptDir, ["api.mjs", "agents.list"], {
    NATS_URL: url,
    TROUPE_PREFIX: prefix,
    NATS_CA: env.NATS_CA,
  });
  expect(anonymous.code).not.toBe(0);

  const agents = await node(scriptDir, ["api.mjs", "agents.list"], env);
  expect(agents.stderr).toBe("");
  expect(JSON.parse(agents.stdout)).toMatchObject({ agents: [{ name: "worker", tools: ["read_file"] }] });

  const watching = follow(["tool.requested"], scriptDir, env, [join(scriptDir, "watch.mjs")]);
  await new Promise((resolve) => setTimeout(resolve, 500)); // its subscription reaches the server

  const started = await node(scriptDir, ["api.mjs", "runs.start", '{"task":"What do the notes say?"}'], env);
  const { runId, agentId } = JSON.parse(started.stdout) as { runId: string; agentId: string };
  expect(runId).toMatch(/^run-/);
  // The run's first agent: its name and a random suffix, as the page's example reply shows it.
  expect(agentId).toMatch(/^worker-[0-9a-z]{8}$/);
  const shown = /api\.mjs runs\.start .*# (\{.*\})$/m.exec(
    readFileSync(join(ROOT, "docs/daemon.md"), "utf8"),
  );
  expect(Object.keys(JSON.parse(shown?.[1] ?? "{}")).sort()).toEqual(["agentId", "runId"]);
  expect(JSON.parse(shown?.[1] ?? "{}").agentId).toMatch(/^[a-z][a-z0-9_-]*-…$/);
  await waitFor("the run done", async () => {
    const got = await node(scriptDir, ["api.mjs", "runs.get", JSON.stringify({ runId })], env);
    return JSON.parse(got.stdout).status === "done";
  });
  const record = JSON.parse(
    (await node(scriptDir, ["api.mjs", "runs.get", JSON.stringify({ runId })], env)).stdout,
  );
  expect(record).toMatchObject({ runId, status: "done", result: "The notes say: daemon notes." });

  await waitFor("the watched event", () => watching.stdout().includes(runId));
  const watched = watching
    .stdout()
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line));
  expect(watched).toEqual([
    expect.objectContaining({
      runId,
      type: "tool.requested",
      data: expect.objectContaining({ name: "read_file", decision: "allow" }),
    }),
  ]);

  const replayed = await node(scriptDir, ["replay.mjs", runId, "agent.stopped"], env);
  expect(
    replayed.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line)),
  ).toEqual([
    expect.objectContaining({
      runId,
      type: "agent.stopped",
      data: expect.objectContaining({ reason: "done" }),
    }),
  ]);
  const all = await node(scriptDir, ["replay.mjs", runId], env);
  const seqs = all.stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line).seq);
  expect(seqs).toEqual(seqs.map((_: number, i: number) => i));

  // A request the daemon refuses: its words on stderr, exit 1.
  const refused = await node(scriptDir, ["api.mjs", "runs.get", "{}"], env);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(/^invalid runs.get request: runId: /);
});
