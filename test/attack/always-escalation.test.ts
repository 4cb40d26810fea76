import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ApprovalPolicy } from "../../src/config/policy-schemas.js";
import type { Confinement } from "../../src/sandbox/plan.js";
import { detectSandbox } from "../../src/sandbox/sandbox.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { shellTool } from "../../src/tools/builtin/shell.js";
import type { ToolResult } from "../../src/tools/tool.js";
import { onTerminal, tempTree } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (issue 31, point 7): "always" covered what it must not. Answering `a` to one `shell ls`
 * let a later `escalate: "unsandboxed"` command run outside the sandbox without a question, and a
 * read-only subagent's `escalate: "network"` connect: asked under `ask` (and `auto-edit`), allowed
 * under yolo. Now leaving the sandbox is a question of its own every time, and a read-only agent's
 * escalation is refused before anyone is asked, under every policy. Run for real: `troupe run` on
 * a terminal, the scripted model's tool calls, bubblewrap, a file or a TCP connection as the
 * evidence that a command ran. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const PROMPT = /\? allow shell \(/g;
const prompts = (output: string) => output.match(PROMPT)?.length ?? 0;

/** A TCP server on the host's loopback that counts who connected: a command given the network reaches it. */
async function listener(): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const server: Server = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  const address = server.address();
  if (typeof address !== "object" || !address) throw new Error("no port");
  return { port: address.port, connections: () => connections };
}

async function scripted(...rules: Parameters<ScriptedModelServer["script"]>) {
  const model = await ScriptedModelServer.start(rules);
  cleanups.push(() => model.close());
  return model;
}

/** `troupe run --local` of this project on a terminal (a pty), in the workspace `ws`. */
function localRun(
  dir: string,
  model: ScriptedModelServer,
  policy: ApprovalPolicy,
  task: string,
  flags: string[] = [],
) {
  const run = onTerminal(
    ["--config", join(dir, "config"), "run", "--local", ...flags, "--approval", policy, "-w", "ws", task],
    {
      cwd: dir,
      env: {
        ...process.env,
        OPENAI_BASE_URL: model.baseURL,
        OPENAI_API_KEY: "",
        TROUPE_DATA_DIR: join(dir, ".data"),
      },
    },
  );
  cleanups.push(() => void run.child.kill("SIGKILL"));
  let ended = false;
  void run.exit.then(() => (ended = true));
  return { ...run, ended: () => ended };
}

const coder = {
  "config/troupe.yaml": "defaultAgent: coder\ndefaultModel: scripted\n",
  "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
  "ws/app.js": "export const port = 80;\n",
};

/** The events of a `--json` run's output on a terminal, where the questions are mixed in. */
const events = (output: string) =>
  output.split(/\r?\n/).flatMap((line) => {
    const start = line.indexOf('{"');
    if (start < 0) return [];
    try {
      return [
        JSON.parse(line.slice(start)) as { type: string; agentId: string; data: Record<string, unknown> },
      ];
    } catch {
      return [];
    }
  });

/** The tool results the model was sent in its last request. */
const lastResults = (model: ScriptedModelServer, system?: string) =>
  model.requests
    .filter((r) => !system || String(r.body.messages[0]?.content ?? "").includes(system))
    .at(-1)
    ?.body.messages.filter((m) => m.role === "tool")
    .map((m) => String(m.content)) ?? [];

describe("an escalation after `a` to a command that stays in the sandbox is asked again", () => {
  it.each([
    ["unsandboxed", "touch ../escaped.txt", "escaped.txt", "it asks to run outside the sandbox"],
    ["network", "touch net-ran.txt", "ws/net-ran.txt", "it asks for network access"],
  ] as const)("escalate: %s", async (escalate, command, evidence, because) => {
    const model = await scripted(
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "shell", arguments: { command: "ls" } }] } },
      { match: { turn: 2 }, reply: { toolCalls: [{ name: "shell", arguments: { command, escalate } }] } },
      { match: { turn: 3 }, reply: { text: "done" } },
    );
    const { dir, dispose } = tempTree(coder);
    cleanups.push(dispose);
    const run = localRun(dir, model, "ask", "list, then escape");
    await waitFor("the first question", () => prompts(run.output()) === 1, 20_000);
    run.child.stdin.write("a\n");
    // Covered by that "always", the escalation would run without a question and the run end.
    await waitFor(
      "a second question, or the run's end",
      () => prompts(run.output()) > 1 || run.ended(),
      20_000,
    );
    expect(prompts(run.output())).toBe(2);
    const second = run.output().slice(run.output().lastIndexOf("wants to:"));
    expect(second).toContain(`(asked because ${because})`);
    // "always" is not offered for a call that leaves the sandbox.
    expect(second).toContain("a = this once (it leaves the sandbox)");
    run.child.stdin.write("n stay inside\n");
    expect(await run.exit).toBe(0);
    expect(existsSync(join(dir, evidence))).toBe(false);
    expect(lastResults(model)[1]).toContain("stay inside");
  });

  it("`a` to an escalation allows that call once: the next escalation is asked again", async () => {
    const model = await scripted(
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [
            { name: "shell", arguments: { command: "touch ../first.txt", escalate: "unsandboxed" } },
          ],
        },
      },
      {
        match: { turn: 2 },
        reply: {
          toolCalls: [
            { name: "shell", arguments: { command: "touch ../second.txt", escalate: "unsandboxed" } },
          ],
        },
      },
      { match: { turn: 3 }, reply: { text: "done" } },
    );
    const { dir, dispose } = tempTree(coder);
    cleanups.push(dispose);
    const run = localRun(dir, model, "auto-edit", "escape twice");
    await waitFor("the first question", () => prompts(run.output()) === 1, 20_000);
    run.child.stdin.write("a\n");
    await waitFor("the first escape", () => existsSync(join(dir, "first.txt")), 20_000);
    await waitFor(
      "a second question, or the run's end",
      () => prompts(run.output()) > 1 || run.ended(),
      20_000,
    );
    expect(prompts(run.output())).toBe(2);
    run.child.stdin.write("n\n");
    expect(await run.exit).toBe(0);
    expect(existsSync(join(dir, "second.txt"))).toBe(false);
  });

  it("with the sandbox off, `a` allows one command: the next is asked again", async () => {
    const model = await scripted(
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "shell", arguments: { command: "ls" } }] } },
      {
        match: { turn: 2 },
        reply: { toolCalls: [{ name: "shell", arguments: { command: "touch ../off.txt" } }] },
      },
      { match: { turn: 3 }, reply: { text: "done" } },
    );
    const { dir, dispose } = tempTree(coder);
    cleanups.push(dispose);
    const run = localRun(dir, model, "ask", "list, then touch", ["--sandbox", "off"]);
    await waitFor("the first question", () => prompts(run.output()) === 1, 20_000);
    expect(run.output()).toContain("(asked because the sandbox is off)");
    run.child.stdin.write("a\n");
    await waitFor(
      "a second question, or the run's end",
      () => prompts(run.output()) > 1 || run.ended(),
      20_000,
    );
    expect(prompts(run.output())).toBe(2);
    run.child.stdin.write("n\n");
    expect(await run.exit).toBe(0);
    expect(existsSync(join(dir, "off.txt"))).toBe(false);
  });
});

describe("a read-only subagent's escalation is refused without asking, after an earlier `a`", () => {
  it.each(["ask", "auto-edit", "never-ask", "yolo"] as const)("under %s", async (policy) => {
    const { port, connections } = await listener();
    const as = (name: string, turn: number) => ({ system: `"${name}"`, turn });
    const connect = `echo hi > /dev/tcp/127.0.0.1/${port}`;
    const model = await scripted(
      { match: as("lead", 1), reply: { toolCalls: [{ name: "shell", arguments: { command: "ls" } }] } },
      {
        match: as("lead", 2),
        reply: { toolCalls: [{ name: "subagent_explorer", arguments: { task: "Check the service" } }] },
      },
      {
        match: as("explorer", 1),
        reply: { toolCalls: [{ name: "shell", arguments: { command: connect, escalate: "network" } }] },
      },
      { match: as("explorer", 2), reply: { text: "could not reach it" } },
      { match: as("lead", 3), reply: { text: "done" } },
    );
    const { dir, dispose } = tempTree({
      "config/troupe.yaml": "defaultAgent: lead\ndefaultModel: scripted\n",
      "config/agents/lead.yaml": "name: lead\ndescription: Leads.\ntools: [shell]\nsubagents: [explorer]\n",
      "config/agents/explorer.yaml": "name: explorer\ndescription: Finds things.\ntools: [shell]\n",
      "ws/app.js": "export const port = 80;\n",
    });
    cleanups.push(dispose);
    const run = localRun(dir, model, policy, "check the service", ["--json"]);
    if (policy === "ask") {
      await waitFor("the lead's question", () => prompts(run.output()) === 1, 20_000);
      run.child.stdin.write("a\n");
    }
    const asked = policy === "ask" ? 1 : 0;
    await waitFor(
      "another question, or the run's end",
      () => prompts(run.output()) > asked || run.ended(),
      30_000,
    );
    // Asked after all: say yes, as a person trusting the run would, so the command's reach shows.
    if (prompts(run.output()) > asked) run.child.stdin.write("y\n");
    expect(await run.exit).toBe(0);
    expect(prompts(run.output())).toBe(asked);
    expect(connections()).toBe(0);
    const log = events(run.output());
    const explorer = log.find((e) => e.type === "subagent.spawned")?.data.childId;
    expect(explorer).toBeDefined();
    expect(log.filter((e) => e.type === "tool.finished" && e.agentId === explorer)).toEqual([]);
    expect(log.filter((e) => e.type === "approval.requested").length).toBe(asked);
    const refusal = lastResults(model, '"explorer"')[0] ?? "";
    expect(refusal).toContain("never leave the read-only sandbox");
    expect(refusal).toContain("without escalate");
  });
});

describe("on a daemon, `troupe run`'s own prompt", () => {
  it("asks about an escalation after `a` to a command that stays in the sandbox", async () => {
    const model = await scripted(
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "shell", arguments: { command: "ls" } }] } },
      {
        match: { turn: 2 },
        reply: {
          toolCalls: [
            { name: "shell", arguments: { command: "touch ../escaped.txt", escalate: "unsandboxed" } },
          ],
        },
      },
      { match: { turn: 3 }, reply: { text: "done" } },
    );
    const h = await embeddedDaemon(
      {
        "config/troupe.yaml": `nats:\n  prefix: alw\ndefaultAgent: coder\ndefaultModel: scripted\napproval:\n  timeoutMs: 20000\n`,
        "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
        "ws/app.js": "export const port = 80;\n",
      },
      model.baseURL,
      cleanups,
    );
    await h.start();
    const run = onTerminal([...h.cfg, "run", "--approval", "ask", "-w", "ws", "list, then escape"], {
      cwd: h.dir,
      env: h.env,
    });
    cleanups.push(() => void run.child.kill("SIGKILL"));
    let ended = false;
    void run.exit.then(() => (ended = true));
    await waitFor("the first question", () => prompts(run.output()) === 1, 20_000);
    run.child.stdin.write("a\n");
    await waitFor("a second question, or the run's end", () => prompts(run.output()) > 1 || ended, 20_000);
    expect(prompts(run.output())).toBe(2);
    run.child.stdin.write("n\n");
    expect(await run.exit).toBe(0);
    expect(existsSync(join(h.dir, "escaped.txt"))).toBe(false);
  });
});

describe("where a read-only agent's command starts", () => {
  it.each([
    ["no sandbox", { mode: "off", network: true }],
    ["the workspace-write sandbox", { mode: "workspace-write", network: false }],
    ["the network", { mode: "read-only", network: true }],
  ] as const)(
    "a command given %s is refused at launch, whatever its plan or approval said",
    async (_what, forged: Confinement) => {
      const { port, connections } = await listener();
      const root = mkdtempSync(join(tmpdir(), "troupe-limit-"));
      cleanups.push(() => rmSync(root, { recursive: true, force: true }));
      const command = `touch ${join(root, "ran.txt")}; echo hi > /dev/tcp/127.0.0.1/${port}`;
      const result = (await shellTool({ sandbox: detectSandbox() }).execute(
        { command, timeout_ms: 10_000 },
        {
          signal: new AbortController().signal,
          callId: "c",
          runId: "r",
          agentId: "a",
          workspace: root,
          sandbox: forged,
          sandboxLimit: { mode: "read-only", network: false },
        },
      )) as ToolResult;
      expect(result.ok).toBe(false);
      expect(result.error).toContain("this agent's commands run only in the read-only sandbox");
      expect(existsSync(join(root, "ran.txt"))).toBe(false);
      expect(connections()).toBe(0);
    },
  );
});
