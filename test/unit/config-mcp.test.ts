import { afterEach, describe, expect, it } from "vitest";
import { secretsOf } from "../../src/actors/runtime-secrets.js";
import { type LoadOptions, loadConfig } from "../../src/config/load.js";
import { ConfigError } from "../../src/config/problems.js";
import { tempTree } from "../support/cli.js";

/**
 * Reads the config found in `cwd` as `agents validate` and `troupe trust` do, without asking whether
 * it is trusted: these tests are about what a config says; test/unit/config-trust.test.ts about trust.
 */
const readConfig = (options: LoadOptions) => loadConfig({ untrusted: "read", ...options });

const disposers: Array<() => void> = [];
afterEach(() => {
  for (const dispose of disposers.splice(0)) dispose();
});

/** A project: config/troupe.yaml with these lines, an agent using `tools`, and more files. */
function project(troupeYaml: string[], more: Record<string, string> = {}, tools = "[]") {
  const t = tempTree({
    "config/troupe.yaml": `${troupeYaml.join("\n")}\n`,
    "config/agents/a.yaml": `name: a\ndescription: A.\ntools: ${tools}\n`,
    ...more,
  });
  disposers.push(t.dispose);
  return t.dir;
}

function problems(cwd: string): string {
  try {
    readConfig({ cwd, env: {} });
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  return "";
}

describe("MCP server entries pasted from other clients", () => {
  it("take each client's keys with that client's meaning", () => {
    const cwd = project([
      "mcpServers:",
      // Claude Code's .mcp.json and VS Code: `type`.
      "  local: { type: stdio, command: node, args: [server.js] }",
      "  remote: { type: http, url: 'http://127.0.0.1:9/mcp', headers: { Authorization: Bearer x } }",
      "  streamed: { type: streamableHttp, url: 'http://127.0.0.1:9/mcp' }",
      "  legacy: { type: sse, url: 'http://127.0.0.1:9/sse' }",
      // Windsurf: `serverUrl`.
      "  wind: { serverUrl: 'http://127.0.0.1:9/mcp' }",
      // Cline: `disabled`, `autoApprove`, `timeout` in seconds.
      "  cline: { command: node, disabled: true, autoApprove: [read_file], timeout: 30 }",
      "  plain: { command: node }",
    ]);
    const servers = readConfig({ cwd, env: {} }).troupe.mcpServers;
    expect(servers.local).toMatchObject({ transport: "stdio", command: "node", args: ["server.js"] });
    expect(servers.remote).toMatchObject({
      transport: "http",
      url: "http://127.0.0.1:9/mcp",
      headers: { Authorization: "Bearer x" },
    });
    expect(servers.streamed?.transport).toBe("http");
    expect(servers.legacy).toMatchObject({ transport: "sse", url: "http://127.0.0.1:9/sse" });
    expect(servers.wind).toMatchObject({ transport: "http", url: "http://127.0.0.1:9/mcp" });
    expect(servers.cline).toMatchObject({ disabled: true, autoApprove: ["read_file"], timeoutMs: 30_000 });
    expect(servers.plain).toMatchObject({ disabled: false, autoApprove: [], timeoutMs: 60_000 });
    for (const server of Object.values(servers)) {
      expect(server).not.toHaveProperty("type");
      expect(server).not.toHaveProperty("serverUrl");
    }
  });

  it("take Cursor's envFile, relative to the config dir: its values are secrets the redactor hides", () => {
    const cwd = project(["mcpServers:", "  db: { command: node, envFile: ../.env.mcp }"], {
      ".env.mcp":
        "# for the db server\nDB_URL=postgres://db.internal/app\nexport API_SECRET='s3cr3t-value-1234'\n",
    });
    const config = readConfig({ cwd, env: {} });
    expect(config.troupe.mcpServers.db?.envFile).toBe("../.env.mcp");
    const redactor = secretsOf(config, {});
    expect(redactor.redact("at postgres://db.internal/app with s3cr3t-value-1234")).toBe(
      "at [REDACTED] with [REDACTED]",
    );
  });

  it("still refuse a key no client has, with the closest one, and say which keys clash", () => {
    expect(problems(project(["mcpServers:", "  x:", "    command: node", "    autoAprove: [a]"]))).toBe(
      'config/troupe.yaml:4:5: mcpServers.x.autoAprove: unknown key (did you mean "autoApprove"?)',
    );
    expect(
      problems(project(["mcpServers:", "  x:", "    url: 'http://a/mcp'", "    serverUrl: 'http://b/mcp'"])),
    ).toBe(
      'config/troupe.yaml:4:16: mcpServers.x.serverUrl: "serverUrl" is Windsurf\'s name for "url": keep one of them',
    );
    expect(problems(project(["mcpServers:", "  x:", "    type: stdio", "    url: 'http://a/mcp'"]))).toBe(
      'config/troupe.yaml:3:11: mcpServers.x.type: "type: stdio" is a local process: it needs "command", not "url"',
    );
    expect(problems(project(["mcpServers:", "  x:", "    type: sse", "    command: node"]))).toBe(
      'config/troupe.yaml:3:11: mcpServers.x.type: this "type" is a server over HTTP: it needs "url", not "command"',
    );
  });
});

const CLAUDE_CODE = `{
  "mcpServers": {
    "files": { "type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."], "env": {} },
    "docs": { "type": "http", "url": "https://example.invalid/mcp", "headers": { "X-Key": "k" } }
  }
}
`;
const VSCODE = `{
  // VS Code keeps its servers under "servers", and prompts for inputs.
  "inputs": [{ "type": "promptString", "id": "key", "description": "Key", "password": true }],
  "servers": {
    "memory": { "type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"] },
    "docs": { "type": "sse", "url": "https://example.invalid/sse" },
  }
}
`;

describe("mcpServersFrom", () => {
  it("adds the servers of a Claude Code .mcp.json and a VS Code mcp.json; troupe.yaml's own entry wins", () => {
    const cwd = project(
      [
        "mcpServersFrom: [../.mcp.json, ../.vscode/mcp.json]",
        "mcpServers:",
        "  files: { command: node, args: [mine.js] }",
      ],
      { ".mcp.json": CLAUDE_CODE, ".vscode/mcp.json": VSCODE },
      "[files__*, docs__*, memory__create_entities]",
    );
    const servers = readConfig({ cwd, env: {} }).troupe.mcpServers;
    expect(Object.keys(servers).sort()).toEqual(["docs", "files", "memory"]);
    expect(servers.files).toMatchObject({ command: "node", args: ["mine.js"] });
    expect(servers.memory).toMatchObject({ transport: "stdio", command: "npx" });
    // The later file wins over the earlier one.
    expect(servers.docs).toMatchObject({ transport: "sse", url: "https://example.invalid/sse" });
  });

  it("takes one path as well as a list", () => {
    const cwd = project(["mcpServersFrom: ../.mcp.json"], { ".mcp.json": CLAUDE_CODE });
    expect(Object.keys(readConfig({ cwd, env: {} }).troupe.mcpServers).sort()).toEqual(["docs", "files"]);
  });

  it("reports a mistake in the JSON file at its file:line:col, as in YAML", () => {
    const file = (text: string) => problems(project(["mcpServersFrom: ../.mcp.json"], { ".mcp.json": text }));
    expect(
      file('{\n  "mcpServers": {\n    "a": { "command": "node" }\n    "b": { "command": "node" }\n  }\n}\n'),
    ).toBe(".mcp.json:4:5: JSON syntax: a comma is missing before this");
    expect(file('{\n  "mcpServers": {\n    "a": { "command": "node", "args": "x.js" }\n  }\n}\n')).toBe(
      ".mcp.json:3:39: mcpServers.a.args: expected a list, got a string",
    );
    expect(file('{\n  "mcpServers": {\n    "a": { "command": "node", "arg": [] }\n  }\n}\n')).toBe(
      '.mcp.json:3:31: mcpServers.a.arg: unknown key (did you mean "args"?)',
    );
    expect(file('{ "mcp": {} }\n')).toBe(
      '.mcp.json:1:1: no "mcpServers" (Claude Code, Cursor, Claude Desktop) or "servers" (VS Code) in this file',
    );
    const missing = project(["mcpServersFrom: [../.mcp.json]"]);
    expect(problems(missing)).toMatch(
      /^config\/troupe\.yaml:1:18: mcpServersFrom\[0\]: no such file: \/.*\/\.mcp\.json$/,
    );
  });
});
