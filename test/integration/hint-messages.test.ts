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
