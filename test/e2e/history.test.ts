import { spawn } from "node:child_process";
import { closeSync, ftruncateSync, mkdirSync, openSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, TROUPE_BIN, tempTree } from "../support/cli.js";
import { waitFor } from "../support/wait.js";

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree(
    {
      "config/troupe.yaml":
        "nats:\n  url: nats://127.0.0.1:1\ndefaultAgent: worker\ndefaultModel: scripted\n",
      "config/agents/worker.yaml": "name: worker\ndescription: Works.\ntools: [read_file]\n",
    },
    { trusted: true },
  ));
});
afterEach(async () => {
  await server.close();
  dispose();
});

const env = () => ({
  OPENAI_BASE_URL: server.baseURL,
  OPENAI_API_KEY: "",
  TROUPE_DATA_DIR: join(dir, "data"),
});
const mode = (path: string) => statSync(path).mode & 0o777;

it("keeps local runs in the data dir (0700/0600), lists them, replays them, and resumes an aborted one from its snapshot", async () => {
  server.script({ match: { lastUser: "quick" }, reply: { text: "Quick." } });
  const quick = await runTroupe(["run", "--local", "--json", "quick"], { cwd: dir, env: env() });
  expect(quick.code).toBe(0);
  const runId = JSON.parse(quick.stdout.split("\n")[0] ?? "{}").runId as string;
  const local = join(dir, "data", "local", "troupe");
  expect(mode(local)).toBe(0o700);
  expect(mode(join(local, "runs", runId))).toBe(0o700);
  expect(mode(join(local, "runs", runId, "events.jsonl"))).toBe(0o600);
  const snapshots = join(local, "kv", "troupe_snapshots");
  // The run's one agent's snapshot, and nothing else (no temporary file left behind).
  const stored = readdirSync(snapshots);
  expect(stored).toEqual([expect.stringMatching(new RegExp(`^${runId}\\..+\\.json$`))]);
  expect(mode(join(snapshots, stored[0] as string))).toBe(0o600);

  const replay = await runTroupe(["replay", runId, "--json"], { cwd: dir, env: env() });
  expect(replay.stdout).toBe(quick.stdout);

  // Inspected with no daemon and no NATS (the config's URL answers nothing): from the data dir.
  const inspect = await runTroupe(["inspect", runId], { cwd: dir, env: env() });
  expect(inspect.stderr).toBe("");
  expect(inspect.code).toBe(0);
  expect(inspect.stdout).toMatch(new RegExp(`^# worker \\(worker-\\w+\\) in ${runId}: stopped \\(done\\)\n`));
  expect(inspect.stdout).toContain("class stopped current");
  expect(inspect.stdout).toMatch(/idle → callingModel\n.*callingModel → stopped/);
  expect(inspect.stdout).toMatch(/\nstored snapshot: stopped, 1 turn, \d+ s, next event seq \d+\n$/);

  // A slow run, aborted with Ctrl-C, then resumed.
  server.script(
    { match: { lastUser: "slow" }, reply: { text: "slow ".repeat(200), chunks: 200, chunkDelayMs: 30 } },
    {
      match: { lastUser: "Continue the task where you left off." },
      reply: { text: "Picked up and finished." },
    },
  );
  const slow = spawn(process.execPath, [TROUPE_BIN, "run", "--local", "--json", "slow"], {
    cwd: dir,
    env: { ...process.env, ...env() },
    stdio: ["ignore", "pipe", "ignore"],
  });
  let out = "";
  slow.stdout.on("data", (chunk) => (out += chunk));
  const exit = new Promise<number | null>((resolve) => slow.once("exit", resolve));
  await waitFor("streaming", () => out.includes('"model.delta"'), 10_000);
  slow.kill("SIGINT");
  expect(await exit).toBe(130);
  const slowRun = JSON.parse(out.split("\n")[0] ?? "{}").runId as string;

  const runs = await runTroupe(["runs", "--json"], { cwd: dir, env: env() });
  // No NATS at the config's URL: the list is the local runs, and says the daemon's are missing.
  expect(runs.stderr).toBe(
    "troupe: the daemon's runs are not listed: cannot reach NATS on nats://127.0.0.1:1 (prefix troupe)\n",
  );
  const listed = JSON.parse(runs.stdout) as Array<{
    runId: string;
    state: string;
    where: string;
  }>;
  expect(listed.map((r) => [r.runId, r.where, r.state])).toEqual([
    [runId, "local", "done"],
    [slowRun, "local", "aborted"],
  ]);

  const aborted = await runTroupe(["inspect", slowRun], { cwd: dir, env: env() });
  expect(aborted.stdout).toContain(`in ${slowRun}: stopped (aborted)\n`);
  expect(aborted.stdout).toMatch(/\nstored snapshot: stopped, 0 turns, /);

  const resumed = await runTroupe(["resume", slowRun, "--json"], { cwd: dir, env: env() });
  expect(resumed.code).toBe(0);
  const last = resumed.stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line))
    .at(-1);
  expect(last).toMatchObject({
    type: "agent.stopped",
    data: { reason: "done", result: "Picked up and finished." },
  });
  const request = server.requests.at(-1)?.body.messages ?? [];
  // The conversation came back from the snapshot: the first task, then the instruction to go on.
  expect(request.filter((m) => m.role === "user").map((m) => m.content)).toEqual([
    "slow",
    "Continue the task where you left off.",
  ]);

  const again = await runTroupe(["resume", runId], { cwd: dir, env: env() });
  expect(again.stderr).toBe(
    `troupe: run ${runId} is done; nothing to resume (troupe replay ${runId} shows it)\n`,
  );
  expect(again.code).toBe(2);
  const after = JSON.parse((await runTroupe(["runs", "--json"], { cwd: dir, env: env() })).stdout) as Array<{
    runId: string;
    state: string;
  }>;
  expect(after.find((r) => r.runId === slowRun)?.state).toBe("done");
});

it("lists the other runs when one's log is too large or not a file: one line says which and what to remove; replay says the same", async () => {
  server.script({ match: { lastUser: "quick" }, reply: { text: "Quick." } });
  const quick = await runTroupe(["run", "--local", "--json", "quick"], { cwd: dir, env: env() });
  expect(quick.code).toBe(0);
  const runId = JSON.parse(quick.stdout.split("\n")[0] ?? "{}").runId as string;
  const runs = join(dir, "data", "local", "troupe", "runs");
  // 600 MiB, past the longest string Node makes, and sparse: it takes no room on the disk.
  mkdirSync(join(runs, "huge"));
  const fd = openSync(join(runs, "huge", "events.jsonl"), "w", 0o600);
  ftruncateSync(fd, 600 * 1024 * 1024);
  closeSync(fd);
  mkdirSync(join(runs, "odd", "events.jsonl"), { recursive: true });

  const listed = await runTroupe(["runs", "--json"], { cwd: dir, env: env() });
  expect(listed.code).toBe(0);
  expect((JSON.parse(listed.stdout) as Array<{ runId: string }>).map((r) => r.runId)).toEqual([runId]);
  expect(listed.stderr).toBe(
    [
      `troupe: not listed: run huge's event log is 600 MiB, more than the 256 MiB Troupe reads: remove ${join(runs, "huge")} to forget the run`,
      `troupe: not listed: run odd's event log is not a file: remove ${join(runs, "odd")} to forget the run`,
      "troupe: the daemon's runs are not listed: cannot reach NATS on nats://127.0.0.1:1 (prefix troupe)",
      "",
    ].join("\n"),
  );

  const replay = await runTroupe(["replay", "huge"], { cwd: dir, env: env() });
  expect(replay).toEqual({
    code: 2,
    stdout: "",
    stderr: `troupe: run huge's event log is 600 MiB, more than the 256 MiB Troupe reads: remove ${join(runs, "huge")} to forget the run\n`,
  });
});
