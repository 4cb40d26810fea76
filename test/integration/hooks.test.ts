import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { memoryLogger } from "../../src/log.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { globMatches } from "../../src/tools/command-hooks.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";

let server: ScriptedModelServer;
let ws: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "notes.txt": "secret plans\n" }));
});
afterEach(async () => {
  await server.close();
  dispose();
});

async function runtime(
  hooks: Record<string, unknown>,
  agents: Array<Record<string, unknown>> = [
    { name: "worker", description: "Works.", tools: ["read_file", "write_file"] },
  ],
) {
  const config = testConfig(
    {
      defaultModel: "scripted",
      hooks,
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    agents,
  );
  const memory = memoryLogger();
  return {
    rt: await new Runtime({ config, workspace: ws, env: {}, log: memory.log }).open(),
    logs: memory.records,
  };
}

const toolResults = () =>
  server.requests
    .at(-1)
    ?.body.messages.filter((m) => m.role === "tool")
    .map((m) => m.content) ?? [];

describe("hooks", () => {
  it("beforeTool exiting 2 blocks the call, and its stderr is the reason the model reads; the event arrives as JSON on stdin", async () => {
    server.script(
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [
            { name: "write_file", arguments: { path: "out.txt", content: "x" } },
            { name: "read_file", arguments: { path: "notes.txt" } },
          ],
        },
      },
      { match: { turn: 2 }, reply: { text: "ok" } },
    );
    const { rt } = await runtime({
      beforeTool: [
        { match: "write_*", command: "cat > hook-input.json; echo 'writes are frozen today' >&2; exit 2" },
      ],
    });
    await rt.start({ task: "x", approval: "yolo" }).done;
    expect(existsSync(join(ws, "out.txt"))).toBe(false);
    expect(toolResults()[0]).toMatch(/^error:\n<tool_output source="write_file">\nwrites are frozen today\n/);
    expect(toolResults()[1]).toContain("secret plans");
    expect(JSON.parse(readFileSync(join(ws, "hook-input.json"), "utf8"))).toMatchObject({
      event: "beforeTool",
      tool: "write_file",
      arguments: '{"path":"out.txt","content":"x"}',
    });
    await rt.close();
  });

  it("hooks start hermetic: a HOME whose .bashrc and .profile sleep 30 s slows no hook", async () => {
    // Node gives a child's stdin as a socket, and bash run with a socket on stdin reads ~/.bashrc as if
    // sshd had started it: without --norc every hook here would time out, and a blocking one fail open.
    const home = process.env.HOME as string;
    writeFileSync(join(home, ".bashrc"), "sleep 30\n");
    writeFileSync(join(home, ".bash_profile"), "sleep 30\n");
    writeFileSync(join(home, ".profile"), "sleep 30\n");
    try {
      server.script(
        {
          match: { turn: 1 },
          reply: { toolCalls: [{ name: "write_file", arguments: { path: "out.txt", content: "x" } }] },
        },
        { match: { turn: 2 }, reply: { text: "ok" } },
      );
      const { rt } = await runtime({
        beforeTool: [{ command: "echo 'blocked, and quickly' >&2; exit 2", timeoutMs: 3000 }],
      });
      const started = Date.now();
      await rt.start({ task: "x", approval: "yolo" }).done;
      expect(Date.now() - started).toBeLessThan(3000);
      expect(toolResults()[0]).toContain("blocked, and quickly");
      expect(existsSync(join(ws, "out.txt"))).toBe(false);
      await rt.close();
    } finally {
      for (const file of [".bashrc", ".bash_profile", ".profile"]) rmSync(join(home, file), { force: true });
    }
  });

  it("afterTool may replace the result by printing JSON", async () => {
    server.script(
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] } },
      { match: { turn: 2 }, reply: { text: "ok" } },
    );
    const { rt } = await runtime({
      afterTool: [{ match: "read_file", command: `echo '{"output":"[contents withheld by policy]"}'` }],
    });
    await rt.start({ task: "x" }).done;
    expect(toolResults()[0]).toBe(
      '<tool_output source="read_file">\n[contents withheld by policy]\n</tool_output>',
    );
    await rt.close();
  });

  it("a hook that times out is logged and does not block, unless failClosed", async () => {
    server.script(
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] } },
      { match: { turn: 2 }, reply: { text: "ok" } },
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] } },
      { match: { turn: 2 }, reply: { text: "ok" } },
    );
    const open = await runtime({ beforeTool: [{ command: "sleep 5", timeoutMs: 200 }] });
    const started = Date.now();
    await open.rt.start({ task: "x" }).done;
    expect(Date.now() - started).toBeLessThan(3000);
    expect(toolResults()[0]).toContain("secret plans");
    expect(open.logs.some((r) => r.msg === "a hook failed" && String(r.outcome).includes("timed out"))).toBe(
      true,
    );
    await open.rt.close();

    const closed = await runtime({ beforeTool: [{ command: "sleep 5", timeoutMs: 200, failClosed: true }] });
    await closed.rt.start({ task: "x" }).done;
    expect(toolResults()[0]).toContain("a required hook failed (timed out), so read_file was not run");
    await closed.rt.close();
  });

  it("a hook that crashes blocks only when failClosed", async () => {
    server.script(
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] } },
      { match: { turn: 2 }, reply: { text: "ok" } },
    );
    const { rt } = await runtime({ beforeTool: [{ command: "exit 1", failClosed: true }] });
    await rt.start({ task: "x" }).done;
    expect(toolResults()[0]).toContain("a required hook failed (exit code 1)");
    await rt.close();
  });

  it("subagentStart, subagentStop and agentStop hooks run with the event", async () => {
    server.script(
      {
        match: { system: '"lead"', turn: 1 },
        reply: { toolCalls: [{ name: "subagent_helper", arguments: { task: "help" } }] },
      },
      { match: { system: '"helper"' }, reply: { text: "helped" } },
      { match: { system: '"lead"', turn: 2 }, reply: { text: "done" } },
    );
    const record = (name: string) => ({ command: `cat >> ${name}.log; echo >> ${name}.log` });
    const { rt } = await runtime(
      {
        subagentStart: [record("start")],
        subagentStop: [record("stop")],
        agentStop: [{ match: "lead", ...record("agent") }],
      },
      [
        { name: "lead", description: "Leads.", subagents: ["helper"] },
        { name: "helper", description: "Helps.", readOnly: true },
      ],
    );
    await rt.start({ task: "x", agent: "lead" }).done;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(JSON.parse(readFileSync(join(ws, "start.log"), "utf8"))).toMatchObject({
      event: "subagentStart",
      name: "helper",
      task: "help",
    });
    expect(JSON.parse(readFileSync(join(ws, "stop.log"), "utf8"))).toMatchObject({
      event: "subagentStop",
      name: "helper",
      reason: "done",
      result: "helped",
    });
    expect(JSON.parse(readFileSync(join(ws, "agent.log"), "utf8"))).toMatchObject({
      event: "agentStop",
      name: "lead",
      reason: "done",
    });
    await rt.close();
  });

  it("match tool names by glob", () => {
    expect(globMatches("*", "anything")).toBe(true);
    expect(globMatches("write_*", "write_file")).toBe(true);
    expect(globMatches("write_*", "read_file")).toBe(false);
    expect(globMatches("files__*", "files__read")).toBe(true);
    expect(globMatches("read.file", "read_file")).toBe(false);
  });
});
