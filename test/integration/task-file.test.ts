import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { onTerminal, runTroupe, tempTree } from "../support/cli.js";

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it("troupe run --file PATH takes the task from a file, and says in one line when it cannot", async () => {
  const model = await ScriptedModelServer.start([{ match: { turn: 1 }, reply: { text: "Read it." } }]);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `defaultModel: scripted\nproviders:\n  openai:\n    baseURL: ${model.baseURL}\n    models:\n      scripted: {}\n`,
    "config/agents/a.yaml": "name: a\ndescription: A.\n",
  });
  cleanups.push(dispose);
  const task = "Summarise the notes:\nline one\nline two\n";
  writeFileSync(join(dir, "task.md"), task);
  const cfg = ["--config", join(dir, "config")];
  const ran = await runTroupe([...cfg, "run", "--local", "--json", "--file", "task.md"], {
    cwd: dir,
    env: { OPENAI_API_KEY: "" },
  });
  expect(ran.code, ran.stderr).toBe(0);
  expect(JSON.stringify(model.requests[0]?.body.messages.at(-1))).toContain(
    JSON.stringify(task).slice(1, -1),
  );

  const missing = await runTroupe([...cfg, "run", "--local", "--file", "nope.md"], { cwd: dir });
  expect(missing.code).toBe(2);
  expect(missing.stderr).toBe("troupe: --file nope.md: no such file\n");
  const both = await runTroupe([...cfg, "run", "--local", "--file", "task.md", "hello"], { cwd: dir });
  expect(both.code).toBe(2);
  expect(both.stderr).toBe("troupe: give the task or --file, not both\n");
});

it("a run that stops short of done says, on a terminal, its id and how to go on", async () => {
  const model = await ScriptedModelServer.start([
    { match: {}, reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] }, times: 10 },
  ]);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `defaultModel: scripted\nproviders:\n  openai:\n    baseURL: ${model.baseURL}\n    models:\n      scripted: {}\n`,
    "config/agents/a.yaml": "name: a\ndescription: A.\ntools: [read_file]\nbudget:\n  maxTurns: 2\n",
    "notes.txt": "notes\n",
  });
  cleanups.push(dispose);
  const shown = onTerminal(["--config", join(dir, "config"), "run", "--local", "read the notes"], {
    cwd: dir,
    env: { ...process.env, TROUPE_DATA_DIR: join(dir, ".data"), OPENAI_API_KEY: "" },
  });
  cleanups.push(() => shown.child.kill("SIGKILL"));
  expect(await shown.exit).toBe(3);
  expect(shown.output()).toMatch(
    /troupe: run (run-[0-9a-z]{26}) stopped \(budget_exhausted\): troupe resume \1 goes on from there\r?\n/,
  );
});

it("a task that would fill more than half the model's window is refused up front with both sizes", async () => {
  const model = await ScriptedModelServer.start([{ match: {}, reply: { text: "never asked" } }]);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `defaultModel: scripted\nproviders:\n  openai:\n    baseURL: ${model.baseURL}\n    models:\n      scripted:\n        contextWindow: 2000\n`,
    "config/agents/a.yaml": "name: a\ndescription: A.\n",
  });
  cleanups.push(dispose);
  writeFileSync(join(dir, "task.md"), `Summarise these words: ${"lorem ipsum dolor sit amet ".repeat(400)}`);
  const refused = await runTroupe(["--config", join(dir, "config"), "run", "--local", "--file", "task.md"], {
    cwd: dir,
    env: { OPENAI_API_KEY: "" },
  });
  expect(refused.code).toBe(2);
  expect(refused.stderr).toMatch(
    /^troupe: the task is \d{4} tokens and scripted takes 2000 in all: put the text in a file in the workspace and name the file in the task\n$/,
  );
  expect(model.requests).toHaveLength(0);
});
