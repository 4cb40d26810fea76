import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, TROUPE_BIN, tempTree } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";
import { Tmux } from "../support/tmux.js";
import { waitFor } from "../support/wait.js";

/*
 * A question on the terminal that closes without an answer says why, on the terminal and in the
 * run's event log, so a replay shows what became of the call (issue 34, point 6).
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const QUESTION = "? allow write_file (call_write)? y = yes, n [reason] = no, a = always:";

/** `troupe run --local --approval ask` on a terminal, its agent asking to write a file. */
async function askingRun(budget: string) {
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [
          { name: "write_file", arguments: { path: "notes.md", content: "hi\n" }, id: "call_write" },
        ],
      },
    },
    { match: { turn: 2 }, reply: { text: "Could not write it." } },
  ]);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultAgent: coder\ndefaultModel: scripted\n",
    "config/agents/coder.yaml": `name: coder\ndescription: Codes.\ntools: [write_file]\nbudget: ${budget}\n`,
    "ws/README.md": "# a project\n",
  });
  cleanups.push(dispose);
  const env = {
    ...process.env,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  };
  const config = join(dir, "config");
  const tmux = Tmux.start(
    [
      process.execPath,
      TROUPE_BIN,
      "--config",
      config,
      "run",
      "--local",
      "-w",
      "ws",
      "--approval",
      "ask",
      "Write hi",
    ],
    { cwd: dir, env, columns: 160, rows: 40 },
  );
  cleanups.push(() => tmux.kill());
  await waitFor("the question", () => tmux.screen().includes(QUESTION), 20_000);
  /** The run's events as `troupe replay --json` prints them. */
  const replayed = async () => {
    const runs = await runTroupe(["--config", config, "runs", "--json"], { cwd: dir, env });
    const runId = /"(run-[^"]+)"/.exec(runs.stdout)?.[1] ?? "";
    const replay = await runTroupe(["--config", config, "replay", "--json", runId], { cwd: dir, env });
    return replay.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string; data: Record<string, unknown> });
  };
  return { tmux, replayed };
}

const screenLines = (tmux: Tmux) =>
  tmux
    .history()
    .split("\n")
    .map((line) => line.trimEnd());

describe("a question closed without an answer", () => {
  it("says maxWaitMs denied it when the time for waiting on people runs out, and the run goes on", async () => {
    const { tmux, replayed } = await askingRun("{ maxWaitMs: 1s }");
    await waitFor("the run to end", () => tmux.screen().includes("Could not write it."), 20_000);
    const lines = screenLines(tmux);
    const denied = lines.findIndex((line) => line.includes("✗ denied by maxWaitMs"));
    expect(lines[denied]).toBe(
      "  ✗ denied by maxWaitMs: nobody answered within the time the agent may wait for people (maxWaitMs 1000); go on without this call",
    );
    // The question gave way to the line that says why: nothing is glued to it.
    expect(lines.some((line) => line.startsWith(QUESTION))).toBe(false);
    const events = await replayed();
    expect(events.find((e) => e.type === "approval.decided")?.data).toMatchObject({
      callId: "call_write",
      approved: false,
      by: "maxWaitMs",
    });
  }, 60_000);

  it("says the agent stopped when the run is aborted at the question, and the log keeps it", async () => {
    const { tmux, replayed } = await askingRun("{}");
    tmux.keys("C-c");
    await waitFor("the closing line", () => tmux.history().includes("✗ closed without an answer"), 20_000);
    expect(screenLines(tmux)).toContain(
      "  ✗ closed without an answer: the agent stopped (aborted) before anyone answered",
    );
    await waitFor("the run to end", () => tmux.screen().includes("troupe resume"), 20_000);
    const events = await replayed();
    expect(events.find((e) => e.type === "approval.closed")?.data).toEqual({
      callId: "call_write",
      why: "the agent stopped (aborted) before anyone answered",
    });
  }, 60_000);

  it("on a daemon's run, the client's question gives way to the line saying the agent stopped", async () => {
    const model = await ScriptedModelServer.start([
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [
            { name: "write_file", arguments: { path: "notes.md", content: "hi\n" }, id: "call_write" },
          ],
        },
      },
    ]);
    cleanups.push(() => model.close());
    const h = await embeddedDaemon(
      {
        "config/troupe.yaml": `nats:\n  prefix: ${uniquePrefix()}\ndefaultAgent: coder\ndefaultModel: scripted\n`,
        "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [write_file]\n",
      },
      model.baseURL,
      cleanups,
    );
    await h.start();
    const tmux = Tmux.start(
      [process.execPath, TROUPE_BIN, ...h.cfg, "run", "--approval", "ask", "Write hi"],
      {
        cwd: h.dir,
        env: h.env,
        columns: 160,
        rows: 40,
      },
    );
    cleanups.push(() => tmux.kill());
    await waitFor("the question", () => tmux.screen().includes(QUESTION), 20_000);
    const runs = await runTroupe([...h.cfg, "runs", "--json"], { cwd: h.dir, env: h.env });
    const runId = /"(run-[^"]+)"/.exec(runs.stdout)?.[1] ?? "";
    expect((await runTroupe([...h.cfg, "abort", runId], { cwd: h.dir, env: h.env })).code).toBe(0);
    await waitFor("the closing line", () => tmux.history().includes("✗ closed without an answer"), 20_000);
    const lines = screenLines(tmux);
    expect(lines).toContain(
      "  ✗ closed without an answer: the agent stopped (aborted) before anyone answered",
    );
    expect(lines.some((line) => line.startsWith(QUESTION))).toBe(false);
  }, 60_000);
});
