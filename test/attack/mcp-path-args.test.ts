import { existsSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { loadConfig } from "../../src/config/load.js";
import type { ApprovalPolicy } from "../../src/config/policy-schemas.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { FILESYSTEM, FIXTURE } from "../support/mcp-servers.js";

/* ATTACK: Troupe checked a relative path argument against the workspace, the server resolved it
 * against its own root. With server-filesystem allowed on the workspace's parent,
 * read_text_file {path: "outside.txt"} returned the file beside the workspace and "home/.ssh/id_rsa"
 * a key, from a read-only subagent too; with autoApprove: [write_file] it wrote beside the workspace
 * under never-ask. */

const OUTSIDE = "CANARY-BESIDE-THE-WORKSPACE";
const KEY = "CANARY-OF-THE-SSH-KEY";

let model: ScriptedModelServer;
let dir: string;
let ws: string;
let dispose = () => {};
let runtime: Runtime | undefined;
beforeEach(async () => {
  model = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree({
    "outside.txt": `${OUTSIDE}\n`,
    "home/.ssh/id_rsa": `${KEY}\n`,
    "ws/README.md": "# project\n",
    "srv/.keep": "",
    "config/agents/lead.yaml":
      "name: lead\ndescription: Leads.\ntools: [files__*, fixture__save]\nsubagents: [reader]\n",
    "config/agents/reader.yaml":
      "name: reader\ndescription: Reads.\ntools: [files__read_text_file, files__list_allowed_directories]\nreadOnly: true\n",
  }));
  ws = join(dir, "ws");
  writeFileSync(
    join(dir, "config/troupe.yaml"),
    [
      "defaultModel: scripted",
      "providers:",
      `  openai: { baseURL: ${model.baseURL}, models: { scripted: {} } }`,
      "mcpServers:",
      // Allowed on the workspace's parent, as the attack had it.
      `  files: { command: ${process.execPath}, args: [${FILESYSTEM}, ${dir}], autoApprove: [write_file] }`,
      // Writes where it is told, relative to its own working directory (srv/, outside the workspace).
      `  fixture: { command: ${process.execPath}, args: [${FIXTURE}], cwd: ${join(dir, "srv")}, autoApprove: [save] }`,
      "",
    ].join("\n"),
  );
});
afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
  await model.close();
  dispose();
});

const as = (name: string) => ({ system: `"${name}"` });

/** Runs the lead under `approval`; what every tool result said, in every request. */
async function run(approval: ApprovalPolicy): Promise<string[]> {
  const config = loadConfig({ config: join(dir, "config"), env: {} });
  runtime = await new Runtime({ config, workspace: ws, env: {} }).open();
  await runtime.start({ task: "x", agent: "lead", approval }).done;
  return model.requests.flatMap((r) =>
    r.body.messages.filter((m) => m.role === "tool").map((m) => String(m.content)),
  );
}

const POLICIES: ApprovalPolicy[] = ["never-ask", "ask", "auto-edit", "yolo"];

const READS = [
  { name: "files__read_text_file", arguments: { path: "outside.txt" } },
  { name: "files__read_text_file", arguments: { path: "../outside.txt" } },
  { name: "files__read_text_file", arguments: { path: "home/.ssh/id_rsa" } },
];

describe("server-filesystem allowed on the workspace's parent", () => {
  it.each(POLICIES)("the lead under %s reads nothing beside the workspace", async (approval) => {
    model.script(
      { match: { ...as("lead"), turn: 1 }, reply: { toolCalls: READS } },
      { match: { ...as("lead"), turn: 2 }, reply: { text: "done" } },
    );
    const results = await run(approval);
    expect(results).toHaveLength(3);
    expect(results.join("\n")).not.toContain(OUTSIDE);
    expect(results.join("\n")).not.toContain(KEY);
  });

  it("a read-only subagent reads nothing beside the workspace", async () => {
    model.script(
      {
        match: { ...as("lead"), turn: 1 },
        reply: { toolCalls: [{ name: "subagent_reader", arguments: { task: "read them" } }] },
      },
      { match: { ...as("reader"), turn: 1 }, reply: { toolCalls: READS } },
      { match: { ...as("reader"), turn: 2 }, reply: { text: "read" } },
      { match: { ...as("lead"), turn: 2 }, reply: { text: "done" } },
    );
    const results = await run("never-ask");
    const child = model.requests.find(
      (r) =>
        String(r.body.messages[0]?.content).includes('"reader"') &&
        r.body.messages.some((m) => m.role === "tool"),
    );
    expect(child?.body.messages.filter((m) => m.role === "tool")).toHaveLength(3);
    expect(results.join("\n")).not.toContain(OUTSIDE);
    expect(results.join("\n")).not.toContain(KEY);
  });

  it.each(POLICIES)(
    "write_file, autoApproved, under %s writes nothing beside the workspace",
    async (approval) => {
      model.script(
        {
          match: { ...as("lead"), turn: 1 },
          reply: {
            toolCalls: [
              { name: "files__write_file", arguments: { path: "planted.txt", content: "planted" } },
              { name: "files__write_file", arguments: { path: "../planted-too.txt", content: "planted" } },
            ],
          },
        },
        { match: { ...as("lead"), turn: 2 }, reply: { text: "done" } },
      );
      await run(approval);
      expect(existsSync(join(dir, "planted.txt"))).toBe(false);
      expect(existsSync(join(dir, "planted-too.txt"))).toBe(false);
      // A relative path is the workspace's, as the model meant it.
      expect(readFileSync(join(ws, "planted.txt"), "utf8")).toBe("planted");
    },
  );

  it("is told the workspace is its only root: roots/list is answered with it", async () => {
    model.script(
      {
        match: { ...as("lead"), turn: 1 },
        reply: { toolCalls: [{ name: "files__list_allowed_directories", arguments: {} }] },
      },
      { match: { ...as("lead"), turn: 2 }, reply: { text: "done" } },
    );
    const [allowed] = await run("never-ask");
    expect(allowed?.split("\n").filter((line) => line.startsWith("/"))).toEqual([realpathSync(ws)]);
  });
});

it("a server that takes any path gets the workspace's: a relative one is sent resolved against it", async () => {
  model.script(
    {
      match: { ...as("lead"), turn: 1 },
      reply: {
        toolCalls: [{ name: "fixture__save", arguments: { text: "note", opts: { path: "note.txt" } } }],
      },
    },
    { match: { ...as("lead"), turn: 2 }, reply: { text: "done" } },
  );
  await run("never-ask");
  expect(existsSync(join(dir, "srv/note.txt"))).toBe(false);
  expect(readFileSync(join(ws, "note.txt"), "utf8")).toBe("note");
});
