import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, tempTree } from "../support/cli.js";
import { FILESYSTEM, FIXTURE } from "../support/mcp-servers.js";

let model: ScriptedModelServer;
const disposers: Array<() => void> = [];
beforeEach(async () => {
  model = await ScriptedModelServer.start();
});
afterEach(async () => {
  await model.close();
  for (const dispose of disposers.splice(0)) dispose();
});

/** A project dir: config/troupe.yaml with these lines, the agents given, and a workspace `ws/`. */
function project(troupeYaml: string[], agents: Record<string, string>, more: Record<string, string> = {}) {
  const files: Record<string, string> = {
    "config/troupe.yaml": ["defaultModel: scripted", ...troupeYaml, ""].join("\n"),
    "ws/.keep": "",
    ...more,
  };
  for (const [name, text] of Object.entries(agents)) files[`config/agents/${name}.yaml`] = text;
  const tree = tempTree(files, { trusted: true });
  disposers.push(tree.dispose);
  return tree.dir;
}

const env = () => ({ OPENAI_BASE_URL: model.baseURL, OPENAI_API_KEY: "" });
const q = (text: string) => JSON.stringify(text);
/** A stdio server that cannot start: it says why on stderr and exits. */
const BROKEN = [
  "  broken:",
  `    command: ${q(process.execPath)}`,
  `    args: ["-e", "console.error('boom: BROKEN_TOKEN is not set'); process.exit(1)"]`,
];
const FIXTURE_SERVER = ["  fixture:", `    command: ${q(process.execPath)}`, `    args: [${q(FIXTURE)}]`];

describe("an MCP server that does not start", () => {
  it("keeps the tools agents name, and the model is told why the server is not running; its stderr is in the log", async () => {
    const cwd = project(["defaultAgent: user", "mcpServers:", ...BROKEN], {
      user: "name: user\ndescription: Uses a broken server.\ntools: [broken__lookup, broken__*]\n",
    });
    model.script(
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [
            { name: "broken__lookup", arguments: { q: "a" } },
            { name: "broken__search", arguments: { q: "b" } },
          ],
        },
      },
      { match: { turn: 2 }, reply: { text: "The server is down." } },
    );
    const result = await runTroupe(["--log-level", "info", "run", "--local", "-w", "ws", "Look it up"], {
      cwd,
      env: env(),
    });
    expect(result.code).toBe(0);
    expect(model.requests[0]?.body.tools?.map((t) => t.function.name)).toContain("broken__lookup");
    const results = model.requests[1]?.body.messages.filter((m) => m.role === "tool").map((m) => m.content);
    const down =
      /^error: MCP server "broken" is not running: it exited as it started; (retrying in \d+ s|starting it now)$/m;
    expect(results).toEqual([expect.stringMatching(down), expect.stringMatching(down)]);
    const logged = result.stderr
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line));
    expect(logged).toContainEqual(
      expect.objectContaining({ server: "broken", stream: "stderr", msg: "boom: BROKEN_TOKEN is not set" }),
    );
    expect(logged).toContainEqual(
      expect.objectContaining({
        server: "broken",
        msg: expect.stringMatching(
          /^MCP server did not start: it exited as it started; its stderr ended: "boom: BROKEN_TOKEN is not set"; retrying in 1 s$/,
        ),
      }),
    );
  });

  it("troupe agents validate --check-servers and troupe doctor start each server once and say how it went", async () => {
    // The workspace is ws/, as a run's: the project dir holds the config and the data dir, and a server
    // of a config dir in the workspace would start in the data dir, which is in it too (refused).
    const cwd = project(["workspace: ws", "mcpServers:", ...FIXTURE_SERVER, ...BROKEN], {
      user: "name: user\ndescription: Uses both.\ntools: [fixture__*, broken__*]\n",
    });
    const validate = await runTroupe(["agents", "validate", "--check-servers"], { cwd, env: env() });
    const broken =
      'mcp broken: did not start: it exited as it started; its stderr ended: "boom: BROKEN_TOKEN is not set"';
    expect(validate.stdout.split("\n").slice(1)).toEqual([
      "ok   mcp fixture: 4 tools over stdio",
      `fail ${broken}`,
      "",
    ]);
    expect(validate.code).toBe(1);

    const doctor = await runTroupe(["doctor"], { cwd, env: env() });
    expect(doctor.stdout).toMatch(/^ok {3}mcp fixture +4 tools over stdio$/m);
    expect(doctor.stdout).toMatch(
      /^fix {2}mcp broken +did not start: it exited as it started; its stderr ended: "boom: BROKEN_TOKEN is not set"$/m,
    );
    expect(doctor.code).toBe(1);
  });
});

describe("troupe agents validate --check-servers and what an MCP tool may do", () => {
  it("names a tool that may change things listed by a subagent not marked readOnly, at file:line:col, with exit 2", async () => {
    const files = [
      "  files:",
      `    command: ${q(process.execPath)}`,
      `    args: [${q(FILESYSTEM)}, "\${workspace}"]`,
    ];
    const cwd = project(["workspace: ws", "mcpServers:", ...files], {
      lead: "name: lead\ndescription: Leads.\ntools: [files__write_file]\nsubagents: [scribe]\n",
      scribe: "name: scribe\ndescription: Writes.\ntools: [files__read_text_file, files__write_file]\n",
    });
    const validate = await runTroupe(["agents", "validate", "--check-servers"], { cwd, env: env() });
    expect(validate.stdout).toMatch(/^ok {3}mcp files: \d+ tools over stdio$/m);
    expect(validate.stderr).toBe(
      'config/agents/scribe.yaml:3:32: tools[1]: "files__write_file" may change things (the server "files" does not mark it readOnlyHint, and its entry in mcpServers lacks readOnly: true); a subagent (every subagent is read-only) is never given it: remove it, or mark the server readOnly if it only reads\n',
    );
    expect(validate.code).toBe(2);
  });
});

describe("MCP configs of other clients", () => {
  it("troupe run uses the servers of a Claude Code .mcp.json and a VS Code .vscode/mcp.json", async () => {
    const claudeCode = {
      mcpServers: { fixture: { type: "stdio", command: process.execPath, args: [FIXTURE], env: {} } },
    };
    const vscode = [
      "{",
      '  // VS Code\'s own file: servers under "servers", comments and trailing commas allowed.',
      '  "inputs": [],',
      '  "servers": {',
      // VS Code's name for the workspace, as such a file says it.
      `    "files": { "type": "stdio", "command": ${q(process.execPath)}, "args": [${q(FILESYSTEM)}, "\${workspaceFolder}"] },`,
      "  },",
      "}",
    ].join("\n");
    const cwd = project(
      ["defaultAgent: user", "mcpServersFrom: [../.mcp.json, ../.vscode/mcp.json]"],
      { user: "name: user\ndescription: Uses both.\ntools: [fixture__*, files__list_directory]\n" },
      {
        ".mcp.json": JSON.stringify(claudeCode, null, 2),
        ".vscode/mcp.json": vscode,
        "ws/hello.txt": "hi\n",
      },
    );
    model.script(
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [
            { name: "fixture__fail", arguments: { message: "from the fixture" } },
            { name: "files__list_directory", arguments: { path: "." } },
          ],
        },
      },
      { match: { turn: 2 }, reply: { text: "Both answered." } },
    );
    const result = await runTroupe(["run", "--local", "--approval", "yolo", "-w", "ws", "Use both"], {
      cwd,
      env: env(),
    });
    expect(result.stderr).toMatch(/✓ done · 2 turns · 2 tool calls/);
    expect(result.code).toBe(0);
    const results = model.requests[1]?.body.messages.filter((m) => m.role === "tool").map((m) => m.content);
    expect(results?.[0]).toContain("from the fixture");
    expect(results?.[1]).toContain("[FILE] hello.txt");
  });

  it("Cline's autoApprove runs those tools without asking, and a disabled server is not started", async () => {
    const marker = "started-by-disabled-server";
    const cwd = project(
      [
        "defaultAgent: user",
        "mcpServers:",
        ...FIXTURE_SERVER,
        "    autoApprove: [add_tool]",
        "    disabled: false",
        "    timeout: 60",
        "  off:",
        `    command: ${q(process.execPath)}`,
        `    args: ["-e", "require('fs').writeFileSync('${marker}', '')"]`,
        "    disabled: true",
      ],
      { user: "name: user\ndescription: Uses them.\ntools: [fixture__*, off__*]\n" },
    );
    model.script(
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [
            { name: "fixture__add_tool", arguments: {} },
            { name: "fixture__fail", arguments: { message: "x" } },
            { name: "off__anything", arguments: {} },
          ],
        },
      },
      { match: { turn: 2 }, reply: { text: "Done." } },
    );
    // No terminal: under "ask", what would be asked is denied.
    const result = await runTroupe(["run", "--local", "--approval", "ask", "-w", "ws", "Go"], {
      cwd,
      env: env(),
    });
    expect(result.code).toBe(0);
    expect(
      model.requests[0]?.body.tools?.map((t) => t.function.name).filter((n) => n.startsWith("off__")),
    ).toEqual([]);
    const results = model.requests[1]?.body.messages.filter((m) => m.role === "tool").map((m) => m.content);
    expect(results?.[0]).toContain("added");
    expect(results?.[1]).toMatch(/^error: denied by policy: no terminal to ask for approval/);
    expect(results?.[2]).toMatch(/^error: MCP server "off" is disabled \(disabled: true in its entry\)$/m);
    expect(existsSync(join(cwd, marker))).toBe(false);
    expect(existsSync(join(cwd, "ws", marker))).toBe(false);
  });
});
