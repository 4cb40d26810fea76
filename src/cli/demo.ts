import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { loadConfig } from "../config/load.js";
import type { Logger } from "../log.js";
import { resolveInWorkspace } from "../safety/workspace-guard.js";
import { ScriptedModelServer } from "../testing/scripted-model-server.js";
import { defineTool, type Tool } from "../tools/tool.js";
import { runTask } from "./run.js";

const TASK = "Look at this project, save a short note about it, and check that it is in order.";

/**
 * A canned run that shows the machinery with nothing configured: the shipped `assistant` agent on a
 * scripted model served over real HTTP, in a scratch workspace. It reads two files and runs two
 * subagents (explorer and reviewer, child actors with budgets of their own) all at once, writes a note
 * (allowed by the auto-edit policy) and asks to run a check (approval: on a terminal you answer it;
 * without one it is denied, and the agent carries on).
 */
export async function runDemo(flags: { json?: boolean }, log: Logger): Promise<number> {
  const workspace = mkdtempSync(join(tmpdir(), "troupe-demo-"));
  // Gone however the demo ends: also when its reader leaves (`| head`) and troupe exits at once.
  const removeWorkspace = () => rmSync(workspace, { recursive: true, force: true });
  process.once("exit", removeWorkspace);
  writeFileSync(join(workspace, "README.md"), "# greeter\n\nA tiny project that greets people.\n");
  mkdirSync(join(workspace, "src"));
  writeFileSync(
    join(workspace, "src", "greet.js"),
    'export const greet = (name) => "Hello, " + name + "!";\n',
  );
  const server = await ScriptedModelServer.start(demoScript());
  try {
    const config = loadConfig({ env: {} });
    const provider = config.troupe.providers.openai;
    if (provider) provider.baseURL = server.baseURL;
    const assistant = config.agents.get("assistant")?.definition;
    if (assistant) assistant.tools = [...assistant.tools, "save_note", "run_checks"];
    if (!flags.json)
      process.stderr.write(`troupe demo: a scripted model at ${server.baseURL}, workspace ${workspace}\n\n`);
    return await runTask(config, TASK, { agent: "assistant", approval: "auto-edit", json: flags.json }, log, {
      workspace,
      env: {},
      tools: DEMO_TOOLS,
    });
  } finally {
    await server.close();
    removeWorkspace();
    process.off("exit", removeWorkspace);
  }
}

function demoScript() {
  const as = (name: string, turn: number) => ({ system: `"${name}"`, turn });
  return [
    {
      match: as("assistant", 1),
      reply: {
        text: "I'll look around, and ask an explorer and a reviewer at the same time.",
        toolCalls: [
          { name: "list_dir", arguments: { path: "." } },
          { name: "read_file", arguments: { path: "README.md" } },
          {
            name: "subagent_explorer",
            arguments: { task: "Where is greet defined, and what does it return?" },
          },
          {
            name: "subagent_reviewer",
            arguments: { task: "Review src/greet.js for bugs and missing tests." },
          },
        ],
        delayMs: 300,
      },
    },
    {
      match: as("explorer", 1),
      reply: { toolCalls: [{ name: "grep", arguments: { pattern: "greet" } }], delayMs: 400 },
    },
    {
      match: as("explorer", 2),
      reply: { text: 'greet is defined in src/greet.js:1 and returns "Hello, <name>!".', delayMs: 400 },
    },
    {
      match: as("reviewer", 1),
      reply: { toolCalls: [{ name: "read_file", arguments: { path: "src/greet.js" } }], delayMs: 400 },
    },
    {
      match: as("reviewer", 2),
      reply: { text: 'Sound, but nothing tests it: add a test for greet("x").', delayMs: 400 },
    },
    {
      match: as("assistant", 2),
      reply: {
        text: "A one-module greeter; the reviewer wants a test. Saving a note, then checking the sources.",
        toolCalls: [
          {
            name: "save_note",
            arguments: { text: "greeter: src/greet.js exports greet(name); it needs a test." },
          },
          { name: "run_checks", arguments: {} },
        ],
        delayMs: 300,
      },
    },
    {
      match: as("assistant", 3),
      reply: {
        text: "Done. greet lives in src/greet.js (found by the explorer); the reviewer found no bug but no test either. I saved a note to notes/troupe.md; the check ran only if you allowed it.",
        chunks: 16,
        chunkDelayMs: 40,
        delayMs: 300,
      },
    },
  ];
}

const DEMO_TOOLS: Tool[] = [
  defineTool({
    name: "save_note",
    description: "Append a line to notes/troupe.md in the workspace.",
    effect: "write",
    parameters: z.object({ text: z.string() }),
    async execute({ text }, { workspace }) {
      const path = resolveInWorkspace(workspace, "notes/troupe.md");
      mkdirSync(join(workspace, "notes"), { recursive: true });
      writeFileSync(path, `${text}\n`, { flag: "a" });
      return { ok: true, output: "saved to notes/troupe.md" };
    },
  }) as Tool,
  defineTool({
    name: "run_checks",
    description: "Check the project's sources: every .js file under src/ must be non-empty.",
    effect: "execute",
    parameters: z.object({}),
    async execute(_args, { workspace }) {
      const files = (await readdir(join(workspace, "src"))).filter((f) => f.endsWith(".js"));
      const empty = [];
      for (const file of files)
        if ((await readFile(join(workspace, "src", file), "utf8")).trim() === "") empty.push(file);
      return empty.length
        ? {
            ok: false,
            output: "",
            error: `empty: ${empty.join(", ")}`,
            recoveryHint: "fill or remove the empty files",
          }
        : { ok: true, output: `${files.length} source file(s) checked, all non-empty` };
    },
  }) as Tool,
];
