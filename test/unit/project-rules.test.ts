import { readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import type { ApprovalRequest } from "../../src/approvals/approver.js";
import { type ProjectRules, projectRules, ruleFor, withAllowRule } from "../../src/cli/project-rules.js";
import { ttyApprover } from "../../src/cli/tty-approver.js";
import { loadConfig } from "../../src/config/load.js";
import { assertTrusted, trustConfigDir, trustStorePath } from "../../src/config/trusted-configs.js";
import { UserError } from "../../src/errors.js";
import { tempTree } from "../support/cli.js";

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

const request = (tool: string, args: Record<string, unknown>, escalation?: string): ApprovalRequest => ({
  runId: "r",
  agentId: "a",
  callId: `c-${tool}-${JSON.stringify(args)}`,
  tool,
  arguments: JSON.stringify(args),
  effect: tool === "write_file" ? "write" : "execute",
  detail: String(args.command ?? args.path ?? ""),
  paths: [],
  ...(escalation ? { escalation } : {}),
});

describe("the rule A saves", () => {
  it("is a command's program and subcommand, or the tool whole; none for an escalation or a line of several", () => {
    expect(ruleFor(request("shell", { command: "git status --short" }))).toBe("shell(git status *)");
    expect(ruleFor(request("shell", { command: "npm test" }))).toBe("shell(npm test *)");
    expect(ruleFor(request("shell", { command: "ls -la src" }))).toBe("shell(ls *)");
    expect(ruleFor(request("shell", { command: "cat README.md" }))).toBe("shell(cat *)");
    expect(ruleFor(request("shell", { command: "git status && rm -rf x" }))).toBeUndefined();
    expect(ruleFor(request("shell", { command: "npm test > log.txt" }))).toBeUndefined();
    // One word with spaces in it would read as a wider prefix than the command names.
    expect(ruleFor(request("shell", { command: "'rm -rf' build" }))).toBeUndefined();
    expect(
      ruleFor(request("shell", { command: "git status" }, "it asks for network access")),
    ).toBeUndefined();
    expect(ruleFor(request("write_file", { path: "a.md" }))).toBe("write_file");
    expect(ruleFor(request("github__create_issue", {}))).toBe("github__create_issue");
  });

  it("is added to troupe.yaml keeping its comments and layout", () => {
    const text =
      "# the project's config\ndefaultModel: gpt-4o # cheap\npermissions:\n  deny:\n    - shell(rm *)\n";
    expect(withAllowRule(text, "shell(git status *)")).toBe(
      "# the project's config\ndefaultModel: gpt-4o # cheap\npermissions:\n  deny:\n    - shell(rm *)\n  allow:\n    - shell(git status *)\n",
    );
    const listed = "permissions:\n  allow:\n    - write_file # docs too\n";
    expect(withAllowRule(listed, "shell(ls *)")).toBe(
      "permissions:\n  allow:\n    - write_file # docs too\n    - shell(ls *)\n",
    );
    expect(withAllowRule(listed, "write_file")).toBe(listed);
    expect(withAllowRule("", "shell")).toBe("permissions:\n  allow:\n    - shell\n");
  });
});

describe("the project's rules", () => {
  const project = () => {
    const { dir, dispose } = tempTree({
      "config/troupe.yaml": "# mine\ndefaultModel: scripted\n",
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
    });
    cleanups.push(dispose);
    const env = { ...process.env, XDG_CONFIG_HOME: join(dir, ".home-config") };
    const configDir = join(dir, "config");
    return { dir, env, configDir };
  };

  it("are saved only in a config dir the user trusted, which stays trusted with that change", () => {
    const { dir, env, configDir } = project();
    expect(projectRules(loadConfig({ config: configDir, cwd: dir, env }), env)).toBeUndefined();
    trustConfigDir(trustStorePath(env), realpathSync(configDir), []);
    const rules = projectRules(loadConfig({ cwd: dir, env }), env) as ProjectRules;
    expect(rules).toBeDefined();
    rules.save("shell(git status *)");
    expect(readFileSync(join(configDir, "troupe.yaml"), "utf8")).toBe(
      "# mine\ndefaultModel: scripted\npermissions:\n  allow:\n    - shell(git status *)\n",
    );
    expect(() => assertTrusted(configDir, dir, env)).not.toThrow();
    expect(loadConfig({ cwd: dir, env }).troupe.permissions.allow).toEqual(["shell(git status *)"]);
  });

  it("are not saved once the dir changed since it was trusted, nor the change trusted", () => {
    const { dir, env, configDir } = project();
    trustConfigDir(trustStorePath(env), realpathSync(configDir), []);
    const rules = projectRules(loadConfig({ cwd: dir, env }), env) as ProjectRules;
    writeFileSync(join(configDir, "agents/planted.yaml"), "name: planted\ndescription: x.\n");
    expect(() => rules.save("shell")).toThrow(UserError);
    expect(readFileSync(join(configDir, "troupe.yaml"), "utf8")).not.toContain("permissions");
    expect(() => assertTrusted(configDir, dir, env)).toThrow(/changed since you trusted it/);
    expect(projectRules(loadConfig({ config: configDir, cwd: dir, env }), env)).toBeUndefined();
  });
});

describe("A at the terminal", () => {
  const saved: string[] = [];
  const fake: ProjectRules = { file: "config/troupe.yaml", ruleFor, save: (rule) => void saved.push(rule) };

  it("saves the rule, covers the rest of the run by it, and is never offered for an escalation", async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    let shown = "";
    output.on("data", (chunk) => {
      shown += String(chunk);
    });
    const approver = ttyApprover(async () => {}, input, output, fake);
    const signal = new AbortController().signal;
    const first = approver.decide(request("shell", { command: "git status" }), signal);
    input.write("A\n");
    expect(await first).toMatchObject({ approved: true, by: "user" });
    expect(shown).toContain("A = always in this project (shell(git status *))");
    expect(saved).toEqual(["shell(git status *)"]);
    // Covered by the rule: not asked again; another command is.
    expect((await approver.decide(request("shell", { command: "git status -s" }), signal)).approved).toBe(
      true,
    );
    const other = approver.decide(request("shell", { command: "git push" }), signal);
    input.write("n\n");
    expect((await other).approved).toBe(false);
    shown = "";
    const escalation = approver.decide(
      request("shell", { command: "git status" }, "it asks for network access"),
      signal,
    );
    input.write("A\n");
    expect(await escalation).toMatchObject({ approved: true, reason: "allowed once: it leaves the sandbox" });
    expect(shown).not.toContain("A = always in this project");
    expect(saved).toHaveLength(1);
  });
});
