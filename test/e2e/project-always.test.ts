import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, TROUPE_BIN, tempTree } from "../support/cli.js";
import { Tmux } from "../support/tmux.js";
import { waitFor } from "../support/wait.js";

/* The terminal's `A` (always, in this project): the allow rule is written to the project's trusted
 * troupe.yaml, its comments kept, and trusted with it, so the next run neither asks about the
 * command nor asks to trust the config again; `troupe permissions` lists it. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it("A at the prompt writes the rule, and the next run runs the command without asking", async () => {
  const model = await ScriptedModelServer.start([
    {
      match: { lastUser: "List the files", turn: 1 },
      reply: { toolCalls: [{ name: "shell", arguments: { command: "ls -a" } }] },
    },
    { match: { lastUser: "List the files", turn: 2 }, reply: { text: "Listed." } },
    {
      match: { lastUser: "List them again", turn: 1 },
      reply: { toolCalls: [{ name: "shell", arguments: { command: "ls -l README.md" } }] },
    },
    { match: { lastUser: "List them again", turn: 2 }, reply: { text: "Listed again." } },
  ]);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree(
    {
      "config/troupe.yaml":
        "# the project's own config\ndefaultAgent: coder\ndefaultModel: scripted # for tests\n",
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
      "ws/README.md": "# a project\n",
    },
    { trusted: true },
  );
  cleanups.push(dispose);
  const env = {
    ...process.env,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  };
  const run = ["run", "--local", "-w", "ws", "--approval", "ask"];
  const tmux = Tmux.start([process.execPath, TROUPE_BIN, ...run, "List the files"], {
    cwd: dir,
    env,
    columns: 200,
    rows: 30,
  });
  cleanups.push(() => tmux.kill());
  await waitFor(
    "the question",
    () => tmux.screen().includes("A = always in this project (shell(ls *)):"),
    20_000,
  );
  tmux.keys("A", "Enter");
  await waitFor("the run's end", () => tmux.screen().includes("Listed."), 20_000);
  expect(tmux.history()).toContain('permissions.allow "shell(ls *)" saved in');
  expect(readFileSync(join(dir, "config/troupe.yaml"), "utf8")).toBe(
    "# the project's own config\ndefaultAgent: coder\ndefaultModel: scripted # for tests\npermissions:\n  allow:\n    - shell(ls *)\n",
  );

  // No terminal: a question would be denied. The rule runs the command unasked, and the config
  // is still trusted (the user made the change).
  const again = await runTroupe([...run, "List them again"], { cwd: dir, env });
  expect(again.stderr).not.toContain("changed since you trusted it");
  expect(again.code).toBe(0);
  const results = model.requests.at(-1)?.body.messages.filter((m) => m.role === "tool") ?? [];
  expect(results[0]?.content).toContain("README.md");
  expect(results[0]?.content).not.toContain("denied");

  const listed = await runTroupe(["permissions"], { cwd: dir, env });
  expect(listed.stdout).toMatch(/^config\/troupe\.yaml:6\s+allow\s+shell\(ls \*\)$/m);
  model.assertComplete();
});
