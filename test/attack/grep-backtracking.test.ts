import { afterEach, beforeEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, tempTree } from "../support/cli.js";

/* ATTACK: a grep pattern that backtracks without end (`(a+)+$` on a line of forty a's and a b) held
 * the agent's thread: the run never ended, and Ctrl-C, budgets and heartbeats stopped with it. The
 * pattern now runs on a thread of its own within 5 s; past that the model is told to simplify it,
 * and the run goes on. */

let server: ScriptedModelServer;
const cleanups: Array<() => unknown> = [];
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  cleanups.push(() => server.close());
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it("a pattern that backtracks without end is stopped in seconds, and the run goes on", async () => {
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultAgent: coder\ndefaultModel: scripted\n",
    "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [grep, read_file]\n",
    "ws/big.txt": `${"a".repeat(40)}b\n`,
    "ws/notes.txt": "still here\n",
  });
  cleanups.push(dispose);
  server.script(
    {
      match: { turn: 1 },
      reply: { toolCalls: [{ name: "grep", arguments: { pattern: "(a+)+$", path: "big.txt" } }] },
    },
    { match: { turn: 2 }, reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] } },
    { match: { turn: 3 }, reply: { text: "done" } },
  );
  const result = await runTroupe(["--config", "config", "run", "--local", "-w", "ws", "--json", "look"], {
    cwd: dir,
    env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "" },
  });
  expect(result.code, result.stderr).toBe(0);
  const results = server.requests
    .at(-1)
    ?.body.messages.filter((m) => m.role === "tool")
    .map((m) => String(m.content));
  expect(results?.[0]).toMatch(/the pattern took longer than 5 s and was stopped/);
  expect(results?.[1]).toContain("still here");
}, 60_000);
