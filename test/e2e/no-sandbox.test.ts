import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, tempTree } from "../support/cli.js";

/* A machine without a sandbox, as a user meets it: told once, commands asked for, never run unasked. */

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree(
    {
      "config/troupe.yaml": "defaultAgent: worker\ndefaultModel: scripted\napproval:\n  policy: auto-edit\n",
      "config/agents/worker.yaml": "name: worker\ndescription: Works.\ntools: [shell]\n",
      "ws/a.txt": "alpha\n",
    },
    { trusted: true },
  ));
});
afterEach(async () => {
  await server.close();
  dispose();
});

const NO_BWRAP = { TROUPE_BWRAP: "/nonexistent/bwrap" };

it("troupe doctor says the sandbox is missing and how to install it, and exits 1", async () => {
  const result = await runTroupe(["doctor"], { cwd: dir, env: NO_BWRAP });
  expect(result.code).toBe(1);
  const line = result.stdout.split("\n").find((l) => l.includes("sandbox"));
  expect(line).toMatch(
    /^fix +sandbox +TROUPE_BWRAP=\/nonexistent\/bwrap is not a program: install bubblewrap \(Debian\/Ubuntu: apt-get install bubblewrap/,
  );
  expect((await runTroupe(["doctor"], { cwd: dir })).stdout).toMatch(
    /^ok +sandbox +bubblewrap .* commands run confined$/m,
  );
});

it("troupe run says so in one line at start, and a command is asked for, so without a terminal denied", async () => {
  server.script(
    {
      match: { turn: 1 },
      reply: { toolCalls: [{ name: "shell", arguments: { command: "touch made.txt" } }] },
    },
    { match: { turn: 2 }, reply: { text: "carried on" } },
  );
  const result = await runTroupe(["run", "--local", "--workspace", "ws", "Make a file."], {
    cwd: dir,
    env: { ...NO_BWRAP, OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "" },
  });
  expect(result.code).toBe(0);
  expect(result.stdout).toContain("carried on");
  const warnings = result.stderr.split("\n").filter((line) => line.includes("no command sandbox"));
  expect(warnings).toHaveLength(1);
  expect(warnings[0]).toContain("apt-get install bubblewrap");
  expect(existsSync(join(dir, "ws/made.txt"))).toBe(false);
  const toolResult = String(server.requests[1]?.body.messages.at(-1)?.content);
  // The model is told it was the policy that said no: nobody was asked.
  expect(toolResult).toContain("denied by policy: no terminal to ask for approval");
  expect(toolResult).not.toContain("the user denied");
});
