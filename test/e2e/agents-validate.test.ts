import { afterEach, describe, expect, it } from "vitest";
import { BUILTIN_CONFIG_DIR, loadConfig } from "../../src/config/load.js";
import { runTroupe, tempTree, trustConfig } from "../support/cli.js";

const READ_TOOLS = new Set(["read_file", "list_dir", "glob", "grep", "load_skill"]);

const disposers: Array<() => void> = [];
afterEach(() => {
  for (const dispose of disposers.splice(0)) dispose();
});

const TROUPE_YAML = "defaultModel: gpt-4o-mini\n";

/** A config dir under `config/` with troupe.yaml and the given agent files. */
function project(agents: Record<string, string>, troupeYaml = TROUPE_YAML) {
  const files: Record<string, string> = { "config/troupe.yaml": troupeYaml };
  for (const [name, text] of Object.entries(agents)) files[`config/agents/${name}`] = text;
  const tree = tempTree(files);
  disposers.push(tree.dispose);
  return tree.dir;
}

async function validate(cwd: string, ...paths: string[]) {
  return runTroupe(["agents", "validate", ...paths], { cwd });
}

const explorer = `name: explorer
description: Finds things.
readOnly: true
tools: [read_file, grep]
`;

describe("troupe agents validate", () => {
  it("accepts a good config with exit 0", async () => {
    const cwd = project({
      "explorer.yaml": explorer,
      "coder.yaml": "name: coder\ndescription: Codes.\ntools: [read_file, shell]\nsubagents: [explorer]\n",
    });
    // Untrusted, it is checked all the same, with a note that nothing starts from it yet.
    const untrusted = await validate(cwd);
    expect(untrusted.code).toBe(0);
    expect(untrusted.stderr).toMatch(
      /^troupe: note: \.\/config is a config dir you have not trusted .*troupe trust config\n$/,
    );
    trustConfig(cwd);
    const result = await validate(cwd);
    expect(result.stderr).toBe("");
    expect(result.stdout).toMatch(/^ok: 2 agents \(coder, explorer\) in /);
    expect(result.code).toBe(0);
  });

  it("names an unknown tool with file:line:col and a suggestion", async () => {
    const cwd = project({
      "coder.yaml": [
        "# The coder.",
        "name: coder",
        "description: Writes code.",
        "budget:",
        "  maxTurns: 10",
        "tools:",
        "  - read_file",
        "  - write_file",
        "  - edt_file",
        "",
      ].join("\n"),
    });
    const result = await validate(cwd);
    expect(result.stderr).toBe(
      'config/agents/coder.yaml:9:5: tools[2]: unknown tool "edt_file" (did you mean "edit_file"?)\n',
    );
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
  });

  it("reports YAML syntax errors", async () => {
    const cwd = project({ "coder.yaml": "name: coder\ndescription: [unclosed\ntools: []\n" });
    const result = await validate(cwd);
    expect(result.stderr).toMatch(/^config\/agents\/coder\.yaml:\d+:\d+: YAML syntax: .+\n$/);
    expect(result.code).toBe(2);
  });

  it("reports a duplicate key in one file", async () => {
    const cwd = project({ "coder.yaml": "name: coder\ndescription: Codes.\nname: other\n" });
    const result = await validate(cwd);
    expect(result.stderr).toBe("config/agents/coder.yaml:3:1: duplicate key\n");
    expect(result.code).toBe(2);
  });

  it("reports wrong types and bad values at the value", async () => {
    const cwd = project({
      "coder.yaml":
        "name: coder\ndescription: Codes.\nbudget:\n  maxTurns: ten\n  maxCostUsd: -1\napproval: sometimes\n",
    });
    const result = await validate(cwd);
    expect(result.stderr.split("\n").filter(Boolean)).toEqual([
      "config/agents/coder.yaml:4:13: budget.maxTurns: expected a number, got a string",
      "config/agents/coder.yaml:5:15: budget.maxCostUsd: must be more than 0",
      'config/agents/coder.yaml:6:11: approval: must be one of "ask", "auto-edit", "never-ask", "yolo"; got "sometimes"',
    ]);
    expect(result.code).toBe(2);
  });

  it("reports a missing required key", async () => {
    const cwd = project({ "coder.yaml": "name: coder\ntools: [read_file]\n" });
    const result = await validate(cwd);
    expect(result.stderr).toBe("config/agents/coder.yaml:1:1: description: is required\n");
    expect(result.code).toBe(2);
  });

  it("rejects unknown keys, at the key, with a suggestion", async () => {
    const cwd = project({
      "coder.yaml": "name: coder\ndescription: Codes.\nbudget:\n  maxTurn: 5\nsystemPromt: hi\n",
    });
    const result = await validate(cwd);
    expect(result.stderr.split("\n").filter(Boolean)).toEqual([
      'config/agents/coder.yaml:4:3: budget.maxTurn: unknown key (did you mean "maxTurns"?)',
      'config/agents/coder.yaml:5:1: systemPromt: unknown key (did you mean "systemPrompt"?)',
    ]);
    expect(result.code).toBe(2);
  });

  it("rejects two agents with one name", async () => {
    const cwd = project({
      "a.yaml": "name: coder\ndescription: One.\n",
      "b.yaml": "description: Two.\nname: coder\n",
    });
    const result = await validate(cwd);
    expect(result.stderr).toBe(
      'config/agents/b.yaml:2:7: name: duplicate agent name "coder" (also at config/agents/a.yaml:1:7); rename one\n',
    );
    expect(result.code).toBe(2);
  });

  it("rejects a subagent reference to no agent", async () => {
    const cwd = project({
      "explorer.yaml": explorer,
      "coder.yaml": "name: coder\ndescription: Codes.\nsubagents: [explorr]\n",
    });
    const result = await validate(cwd);
    expect(result.stderr).toBe(
      'config/agents/coder.yaml:3:13: subagents[0]: unknown agent "explorr" (did you mean "explorer"?)\n',
    );
    expect(result.code).toBe(2);
  });

  it("rejects a cycle of subagent references", async () => {
    const cwd = project({
      "a.yaml": "name: alpha\ndescription: A.\nreadOnly: true\nsubagents: [beta]\n",
      "b.yaml": "name: beta\ndescription: B.\nreadOnly: true\nsubagents:\n  - alpha\n",
    });
    const result = await validate(cwd);
    expect(result.stderr).toBe(
      "config/agents/b.yaml:5:5: subagents[0]: subagent cycle: alpha → beta → alpha; an agent cannot delegate to itself\n",
    );
    expect(result.code).toBe(2);
  });

  it("rejects a subagent that lists a write tool, and a read-only agent that asks for a writable sandbox", async () => {
    const cwd = project({
      "explorer.yaml": "name: explorer\ndescription: Finds things.\ntools: [read_file, write_file]\n",
      "coder.yaml": "name: coder\ndescription: Codes.\nsubagents: [explorer]\n",
      "checker.yaml": "name: checker\ndescription: Checks.\nreadOnly: true\ntools: [grep, apply_patch]\n",
      "looker.yaml":
        "name: looker\ndescription: Looks.\nreadOnly: true\nsandbox: workspace-write\ntools: [shell]\n",
    });
    const result = await validate(cwd);
    const lines = result.stderr.split("\n").filter(Boolean);
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(
      /^config\/agents\/checker\.yaml:4:15: tools\[1\]: "apply_patch" writes; a read-only agent may list read tools only: read_file, .*, and shell \(run in the read-only sandbox\)$/,
    );
    expect(lines[1]).toMatch(
      /^config\/agents\/explorer\.yaml:3:20: tools\[1\]: "write_file" writes; a subagent \(every subagent is read-only\) may list read tools only/,
    );
    expect(lines[2]).toBe(
      'config/agents/looker.yaml:4:10: sandbox: a read-only agent\'s commands always run in the read-only sandbox; remove "sandbox: workspace-write" or set it to read-only',
    );
    expect(result.code).toBe(2);
  });

  it("accepts shell for a subagent and a read-only agent: it runs in the read-only sandbox", async () => {
    const cwd = project({
      "explorer.yaml": "name: explorer\ndescription: Finds things.\ntools: [read_file, shell]\n",
      "checker.yaml":
        "name: checker\ndescription: Checks.\nreadOnly: true\nsandbox: read-only\ntools: [shell]\n",
      "coder.yaml":
        "name: coder\ndescription: Codes.\ntools: [shell]\nsandbox: workspace-write\nsubagents: [explorer]\n",
    });
    trustConfig(cwd);
    const result = await validate(cwd);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
  });

  it("rejects an MCP tool of a server that is not configured, and accepts one that is", async () => {
    const troupe = "mcpServers:\n  files:\n    command: npx\n    args: [-y, some-server]\n";
    const cwd = project(
      {
        "coder.yaml":
          "name: coder\ndescription: Codes.\ntools: [files__read, files__*, github__create_issue]\n",
      },
      troupe,
    );
    const result = await validate(cwd);
    expect(result.stderr).toBe(
      'config/agents/coder.yaml:3:32: tools[2]: unknown MCP server "github" in "github__create_issue" (configured: files)\n',
    );
    expect(result.code).toBe(2);
  });

  it("checks troupe.yaml itself", async () => {
    const cwd = project(
      { "explorer.yaml": explorer },
      "nats:\n  url: nats://127.0.0.1:4222\n  prefx: mine\napproval:\n  policy: maybe\nmcpServers:\n  broken:\n    args: [x]\ndefaultAgent: explorr\n",
    );
    const result = await validate(cwd);
    expect(result.stderr.split("\n").filter(Boolean)).toEqual([
      'config/troupe.yaml:3:3: nats.prefx: unknown key (did you mean "prefix"?)',
      'config/troupe.yaml:5:11: approval.policy: must be one of "ask", "auto-edit", "never-ask", "yolo"; got "maybe"',
      'config/troupe.yaml:8:5: mcpServers.broken: needs exactly one of "command" (a local process) or "url" (a server over HTTP)',
    ]);
    expect(result.code).toBe(2);
  });

  it("checks extra agent files given as paths along with the config's agents", async () => {
    const cwd = project({ "explorer.yaml": explorer });
    const tree = tempTree({
      "drafts/coder.yaml": "name: coder\ndescription: Codes.\nsubagents: [explorer, ghost]\n",
    });
    disposers.push(tree.dispose);
    const result = await validate(cwd, `${tree.dir}/drafts`);
    expect(result.stderr).toContain(`drafts/coder.yaml:3:23: subagents[1]: unknown agent "ghost"`);
    expect(result.code).toBe(2);
  });

  it("says when a given path does not exist", async () => {
    const cwd = project({ "explorer.yaml": explorer });
    const result = await validate(cwd, "nope.yaml");
    expect(result.stderr).toBe("nope.yaml:1:1: no such file or directory\n");
    expect(result.code).toBe(2);
  });

  it("logs JSON lines to stderr at the --log-level asked for, when stderr is not a terminal", async () => {
    const cwd = project({ "explorer.yaml": explorer });
    trustConfig(cwd);
    const quiet = await runTroupe(["agents", "validate"], { cwd });
    expect(quiet.stderr).toBe("");
    const loud = await runTroupe(["--log-level", "debug", "agents", "validate"], { cwd });
    const record = JSON.parse(loud.stderr.trim().split("\n")[0] ?? "");
    expect(record).toMatchObject({
      level: 20,
      command: "config",
      msg: "config loaded",
      agents: ["explorer"],
    });
    expect(loud.stdout).toContain("ok: 1 agent");
  });

  it("uses TROUPE_CONFIG when no --config is given", async () => {
    const cwd = project({ "explorer.yaml": explorer });
    const result = await runTroupe(["agents", "validate"], {
      cwd: "/",
      env: { TROUPE_CONFIG: `${cwd}/config` },
    });
    expect(result.stdout).toContain("ok: 1 agent (explorer)");
    expect(result.code).toBe(0);
  });
});

const ROLES = ["architect", "debugger", "explorer", "investigator", "reviewer", "test-planner"];

describe("troupe agents list", () => {
  it("prints the shipped agents, one block each, within 100 columns", async () => {
    const tree = tempTree({});
    disposers.push(tree.dispose);
    const result = await runTroupe(["agents", "list"], { cwd: tree.dir });
    const lines = result.stdout.trimEnd().split("\n");
    // One block an agent, within 100 columns.
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(100);
    const heads = lines.filter((line) => !line.startsWith(" ")).map((line) => line.split(/\s{2,}/)[0]);
    expect(heads).toEqual(["assistant", ...ROLES.map((role) => `${role} (read-only)`)].sort());
    const assistant = lines.findIndex((line) => line.startsWith("assistant "));
    expect(lines[assistant]).toMatch(
      /^assistant +gpt-4o-mini \(default\) +subagents: explorer, investigator, debugger,$/,
    );
    expect(lines[assistant + 1]?.trim()).toBe("architect, test-planner, reviewer");
    expect(lines[assistant + 2]).toMatch(/^ {2}tools {3}read_file, list_dir, /);
    expect(lines).toContain("  budget  40 turns, 400k tokens, 200 tool calls, 30m, $2");
    expect(result.code).toBe(0);
  });
});

describe("the shipped read-only roles", () => {
  it("validate, and each only reads, runs the read-only shell and has a budget", async () => {
    const tree = tempTree({});
    disposers.push(tree.dispose);
    const result = await runTroupe(["agents", "validate", "--config", BUILTIN_CONFIG_DIR], { cwd: tree.dir });
    expect(result.stderr).toBe("");
    expect(result.stdout).toMatch(
      /^ok: 7 agents \(architect, assistant, debugger, explorer, investigator, reviewer, test-planner\) in /,
    );
    expect(result.code).toBe(0);
    const { agents } = loadConfig({ cwd: tree.dir, env: {} });
    for (const role of ROLES) {
      const definition = agents.get(role)?.definition;
      expect(definition?.readOnly, role).toBe(true);
      expect(definition?.tools, role).toContain("shell");
      expect(
        definition?.tools.filter((tool) => !READ_TOOLS.has(tool)),
        role,
      ).toEqual(["shell"]);
      expect(definition?.budget.maxTurns, role).toBeGreaterThan(0);
      expect(definition?.budget.maxWallMs, role).toBeGreaterThan(0);
      expect(definition?.systemPrompt?.length ?? 0, role).toBeGreaterThan(200);
    }
  });
});
