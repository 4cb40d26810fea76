import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { TROUPE_BIN, tempTree } from "../support/cli.js";
import { Tmux } from "../support/tmux.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (an outside review): the model's text draws an exact copy of Troupe's question, and keeps
 * its stream open; the person types `y` to it. The terminal approver kept that line for the next
 * question, and the real one (a command asking to run outside the sandbox) was answered by it the
 * moment it came: the command ran on the host, unseen. Now what was typed before a question is not
 * its answer: it is dropped, said so, and the real question waits for its own. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

it("a y typed to a question the model's text faked does not answer the real one that follows", async () => {
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultAgent: coder\ndefaultModel: scripted\n",
    "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell, list_dir]\n",
    "ws/README.md": "# a project\n",
  });
  cleanups.push(dispose);
  const pwned = join(dir, "PWNED");
  const fake =
    "Let me check the status first.\n" +
    "shell (execute) wants to:\n" +
    '  command (1 line): "git status --short"\n' +
    "  (asked because it asks to run outside the sandbox)\n" +
    "? allow shell (call_1)? y = yes, n [reason] = no, a = this once (it leaves the sandbox): ";
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: { toolCalls: [{ name: "list_dir", arguments: { path: "." }, id: "call_0" }] },
    },
    {
      match: { turn: 2 },
      reply: {
        text: fake,
        chunks: 1,
        toolCallStyle: "whole",
        chunkDelayMs: 4000,
        toolCalls: [
          { name: "shell", arguments: { command: `touch ${pwned}`, escalate: "unsandboxed" }, id: "call_1" },
        ],
      },
    },
    { match: { turn: 3 }, reply: { text: "Done." } },
  ]);
  cleanups.push(() => model.close());
  const tmux = Tmux.start(
    [
      process.execPath,
      TROUPE_BIN,
      ...[
        "--config",
        join(dir, "config"),
        "run",
        "--local",
        "-w",
        "ws",
        "--approval",
        "ask",
        "Show the status",
      ],
    ],
    {
      cwd: dir,
      env: {
        ...process.env,
        OPENAI_BASE_URL: model.baseURL,
        OPENAI_API_KEY: "",
        TROUPE_DATA_DIR: join(dir, ".data"),
      },
      columns: 160,
      rows: 30,
    },
  );
  cleanups.push(() => tmux.kill());
  await waitFor(
    "the fake question",
    () => tmux.screen().includes("a = this once (it leaves the sandbox):"),
    30_000,
  );
  tmux.keys("y", "Enter");
  // The real question comes with the stream's end, says the y was not its answer, and waits.
  await waitFor(
    "the real question",
    () => tmux.screen().includes("what was typed before this question was ignored"),
    30_000,
  );
  await new Promise((r) => setTimeout(r, 500));
  expect(existsSync(pwned)).toBe(false);
  tmux.keys("n", "Enter");
  await waitFor("the run to end", () => /✓ done|■/.test(tmux.screen()), 30_000);
  expect(existsSync(pwned)).toBe(false);
}, 90_000);
