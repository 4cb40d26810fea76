import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { runTroupe, tempTree } from "../support/cli.js";

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

it("names what Troupe calls what other tools call apiKey and bash", async () => {
  const { dir, dispose } = tempTree({
    "config/troupe.yaml":
      "defaultModel: m\nproviders:\n  openai:\n    apiKey: sk-123\n    models:\n      m: {}\n",
    "config/agents/a.yaml": "name: a\ndescription: A.\ntools: [bash]\n",
  });
  cleanups.push(dispose);
  const key = await runTroupe(["--config", join(dir, "config"), "agents", "validate"], { cwd: dir });
  expect(key.code).toBe(2);
  expect(key.stderr).toContain(
    "config/troupe.yaml:4:5: providers.openai.apiKey: unknown key: a key is never written in troupe.yaml; set apiKeyEnv to the name of the environment variable that holds it",
  );
  const { dir: other, dispose: disposeOther } = tempTree({
    "config/troupe.yaml": "defaultModel: m\nproviders:\n  openai:\n    models:\n      m: {}\n",
    "config/agents/a.yaml": "name: a\ndescription: A.\ntools: [read_file, bash]\n",
  });
  cleanups.push(disposeOther);
  const tool = await runTroupe(["--config", join(other, "config"), "agents", "validate"], { cwd: other });
  expect(tool.code).toBe(2);
  expect(tool.stderr).toBe(
    'config/agents/a.yaml:3:20: tools[1]: unknown tool "bash" (did you mean "shell"? Troupe calls it so)\n',
  );
});

it("tells every problem in one pass, troupe.yaml's and each agent file's, and refuses a --config dir with no config in it", async () => {
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultModel: m\nprovders: {}\n",
    "config/agents/a.yaml": "name: a\ndescripton: A.\n",
    "empty/notes.txt": "not a config\n",
  });
  cleanups.push(dispose);
  const both = await runTroupe(["--config", join(dir, "config"), "agents", "validate"], { cwd: dir });
  expect(both.code).toBe(2);
  expect(both.stderr).toContain('config/troupe.yaml:2:1: provders: unknown key (did you mean "providers"?)');
  expect(both.stderr).toContain("config/agents/a.yaml:2:1: descripton: unknown key");
  const empty = await runTroupe(["--config", join(dir, "empty"), "agents", "list"], { cwd: dir });
  expect(empty.code).toBe(2);
  expect(empty.stderr).toMatch(/^\S*empty:1:1: no troupe\.yaml and no agents\/ in this directory: /);
  expect(empty.stderr.trim().split("\n")).toHaveLength(1);
});

it("troupe agents validate DIR checks a config dir as a config", async () => {
  const { dir, dispose } = tempTree({
    "proj/config/troupe.yaml": "defaultModel: m\nproviders:\n  openai:\n    models:\n      m: {}\n",
    "proj/config/agents/a.yaml": "name: a\ndescription: A.\ntools: [read_file]\n",
  });
  cleanups.push(dispose);
  const result = await runTroupe(["agents", "validate", join(dir, "proj", "config")], { cwd: dir });
  expect(result.stderr).toBe("");
  expect(result.stdout).toBe(`ok: 1 agent (a) in ${join(dir, "proj", "config")}\n`);
  expect(result.code).toBe(0);
});
