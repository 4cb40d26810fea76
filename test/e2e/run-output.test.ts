import { afterEach, beforeEach, expect, it } from "vitest";
import type { Envelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, tempTree } from "../support/cli.js";

/* `troupe run` of an agent with an `output` schema in its YAML: the answer parsed in --json, the exit code when it does not fit. */

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree(
    {
      "config/troupe.yaml": "defaultAgent: critic\ndefaultModel: scripted\n",
      "config/agents/critic.yaml": [
        "name: critic",
        "description: Rates.",
        "output:",
        "  type: object",
        "  properties: { stars: { type: integer } }",
        "  required: [stars]",
        "",
      ].join("\n"),
      "ws/a.txt": "alpha\n",
    },
    { trusted: true },
  ));
});
afterEach(async () => {
  await server.close();
  dispose();
});

const run = (...args: string[]) =>
  runTroupe(["--config", "config", "run", "--local", "-w", "ws", ...args], {
    cwd: dir,
    env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "" },
  });

it("--json carries the answer parsed in agent.stopped; an answer that never fits exits 1, output_invalid", async () => {
  server.script({ reply: { text: '{"stars": 4}' } });
  const fits = await run("--json", "rate it");
  expect(fits.code).toBe(0);
  const stopped = fits.stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Envelope)
    .find((e) => e.type === "agent.stopped");
  expect(stopped?.data).toMatchObject({ reason: "done", output: { stars: 4 } });

  server.script({ reply: { text: "four" }, times: 2 });
  const never = await run("rate it");
  expect(never.code).toBe(1);
  expect(`${never.stdout}${never.stderr}`).toContain(
    "the answer does not fit the output schema (it is not JSON",
  );
  expect(never.stderr).toContain("output_invalid");
  expect(never.stderr).toContain("troupe: the answer does not fit the output schema: it is not JSON");
});
