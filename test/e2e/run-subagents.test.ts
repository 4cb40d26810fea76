import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import type { Envelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { onTerminal, runTroupe, tempTree } from "../support/cli.js";

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree(
    {
      "config/troupe.yaml": "defaultAgent: lead\ndefaultModel: scripted\n",
      "config/agents/lead.yaml":
        "name: lead\ndescription: Leads.\ntools: [read_file]\nsubagents: [explorer, reviewer]\n",
      "config/agents/explorer.yaml":
        "name: explorer\ndescription: Finds things.\nreadOnly: true\ntools: [grep, read_file]\n",
      "config/agents/reviewer.yaml":
        "name: reviewer\ndescription: Reviews.\nreadOnly: true\ntools: [read_file]\n",
      "ws/app.js": "export const port = 80;\n",
    },
    { trusted: true },
  ));
});
afterEach(async () => {
  await server.close();
  dispose();
});

it("troupe run --json: a parent spawns two subagents in parallel and answers from their results", async () => {
  const as = (name: string, turn: number) => ({ system: `"${name}"`, turn });
  server.script(
    {
      match: as("lead", 1),
      reply: {
        toolCalls: [
          { name: "subagent_explorer", arguments: { task: "Where is the port set?" } },
          {
            name: "subagent_reviewer",
            arguments: { task: "Is port 80 a problem?", context: "app.js sets it" },
          },
        ],
      },
    },
    {
      match: as("explorer", 1),
      reply: { toolCalls: [{ name: "grep", arguments: { pattern: "port" } }], delayMs: 200 },
    },
    { match: as("explorer", 2), reply: { text: "app.js:1 sets port = 80", delayMs: 100 } },
    { match: as("reviewer", 1), reply: { text: "Port 80 needs root; use 8080.", delayMs: 250 } },
    { match: as("lead", 2), reply: { text: "app.js:1 sets port 80, which needs root: use 8080." } },
  );
  const result = await runTroupe(["run", "--local", "--json", "-w", "ws", "Check the port"], {
    cwd: dir,
    env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "" },
  });
  expect(result.code).toBe(0);
  server.assertComplete();
  const events = result.stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Envelope);
  const lead = events[0]?.agentId;
  const spawned = events
    .filter((e) => e.type === "subagent.spawned")
    .map((e) => e.data as { childId: string; name: string; task: string });
  expect(spawned.map((s) => s.name)).toEqual(["explorer", "reviewer"]);
  expect(spawned[1]?.task).toBe(
    "Is port 80 a problem?\n\nContext from the agent that asked:\napp.js sets it",
  );
  // Both children were running at once.
  const [explorer, reviewer] = spawned.map((s) => events.filter((e) => e.agentId === s.childId));
  const startOf = (list: Envelope[] | undefined) => list?.[0]?.ts ?? 0;
  const endOf = (list: Envelope[] | undefined) => list?.at(-1)?.ts ?? 0;
  expect(startOf(reviewer)).toBeLessThan(endOf(explorer));
  expect(startOf(explorer)).toBeLessThan(endOf(reviewer));
  expect(explorer?.every((e) => e.parentId === lead)).toBe(true);
  // The parent answered from both results.
  const toolResults =
    server.requests
      .at(-1)
      ?.body.messages.filter((m) => m.role === "tool")
      .map((m) => m.content) ?? [];
  expect(toolResults[0]).toContain("app.js:1 sets port = 80");
  expect(toolResults[1]).toContain("Port 80 needs root; use 8080.");
  const stopped = events.filter((e) => e.type === "agent.stopped" && e.agentId === lead).at(-1);
  expect(stopped?.data).toMatchObject({
    reason: "done",
    result: "app.js:1 sets port 80, which needs root: use 8080.",
  });
});

it("on a terminal, shows each subagent at work with its state and time while the parent waits on them", async () => {
  const as = (name: string, turn: number) => ({ system: `"${name}"`, turn });
  server.script(
    {
      match: as("lead", 1),
      reply: {
        toolCalls: [
          { name: "subagent_explorer", arguments: { task: "Where is the port set?" } },
          { name: "subagent_reviewer", arguments: { task: "Is port 80 a problem?" } },
        ],
      },
    },
    { match: as("explorer", 1), reply: { text: "app.js:1 sets port = 80", delayMs: 1500 } },
    { match: as("reviewer", 1), reply: { text: "Port 80 needs root.", delayMs: 1500 } },
    { match: as("lead", 2), reply: { text: "Use 8080." } },
  );
  const run = onTerminal(["--config", join(dir, "config"), "run", "--local", "-w", "ws", "Check the port"], {
    cwd: dir,
    env: {
      ...process.env,
      OPENAI_BASE_URL: server.baseURL,
      OPENAI_API_KEY: "",
      TROUPE_DATA_DIR: join(dir, ".data"),
    },
  });
  expect(await run.exit).toBe(0);
  // The spinner's line names both children, their state, and a time that grows.
  const frames = run.output().match(/[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] explorer \S+ \d+\.\d s · reviewer \S+ \d+\.\d s/g) ?? [];
  expect(frames.length).toBeGreaterThan(5);
  expect(frames.some((f) => /explorer callingModel/.test(f))).toBe(true);
  const seconds = frames.map((f) => Number(/explorer \S+ (\d+\.\d) s/.exec(f)?.[1]));
  expect(Math.max(...seconds)).toBeGreaterThan(Math.min(...seconds));
});
