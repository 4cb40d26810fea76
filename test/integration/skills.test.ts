import { afterEach, beforeEach, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { discoverSkills } from "../../src/skills/skills.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { skillFile as skill, testConfig } from "../support/config.js";

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;

beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree({
    "config/skills/deploy/SKILL.md": skill("deploy", "How to deploy the service.", "Run make deploy."),
    "config/skills/testing/SKILL.md": skill("testing", "How to run the tests.", "Run npm test."),
    "config/skills/broken/SKILL.md": "no frontmatter here\n",
    "ws/.troupe/skills/testing.md": skill(
      "testing",
      "How this project runs its tests.",
      "Run npm run test:all.",
    ),
  }));
});
afterEach(async () => {
  await server.close();
  dispose();
});

it("finds skills in the config and the workspace (the workspace wins), skipping broken ones", () => {
  const skills = discoverSkills([`${dir}/config/skills`, `${dir}/ws/.troupe/skills`]);
  expect([...skills.keys()].sort()).toEqual(["deploy", "testing"]);
  expect(skills.get("testing")?.description).toBe("How this project runs its tests.");
});

it("puts only the catalogue in the system prompt, loads a body on request, and keeps to the agent's skills", async () => {
  server.script(
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [
          { name: "load_skill", arguments: { name: "testing" } },
          { name: "load_skill", arguments: { name: "deploy" } },
        ],
      },
    },
    { match: { turn: 2 }, reply: { text: "ok" } },
  );
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "worker", description: "Works.", tools: ["load_skill"], skills: ["testing"] }],
  );
  config.dir = `${dir}/config`;
  const runtime = await new Runtime({ config, workspace: `${dir}/ws`, env: {} }).open();
  const output = await runtime.start({ task: "How do I test this?" }).done;
  expect(output.reason).toBe("done");
  const [first, second] = server.requests;
  const system = first?.body.messages[0]?.content ?? "";
  expect(system).toContain("- testing: How this project runs its tests.");
  expect(system).not.toContain("deploy");
  expect(system).not.toContain("npm run test:all");
  const results = second?.body.messages.filter((m) => m.role === "tool").map((m) => m.content) ?? [];
  expect(results[0]).toContain("Run npm run test:all.");
  expect(results[1]).toMatch(/^error:\n<tool_output source="load_skill">\nno skill "deploy"/);
  await runtime.close();
});
