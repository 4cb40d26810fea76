import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { BUILTIN_CONFIG_DIR } from "../../src/config/load.js";
import { discoverSkills, loadSkill } from "../../src/skills/skills.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { collect } from "../support/wait.js";

/* A skill's other files, readable as skill:NAME/PATH and nothing more; its allowed-tools, which spare
 * the asking and nothing else; the skill.loaded event. Real files, links and runs over real HTTP. */

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;

const skillMd = (name: string, extra = "") =>
  `---\nname: ${name}\ndescription: The ${name} skill.\n${extra}---\nFollow the ${name} steps.\n`;

beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree({
    "config/skills/deploy/SKILL.md": skillMd("deploy", "allowed-tools: write_file edit_file Bash(git:*)\n"),
    "config/skills/deploy/references/guide.md": "Deploy on Tuesdays.\n",
    "config/skills/deploy/scripts/check.sh": "echo checked\n",
    "config/skills/deploy/.env": "DEPLOY_TOKEN=hidden-token\n",
    "config/skills/private/SKILL.md": skillMd("private"),
    "config/skills/private/notes.md": "private notes\n",
    "outside/secret.txt": "the secret\n",
    "ws/.troupe/skills/local/SKILL.md": skillMd("local", "allowed-tools:\n  - write_file\n"),
    "ws/.keep": "",
  }));
  // Links inside the skill that lead out of it: a file and a directory.
  symlinkSync(`${dir}/outside/secret.txt`, `${dir}/config/skills/deploy/link-out.md`);
  mkdirSync(`${dir}/config/skills/deploy/assets`);
  symlinkSync(`${dir}/outside`, `${dir}/config/skills/deploy/assets/out`);
});
afterEach(async () => {
  await server.close();
  dispose();
});

async function runtime(agent: Record<string, unknown>) {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
      approval: { policy: "ask" },
    },
    [{ name: "worker", description: "Works.", ...agent }],
  );
  config.dir = `${dir}/config`;
  return new Runtime({ config, workspace: `${dir}/ws`, env: {} }).open();
}

const call = (name: string, args: Record<string, unknown>) => ({ name, arguments: args });

/** Runs the turns given (each a list of calls), then a last text turn; the tool results and events. */
async function run(rt: Runtime, turns: Array<Array<ReturnType<typeof call>>>) {
  server.script(...turns.map((toolCalls, i) => ({ match: { turn: i + 1 }, reply: { toolCalls } })), {
    match: { turn: turns.length + 1 },
    reply: { text: "done" },
  });
  const handle = rt.start({ task: "go" });
  const output = await handle.done;
  const events = (await collect(rt.bus.eventLog.read({ runId: handle.runId }))).map((e) => e.envelope);
  const last = server.requests.at(-1)?.body.messages ?? [];
  const results = last.filter((m) => m.role === "tool").map((m) => String(m.content));
  await rt.close();
  return { output, events, results };
}

describe("a skill's files", () => {
  it("are listed after its body, readable as skill:NAME/PATH, and the load is one skill.loaded event", async () => {
    const { output, events, results } = await run(
      await runtime({ tools: ["load_skill", "read_file"], skills: ["deploy", "local"] }),
      [
        [call("load_skill", { name: "deploy" })],
        [call("read_file", { path: "skill:deploy/references/guide.md" })],
      ],
    );
    expect(output.reason).toBe("done");
    const [body, guide] = results;
    expect(body).toContain("Follow the deploy steps.");
    expect(body).toContain("- skill:deploy/references/guide.md\n- skill:deploy/scripts/check.sh");
    // Links are not listed (and SKILL.md is the body itself).
    expect(body).not.toContain("link-out");
    expect(body).not.toContain("assets/out");
    expect(body).not.toContain("skill:deploy/SKILL.md");
    expect(guide).toContain("1\tDeploy on Tuesdays.");
    const loaded = events.filter((e) => e.type === "skill.loaded").map((e) => e.data);
    // edit_file is not this agent's, and Bash(git:*) names no tool: only write_file would be pre-approved, and
    // this agent has no write_file either.
    expect(loaded).toEqual([{ name: "deploy", by: "model", files: 2 }]);
  });

  it("refuse every way out: .., a link out of the skill (file or directory), a skill the agent may not load", async () => {
    const paths = [
      "skill:deploy/../private/notes.md",
      "skill:deploy/references/../../../outside/secret.txt",
      "skill:deploy/link-out.md",
      "skill:deploy/assets/out/secret.txt",
      "skill:private/notes.md",
      "skill:deploy//etc/passwd",
      "skill:deploy/references",
      "skill:deploy/.env",
    ];
    const { results } = await run(await runtime({ tools: ["load_skill", "read_file"], skills: ["deploy"] }), [
      paths.map((path) => call("read_file", { path })),
    ]);
    expect(results).toHaveLength(paths.length);
    for (const result of results) {
      expect(result).toMatch(/^error:/);
      expect(result).not.toContain("the secret");
      expect(result).not.toContain("private notes");
      expect(result).not.toContain("hidden-token");
    }
    const [dots, deeper, linkFile, linkDir, other, empty, directory, hidden] = results;
    expect(dots).toContain('without "..", "." or empty parts');
    expect(deeper).toContain('without "..", "." or empty parts');
    expect(linkFile).toContain("leads outside the skill's directory");
    expect(linkDir).toContain("leads outside the skill's directory");
    expect(other).toContain('no skill "private" with files that this agent may load');
    expect(empty).toContain('without "..", "." or empty parts');
    expect(directory).toContain("is a directory");
    expect(hidden).toContain("names a hidden file, which a skill does not disclose");
  });

  it("are not for an agent that may load no skill", async () => {
    const { results } = await run(await runtime({ tools: ["read_file"] }), [
      [call("read_file", { path: "skill:deploy/references/guide.md" })],
    ]);
    expect(results).toEqual([
      expect.stringContaining('no skill "deploy" with files that this agent may load'),
    ]);
  });

  it("are read-only: a write to skill:NAME/PATH changes neither the skill nor the workspace", async () => {
    const path = "skill:deploy/references/guide.md";
    const { results } = await run(
      await runtime({
        tools: ["load_skill", "read_file", "write_file", "edit_file"],
        skills: ["deploy"],
        approval: "auto-edit",
      }),
      [
        [
          call("write_file", { path, content: "Deploy on Fridays.\n" }),
          call("edit_file", { path, old_string: "Tuesdays", new_string: "Fridays" }),
        ],
      ],
    );
    expect(results).toEqual([
      expect.stringContaining("is a skill's file, which tools may read but not change"),
      expect.stringContaining("is a skill's file, which tools may read but not change"),
    ]);
    expect(readFileSync(`${dir}/config/skills/deploy/references/guide.md`, "utf8")).toBe(
      "Deploy on Tuesdays.\n",
    );
    expect(readdirSync(`${dir}/ws`)).toEqual([".keep", ".troupe"]);
  });
});

describe("allowed-tools", () => {
  it("pre-approves the listed tools the agent has, from the load on: what was asked about runs unasked", async () => {
    const { events, results } = await run(await runtime({ tools: ["load_skill", "write_file"] }), [
      [call("write_file", { path: "before.txt", content: "x" })],
      [call("load_skill", { name: "deploy" })],
      [call("write_file", { path: "after.txt", content: "y" })],
    ]);
    // Nobody can answer in this run: before the skill, the write is asked about and so denied.
    expect(existsSync(`${dir}/ws/before.txt`)).toBe(false);
    expect(existsSync(`${dir}/ws/after.txt`)).toBe(true);
    expect(results.at(-1)).not.toMatch(/^error:/);
    const decisions = events
      .filter((e) => e.type === "tool.requested")
      .map((e) => (e.data as { decision: string }).decision);
    expect(decisions).toEqual(["ask", "allow", "allow"]);
    expect(events.find((e) => e.type === "skill.loaded")?.data).toEqual({
      name: "deploy",
      by: "model",
      files: 2,
      preApproved: ["write_file"],
    });
  });

  it("of a workspace's own skill pre-approves nothing", async () => {
    const { events } = await run(await runtime({ tools: ["load_skill", "write_file"] }), [
      [call("load_skill", { name: "local" })],
      [call("write_file", { path: "after.txt", content: "y" })],
    ]);
    expect(existsSync(`${dir}/ws/after.txt`)).toBe(false);
    expect(events.find((e) => e.type === "skill.loaded")?.data).toEqual({
      name: "local",
      by: "model",
      files: 0,
    });
  });

  it("gives no tool: one the agent lacks stays unknown, and a read-only agent stays read-only", async () => {
    writeFileSync(`${dir}/ws/a.txt`, "a\n");
    const lacking = await run(await runtime({ tools: ["load_skill", "write_file"] }), [
      [call("load_skill", { name: "deploy" })],
      [call("edit_file", { path: "a.txt", old: "a", new: "b" })],
    ]);
    expect(lacking.results.at(-1)).toMatch(/^error: unknown tool "edit_file"/);
    const readOnly = await run(await runtime({ tools: ["load_skill", "read_file"], readOnly: true }), [
      [call("load_skill", { name: "deploy" })],
      [call("write_file", { path: "after.txt", content: "y" })],
    ]);
    expect(readOnly.results.at(-1)).toMatch(/^error: write_file writes, and this agent is read-only/);
    expect(existsSync(`${dir}/ws/after.txt`)).toBe(false);
  });
});

it("the shipped code-review skill lists its security reference", () => {
  const skill = discoverSkills([join(BUILTIN_CONFIG_DIR, "skills")]).get("code-review");
  const loaded = skill && loadSkill(skill, "model");
  expect(loaded?.files).toBe(1);
  expect(loaded?.body).toContain("go through\n     references/security.md");
  expect(loaded?.body).toMatch(/\n- skill:code-review\/references\/security\.md$/);
});
