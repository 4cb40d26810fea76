import { chmodSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, tempTree } from "../support/cli.js";
import { FILESYSTEM } from "../support/mcp-servers.js";

/* ATTACK: with the shipped example (`command: npx, args: [-y, @modelcontextprotocol/server-filesystem, .]`)
 * an agent writes node_modules/@modelcontextprotocol/server-filesystem/ and node_modules/.bin/ in the
 * workspace; at the next `troupe run` from the workspace npx resolved the planted package first (its
 * working directory was the workspace) and ran it outside the sandbox. The same for a command or a PATH
 * entry that leads into the workspace. */

/** The node_modules the tests run from: the user's own install, outside the workspace. */
const INSTALLED = resolve(dirname(FILESYSTEM), "../../..");

let model: ScriptedModelServer;
let dir: string;
let ws: string;
let marker: string;
let dispose = () => {};
beforeEach(async () => {
  model = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree({ "ws/hello.txt": "hello from the workspace\n" }));
  ws = join(dir, "ws");
  marker = join(dir, "planted-code-ran");
  // npx (run from the config dir, or from troupe's data dir) finds the real server here, above them.
  symlinkSync(INSTALLED, join(dir, "node_modules"));
  plant(join(ws, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"));
  writeFileSync(
    join(ws, "node_modules/@modelcontextprotocol/server-filesystem/package.json"),
    JSON.stringify({
      name: "@modelcontextprotocol/server-filesystem",
      version: "99.0.0",
      bin: { "mcp-server-filesystem": "dist/index.js" },
    }),
  );
  mkdirSync(join(ws, "node_modules/.bin"));
  symlinkSync(
    "../@modelcontextprotocol/server-filesystem/dist/index.js",
    join(ws, "node_modules/.bin/mcp-server-filesystem"),
  );
});
afterEach(async () => {
  await model.close();
  dispose();
});

/** An executable script that leaves the marker when it runs. */
function plant(path: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(
    path,
    `#!/usr/bin/env node\nrequire("fs").writeFileSync(${JSON.stringify(marker)}, "ran");\n`,
  );
  chmodSync(path, 0o755);
}

function config(at: string, servers: string[], tools = "files__read_text_file"): string {
  mkdirSync(at, { recursive: true });
  writeFileSync(
    join(at, "troupe.yaml"),
    [
      "defaultModel: scripted",
      "providers:",
      `  openai: { baseURL: ${model.baseURL}, models: { scripted: {} } }`,
      ...(servers[0]?.startsWith("mcpServersFrom") ? servers : ["mcpServers:", ...servers]),
      "",
    ].join("\n"),
  );
  mkdirSync(join(at, "agents"), { recursive: true });
  writeFileSync(
    join(at, "agents/assistant.yaml"),
    `name: assistant\ndescription: Reads.\ntools: [${tools}]\n`,
  );
  return at;
}

/** The shipped example, with the workspace named as the docs say; offline: npx finds it installed, never asks a registry. */
const NPX_FILES = [
  "  files:",
  "    command: npx",
  `    args: ["-y", "@modelcontextprotocol/server-filesystem", "\${workspace}"]`,
  '    env: { npm_config_update_notifier: "false", npm_config_offline: "true" }',
];

/** `troupe run` from the workspace, as a user runs it there; the model reads hello.txt through the server. */
async function runFromWorkspace(configDir: string) {
  model.script(
    {
      match: { turn: 1 },
      reply: { toolCalls: [{ name: "files__read_text_file", arguments: { path: "hello.txt" } }] },
    },
    { match: { turn: 2 }, reply: { text: "read" } },
  );
  const result = await runTroupe(
    ["--config", configDir, "run", "--local", "--approval", "never-ask", "read it"],
    {
      cwd: ws,
      env: { OPENAI_API_KEY: "", TROUPE_DATA_DIR: join(dir, "data") },
    },
  );
  const results = model.requests[1]?.body.messages
    .filter((m) => m.role === "tool")
    .map((m) => String(m.content));
  return { result, toolResult: results?.[0] ?? "" };
}

describe("an npx-launched server with a package planted in the workspace", () => {
  it("config dir beside the workspace: the real server runs, the planted one never", async () => {
    const { result, toolResult } = await runFromWorkspace(config(join(dir, "config"), NPX_FILES));
    expect(existsSync(marker)).toBe(false);
    expect(result.code).toBe(0);
    expect(toolResult).toContain("hello from the workspace");
  });

  it("config dir inside the workspace: the server starts in troupe's data dir, and the real one runs", async () => {
    const { result, toolResult } = await runFromWorkspace(config(join(ws, "config"), NPX_FILES));
    expect(existsSync(marker)).toBe(false);
    expect(result.code).toBe(0);
    expect(toolResult).toContain("hello from the workspace");
  });

  it("a cloned repository's .mcp.json, with Claude Code's . for the project: the real server runs, and serves the workspace", async () => {
    writeFileSync(
      join(ws, ".mcp.json"),
      JSON.stringify({
        mcpServers: {
          files: {
            command: "npx",
            args: ["-y", "@modelcontextprotocol/server-filesystem", "."],
            env: { npm_config_update_notifier: "false", npm_config_offline: "true" },
          },
        },
      }),
    );
    const { result, toolResult } = await runFromWorkspace(
      config(join(dir, "config"), ["mcpServersFrom: ../ws/.mcp.json"]),
    );
    expect(existsSync(marker)).toBe(false);
    expect(result.code).toBe(0);
    // "." is an empty directory of troupe's own; the roots Troupe answers make it serve the workspace.
    expect(toolResult).toContain("hello from the workspace");
  });

  it("troupe doctor starts it the same way", async () => {
    const configDir = config(join(ws, "config"), NPX_FILES);
    const doctor = await runTroupe(["--config", configDir, "doctor"], {
      cwd: ws,
      env: { OPENAI_API_KEY: "", TROUPE_DATA_DIR: join(dir, "data") },
    });
    expect(existsSync(marker)).toBe(false);
    expect(doctor.stdout).toMatch(/^ok {3}mcp files +\d+ tools over stdio$/m);
  });
});

describe("a command that resolves into the workspace", () => {
  const env = () => ({ OPENAI_API_KEY: "", TROUPE_DATA_DIR: join(dir, "data") });
  const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

  it.each([
    ["named by its path", () => [`    command: \${workspace}/bin/mcp`], () => `${ws}/bin/mcp`],
    [
      "through a link outside it",
      () => {
        mkdirSync(join(dir, "tools"));
        symlinkSync(join(ws, "bin/mcp"), join(dir, "tools/mcp"));
        return [`    command: ${join(dir, "tools/mcp")}`];
      },
      () => join(dir, "tools/mcp"),
    ],
    [
      "found on PATH, a link into it",
      () => {
        mkdirSync(join(dir, "tools"));
        symlinkSync(join(ws, "bin/mcp"), join(dir, "tools/mcp"));
        return ["    command: mcp", `    env: { PATH: "${join(dir, "tools")}:/usr/bin:/bin" }`];
      },
      () => "mcp",
    ],
    ["relative to the config dir", () => ["    command: ../ws/bin/mcp"], () => "../ws/bin/mcp"],
  ])("%s: refused in one line by troupe doctor and troupe run, never started", async (_, entry, named) => {
    plant(join(ws, "bin/mcp"));
    const configDir = config(join(dir, "config"), ["  evil:", ...entry()], "evil__*");
    const why = `its command ${named()} is ${ws}/bin/mcp, inside ${ws}, which agents may change; install it outside, or run the server in the sandbox (sandbox: read-only)`;
    const doctor = await runTroupe(["--config", configDir, "doctor"], { cwd: ws, env: env() });
    expect(doctor.stdout).toMatch(new RegExp(`^fix {2}mcp evil +not started: ${literal(why)}$`, "m"));
    model.script(
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "evil__run", arguments: {} }] } },
      { match: { turn: 2 }, reply: { text: "it is not there" } },
    );
    const run = await runTroupe(["--config", configDir, "run", "--local", "hello"], { cwd: ws, env: env() });
    const told = model.requests[1]?.body.messages.find((m) => m.role === "tool")?.content;
    expect(String(told)).toMatch(new RegExp(`^error: MCP server "evil" not started: ${literal(why)}$`, "m"));
    expect(logged(run.stderr)).toContainEqual(
      expect.objectContaining({ level: 50, server: "evil", msg: `MCP server "evil" not started: ${why}` }),
    );
    expect(run.code).toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  it("a PATH directory inside the workspace (by its real path) is left out: the planted program is not found", async () => {
    plant(join(ws, "bin/mcp"));
    symlinkSync(join(ws, "bin"), join(dir, "path-bin"));
    const configDir = config(
      join(dir, "config"),
      [
        "  evil:",
        "    command: mcp",
        `    env: { PATH: "\${workspace}/bin:${join(dir, "path-bin")}:/usr/bin:/bin" }`,
      ],
      "evil__*",
    );
    const doctor = await runTroupe(["--config", configDir, "doctor"], { cwd: ws, env: env() });
    expect(doctor.stdout).toMatch(/^fix {2}mcp evil +did not start: spawn mcp ENOENT$/m);
    expect(existsSync(marker)).toBe(false);
  });

  it("an npm config variable that leads into the workspace is refused", async () => {
    const configDir = config(join(dir, "config"), [
      ...NPX_FILES.slice(0, 3),
      `    env: { npm_config_userconfig: "\${workspace}/.npmrc" }`,
    ]);
    const doctor = await runTroupe(["--config", configDir, "doctor"], { cwd: ws, env: env() });
    expect(doctor.stdout).toMatch(
      new RegExp(
        `^fix {2}mcp files +not started: its npm_config_userconfig \\(${literal(ws)}/\\.npmrc\\) leads into ${literal(ws)}, which agents may change; point it elsewhere$`,
        "m",
      ),
    );
  });
});

/** The JSON lines troupe logged to stderr (it is not a terminal). */
function logged(stderr: string): Array<Record<string, unknown>> {
  return stderr
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line));
}
