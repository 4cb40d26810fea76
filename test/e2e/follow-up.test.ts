import { spawn } from "node:child_process";
import { realpathSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer, type ScriptRule } from "../../src/testing/scripted-model-server.js";
import { exited, runTroupe, TROUPE_BIN, tempTree } from "../support/cli.js";
import { waitFor } from "../support/wait.js";

/*
 * `troupe follow-up RUN "…"` and `troupe run --continue [RUN]` of local runs, from a script: the run
 * goes on with the text as its user's next message, whether it finished or was aborted.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The text of every message the model was sent in its `n`th request (0-based). */
const sent = (model: ScriptedModelServer, n: number) =>
  (model.requests[n]?.body.messages ?? []).map((m) => `${m.role}: ${String(m.content ?? "")}`);

/** A project whose agent `coder` has no tools, on `rules`; `troupeIn(DIR, ARGS)` runs troupe in its DIR. */
async function localProject(rules: ScriptRule[], files: Record<string, string> = {}) {
  const model = await ScriptedModelServer.start(rules);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultAgent: coder\ndefaultModel: scripted\n",
    "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: []\n",
    ...files,
  });
  cleanups.push(dispose);
  const env = {
    ...process.env,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  };
  const troupeIn = (cwd: string, ...args: string[]) =>
    runTroupe(["--config", join(dir, "config"), ...args], { cwd: join(dir, cwd), env });
  return { model, dir, env, troupeIn };
}

it("a finished local run goes on with follow-up, --continue RUN, --continue (the newest) and stdin", async () => {
  const { model, dir, env, troupeIn } = await localProject([
    { match: { lastUser: "first" }, reply: { text: "One." } },
    { match: { lastUser: "second" }, reply: { text: "Two." } },
    { match: { lastUser: "third" }, reply: { text: "Three." } },
    { match: { lastUser: "fourth" }, reply: { text: "Four." } },
    { match: { lastUser: "fifth" }, reply: { text: "Five." } },
  ]);
  const troupe = (...args: string[]) => troupeIn(".", ...args);

  const first = await troupe("run", "--local", "first");
  expect(first.code).toBe(0);
  const runs = JSON.parse((await troupe("runs", "--json")).stdout) as Array<{ runId: string }>;
  const runId = runs[0]?.runId ?? "";

  const second = await troupe("follow-up", runId, "second");
  expect([second.code, second.stdout]).toEqual([0, "Two.\n"]);
  const third = await troupe("run", "--continue", runId, "third");
  expect([third.code, third.stdout]).toEqual([0, "Three.\n"]);
  const fourth = await troupe("run", "--local", "--continue", "fourth");
  expect(fourth.stderr).toContain(
    `troupe: continuing local run ${runId} (the newest in ${realpathSync(dir)}): first`,
  );
  expect([fourth.code, fourth.stdout]).toEqual([0, "Four.\n"]);
  // The text from stdin (the model server answers in this process: no spawnSync).
  const fifth = spawn(
    process.execPath,
    [TROUPE_BIN, "--config", join(dir, "config"), "follow-up", runId, "-"],
    {
      cwd: dir,
      env,
      stdio: ["pipe", "pipe", "pipe"],
    },
  );
  cleanups.push(() => fifth.kill("SIGKILL"));
  let fifthOut = "";
  fifth.stdout.on("data", (chunk) => (fifthOut += chunk));
  fifth.stdin.end("fifth\n");
  expect(await exited(fifth)).toBe(0);
  expect(fifthOut).toBe("Five.\n");

  // Each turn's call carries every exchange before it: one run, one conversation.
  expect(sent(model, 4)).toEqual([
    expect.stringMatching(/^system: /),
    "user: first",
    "assistant: One.",
    "user: second",
    "assistant: Two.",
    "user: third",
    "assistant: Three.",
    "user: fourth",
    "assistant: Four.",
    "user: fifth\n",
  ]);
  model.assertComplete();
  // Still one run.
  expect(JSON.parse((await troupe("runs", "--json")).stdout)).toHaveLength(1);
}, 60_000);

it("an aborted local run goes on with a follow-up; a bad run id is one line", async () => {
  const { model, dir, env, troupeIn } = await localProject([
    { match: { lastUser: "slow" }, reply: { text: "Never.", delayMs: 60_000 } },
    { match: { lastUser: "again" }, reply: { text: "Again." } },
  ]);
  const troupe = (...args: string[]) => troupeIn(".", ...args);
  const slow = spawn(
    process.execPath,
    [TROUPE_BIN, "--config", join(dir, "config"), "run", "--local", "slow"],
    {
      cwd: dir,
      env,
      stdio: "ignore",
    },
  );
  cleanups.push(() => slow.kill("SIGKILL"));
  await waitFor("the model asked", () => model.requests.length === 1, 20_000);
  slow.kill("SIGINT");
  expect(await exited(slow)).toBe(130);
  const runs = JSON.parse((await troupe("runs", "--json")).stdout) as Array<{ runId: string; state: string }>;
  expect(runs.map((run) => run.state)).toEqual(["aborted"]);
  const again = await troupe("follow-up", runs[0]?.runId ?? "", "again");
  expect([again.code, again.stdout]).toEqual([0, "Again.\n"]);
  expect(sent(model, 1).slice(1)).toEqual(["user: slow", "user: again"]);

  const bad = await troupe("follow-up", "--local", "nothing-like-a-run", "hello");
  expect(bad.code).toBe(2);
  expect(bad.stderr.trim().split("\n")).toHaveLength(1);
  expect(bad.stderr).toContain('"nothing-like-a-run" is no run id');
  const unknown = await troupe("follow-up", "--local", "run-00000000000000000000000000", "hello");
  expect(unknown.code).toBe(2);
  expect(unknown.stderr.trim()).toBe(
    "troupe: no run run-00000000000000000000000000 here (troupe runs lists them)",
  );
}, 60_000);

it("--continue with no run goes on with the newest run of this workspace, not the config's newest; flags it would not use are refused", async () => {
  const {
    model,
    dir,
    troupeIn: troupe,
  } = await localProject(
    [
      { match: { lastUser: "in a" }, reply: { text: "A." } },
      { match: { lastUser: "in b" }, reply: { text: "B." } },
      { match: { lastUser: "again in a" }, reply: { text: "A again." } },
    ],
    {
      "a/README.md": "a\n",
      "b/README.md": "b\n",
    },
  );

  expect((await troupe("a", "run", "--local", "in a")).code).toBe(0);
  // The config's newest run is b's, started after a's.
  expect((await troupe("b", "run", "--local", "in b")).code).toBe(0);
  const runs = JSON.parse((await troupe("a", "runs", "--json")).stdout) as Array<{
    runId: string;
    task: string;
  }>;
  const runOfA = runs.find((run) => run.task === "in a")?.runId;

  const again = await troupe("a", "run", "--local", "--continue", "again in a");
  expect(again.stderr.split("\n")[0]).toBe(
    `troupe: continuing local run ${runOfA} (the newest in ${realpathSync(join(dir, "a"))}): in a`,
  );
  expect([again.code, again.stdout]).toEqual([0, "A again.\n"]);
  expect(sent(model, 2).slice(1)).toEqual(["user: in a", "assistant: A.", "user: again in a"]);

  // A workspace with no run of its own: one line, nothing started.
  const none = await troupe(".", "run", "--local", "--continue", "anyone?");
  expect(none.code).toBe(2);
  expect(none.stderr).toBe(
    `troupe: no run of this workspace (${realpathSync(dir)}) to continue: name one (troupe runs lists them), or start one with troupe run "TASK"\n`,
  );

  // What a run keeps from its start, and a detached or keyed turn: refused in one line, nothing started.
  for (const [flags, named] of [
    [["--continue", "--agent", "coder"], "--agent"],
    [["--continue", "--sandbox", "off", "--mode", "plan"], "--sandbox, --mode"],
    [["--continue", "--skill", "x", "--detach"], "--skill, --detach"],
    [["--continue", "--id", "k"], "--id"],
    [["-w", "b", "--continue", runOfA ?? ""], "--workspace"],
  ] as const) {
    const refused = await troupe("a", "run", "--local", ...flags, "never sent");
    expect(refused.code, flags.join(" ")).toBe(2);
    expect(refused.stderr.trim().split("\n")).toHaveLength(1);
    expect(refused.stderr).toContain(`does not take ${named}: drop`);
  }
  expect(model.requests).toHaveLength(3);
  model.assertComplete();
}, 60_000);
