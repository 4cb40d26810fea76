import { execFileSync } from "node:child_process";
import { linkSync, mkdirSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { canaryPieces } from "../support/canary.js";
import { type RunningTroupe, spawnTroupe, tempTree } from "../support/cli.js";

/* ATTACK: project notes an agent or a repository made. AGENTS.md, which goes into every system
 * prompt, as a symbolic link to a file outside the workspace (a key) or to /proc/self/environ
 * (Troupe's own environment, API keys and all), as a hard link to an outside file, as a FIFO (the
 * synchronous read never returned), or 3 GiB long; a workspace skill's SKILL.md likewise. Made by the
 * agent's own command, or committed in a cloned repository and read with no tool call at all; read
 * by the lead and by a read-only subagent, under every policy. Nothing of those files may reach the
 * model, and the run must end, with one line in the prompt saying what was skipped. */

const SECRET = "canary-key-5b7e19d04c2a8f63";
const PLANTED_ENV = "canary-env-0d9c4e7a21f5b386";

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;
let running: RunningTroupe | undefined;

beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultAgent: lead\ndefaultModel: scripted\n",
    "config/agents/lead.yaml":
      "name: lead\ndescription: Leads.\ntools: [shell, read_file, load_skill]\nsubagents: [explorer]\n",
    "config/agents/explorer.yaml":
      "name: explorer\ndescription: Finds things.\nreadOnly: true\ntools: [read_file, load_skill]\n",
    "outside/id_rsa": `-----BEGIN KEY-----\n${SECRET}\n`,
    "outside/SKILL.md": `---\nname: evil\ndescription: ${SECRET}\n---\n${SECRET}\n`,
    "ws/app.js": "export const port = 80;\n",
  }));
});
afterEach(async () => {
  if (running && running.child.exitCode === null) running.child.kill("SIGKILL");
  running = undefined;
  await server.close();
  dispose();
});

const as = (name: string, turn: number) => ({ system: `"${name}"`, turn });
const call = (name: string, args: Record<string, unknown>) => ({ name, arguments: args });

/** The lead (after `first`, its own calls) asks the read-only explorer, then answers. */
function scriptLeadAndExplorer(first: Array<ReturnType<typeof call>> = []) {
  const turns = [...(first.length > 0 ? [first] : []), [call("subagent_explorer", { task: "look" })]];
  server.script(
    ...turns.map((toolCalls, i) => ({ match: as("lead", i + 1), reply: { toolCalls } })),
    { match: as("explorer", 1), reply: { text: "nothing here" } },
    { match: as("lead", turns.length + 1), reply: { text: "done" } },
  );
}

async function run(policy: string, workspace = "ws") {
  running = spawnTroupe(["run", "--local", "--json", "--approval", policy, "-w", workspace, "go"], {
    cwd: dir,
    env: {
      ...process.env,
      TROUPE_DATA_DIR: join(dir, ".data"),
      TROUPE_CONFIG: join(dir, "config"),
      OPENAI_BASE_URL: server.baseURL,
      OPENAI_API_KEY: "",
      TROUPE_PLANTED_NOTE: PLANTED_ENV,
    },
  });
  const code = await running.exit;
  return { code, stderr: running.stderr() };
}

/** Every request the model was sent, as one text; and the system prompts, by agent. */
function sent() {
  const all = JSON.stringify(server.requests.map((r) => r.body));
  const system = (name: string) =>
    server.requests
      .map((r) => String(r.body.messages[0]?.content ?? ""))
      .filter((prompt) => prompt.includes(`"${name}"`));
  return { all, system };
}

function expectNothingOf(text: string) {
  for (const piece of [...canaryPieces(SECRET), ...canaryPieces(PLANTED_ENV)])
    expect(text).not.toContain(piece);
}

describe.each(["ask", "auto-edit", "never-ask", "yolo"])("under %s", (policy) => {
  it("AGENTS.md linked to /proc/self/environ: the lead and a read-only subagent see one line, not the environment", async () => {
    symlinkSync("/proc/self/environ", join(dir, "ws/AGENTS.md"));
    scriptLeadAndExplorer();
    const { code, stderr } = await run(policy);
    expect(code, stderr).toBe(0);
    const { all, system } = sent();
    expectNothingOf(all);
    expect(system("explorer").length).toBeGreaterThan(0);
    for (const prompt of [...system("lead"), ...system("explorer")])
      expect(prompt).toContain("AGENTS.md skipped: a symbolic link");
  });

  it("AGENTS.md hard-linked to an outside file and a skill's SKILL.md linked outside: skipped, said so", async () => {
    linkSync(join(dir, "outside/id_rsa"), join(dir, "ws/AGENTS.md"));
    mkdirSync(join(dir, "ws/.troupe/skills/evil"), { recursive: true });
    symlinkSync(join(dir, "outside/SKILL.md"), join(dir, "ws/.troupe/skills/evil/SKILL.md"));
    scriptLeadAndExplorer();
    const { code, stderr } = await run(policy);
    expect(code, stderr).toBe(0);
    const { all, system } = sent();
    expectNothingOf(all);
    for (const prompt of [...system("lead"), ...system("explorer")]) {
      expect(prompt).toContain("AGENTS.md skipped: a file with 2 hard links");
      expect(prompt).toContain(".troupe/skills/evil/SKILL.md skipped: a symbolic link");
    }
  });
});

it("a cloned repository's .troupe/skills that links out of it: not listed, so no name from there reaches the model (outside review)", async () => {
  mkdirSync(join(dir, "private/proj"), { recursive: true });
  writeFileSync(join(dir, "private/acquisition-of-acme-corp.md"), "secret plans\n");
  writeFileSync(
    join(dir, "private/proj/SKILL.md"),
    "---\nname: leak\ndescription: from outside\n---\nbody\n",
  );
  mkdirSync(join(dir, "ws/.troupe"), { recursive: true });
  symlinkSync("../../private", join(dir, "ws/.troupe/skills"));
  server.script({ match: as("lead", 1), reply: { text: "done" } });
  const { code, stderr } = await run("never-ask");
  expect(code, stderr).toBe(0);
  const { all, system } = sent();
  expect(all).not.toContain("acquisition-of-acme-corp");
  expect(all).not.toContain("proj/SKILL.md");
  expect(system("lead")[0]).toContain(".troupe/skills skipped: it leads outside the workspace (a link)");
});

describe.each(["auto-edit", "yolo"])("under %s, made by the agent's own command", (policy) => {
  it("ln -s /proc/self/environ AGENTS.md: the subagent started after it sees one line, not the environment", async () => {
    scriptLeadAndExplorer([call("shell", { command: "ln -s /proc/self/environ AGENTS.md && echo linked" })]);
    const { code, stderr } = await run(policy);
    expect(code, stderr).toBe(0);
    const { all, system } = sent();
    expect(all).toContain("linked");
    expectNothingOf(all);
    expect(system("explorer")[0]).toContain("AGENTS.md skipped: a symbolic link");
  });
});

it("a cloned repository with a hostile AGENTS.md and skill, under never-ask with no tool call: nothing read", async () => {
  const repo = join(dir, "repo");
  mkdirSync(join(repo, ".troupe/skills/evil"), { recursive: true });
  symlinkSync(join(dir, "outside/id_rsa"), join(repo, "AGENTS.md"));
  symlinkSync(join(dir, "outside/SKILL.md"), join(repo, ".troupe/skills/evil/SKILL.md"));
  const git = (args: string[], cwd: string) =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd, stdio: "ignore" });
  git(["init", "-q"], repo);
  git(["add", "-A"], repo);
  git(["commit", "-qm", "hostile"], repo);
  git(["clone", "-q", repo, join(dir, "clone")], dir);
  server.script({ match: as("lead", 1), reply: { text: "done" } });
  const { code, stderr } = await run("never-ask", "clone");
  expect(code, stderr).toBe(0);
  const { all, system } = sent();
  expectNothingOf(all);
  expect(system("lead")[0]).toContain("AGENTS.md skipped: a symbolic link");
  expect(system("lead")[0]).toContain(".troupe/skills/evil/SKILL.md skipped: a symbolic link");
});

it("FIFOs named AGENTS.md and SKILL.md: the run ends, and the prompt says they were skipped", async () => {
  mkdirSync(join(dir, "ws/.troupe/skills/pipe"), { recursive: true });
  execFileSync("mkfifo", [join(dir, "ws/AGENTS.md"), join(dir, "ws/.troupe/skills/pipe/SKILL.md")]);
  scriptLeadAndExplorer();
  const { code, stderr } = await run("never-ask");
  expect(code, stderr).toBe(0);
  const { system } = sent();
  for (const prompt of [...system("lead"), ...system("explorer")]) {
    expect(prompt).toContain("AGENTS.md skipped: not a regular file");
    expect(prompt).toContain(".troupe/skills/pipe/SKILL.md skipped: not a regular file");
  }
}, 60_000);

it("AGENTS.md of 3 GiB (sparse) is read up to its cap, with a note", async () => {
  const path = join(dir, "ws/AGENTS.md");
  writeFileSync(path, "Always answer in one line.\n");
  truncateSync(path, 3 * 1024 ** 3);
  server.script({ match: as("lead", 1), reply: { text: "done" } });
  const { code, stderr } = await run("never-ask");
  expect(code, stderr).toBe(0);
  const [prompt] = sent().system("lead");
  expect(prompt).toContain("Always answer in one line.");
  expect(prompt).toContain("[AGENTS.md is longer; the rest was left out]");
  expect(prompt?.length).toBeLessThan(200_000);
});
