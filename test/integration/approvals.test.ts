import { existsSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import type { ApprovalRequest, Approver } from "../../src/approvals/approver.js";
import { ttyApprover } from "../../src/cli/tty-approver.js";
import { UNTRUSTED_NOTE } from "../../src/safety/untrusted.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { collect } from "../support/wait.js";

let server: ScriptedModelServer;
let ws: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "app.js": "const port = 80;\n" }));
});
afterEach(async () => {
  await server.close();
  dispose();
});

async function runtime(approver: Approver) {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "coder", description: "Codes.", tools: ["read_file", "edit_file", "shell"] }],
  );
  return new Runtime({ config, workspace: ws, env: {}, approver }).open();
}

describe("approval requests", () => {
  it("show the exact diff or command and the paths, a denial's reason reaches the model, and a call holding a secret is refused unasked", async () => {
    server.script(
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [
            {
              name: "edit_file",
              arguments: { path: "app.js", old_string: "port = 80", new_string: "port = 8080" },
            },
            { name: "shell", arguments: { command: "npm test > out/log.txt" } },
            {
              name: "shell",
              arguments: { command: "API_TOKEN=sk-abcdefghijklmnopqrstuvwxyz123456 npm test > out/log.txt" },
            },
          ],
        },
      },
      { match: { turn: 2 }, reply: { text: "done" } },
    );
    const asked: ApprovalRequest[] = [];
    const rt = await runtime({
      decide: async (request) => {
        asked.push(request);
        return request.tool === "edit_file"
          ? { approved: true, by: "test" }
          : { approved: false, by: "test", reason: "no tests today" };
      },
    });
    const handle = rt.start({ task: "Change the port", approval: "ask" });
    await handle.done;
    expect(asked.map((r) => r.tool)).toEqual(["edit_file", "shell"]);
    expect(asked[0]?.detail).toContain("-const port = 80;\n+const port = 8080;");
    expect(asked[0]?.paths).toEqual(["app.js"]);
    expect(asked[1]?.detail).toBe("npm test > out/log.txt");
    expect(asked[1]?.paths).toEqual(["out/log.txt"]);

    const events = (await collect(rt.bus.eventLog.read({ runId: handle.runId }))).map((e) => e.envelope);
    expect(events.filter((e) => e.type === "approval.requested")).toHaveLength(2);
    expect(JSON.stringify(events)).not.toContain("sk-abcdefghij");
    const toolMessages = server.requests[1]?.body.messages.filter((m) => m.role === "tool") ?? [];
    expect(toolMessages[1]?.content).toContain("the user denied shell: no tests today");
    expect(toolMessages[2]?.content).toContain("looks like a secret (openai-key)");
    expect(server.requests[0]?.body.messages[0]?.content).toContain(UNTRUSTED_NOTE);
    await rt.close();
  });

  it("leaving the sandbox is asked for under auto-edit, says why, and runs with what was approved", async () => {
    server.script(
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [
            { name: "shell", arguments: { command: "touch inside.txt" } },
            { name: "shell", arguments: { command: "touch net.txt", escalate: "network" } },
            {
              name: "shell",
              arguments: { command: "touch /tmp/unsandboxed-$PPID", escalate: "unsandboxed" },
            },
          ],
        },
      },
      { match: { turn: 2 }, reply: { text: "done" } },
    );
    const asked: ApprovalRequest[] = [];
    const rt = await runtime({
      decide: async (request) => {
        asked.push(request);
        return request.detail.includes("network")
          ? { approved: true, by: "test" }
          : { approved: false, by: "test", reason: "stay inside" };
      },
    });
    await rt.start({ task: "x", approval: "auto-edit" }).done;
    // The first ran in the sandbox without a question; the other two were asked about, each saying why.
    expect(asked.map((r) => r.detail)).toEqual([
      "touch net.txt\n(asked because it asks for network access)",
      "touch /tmp/unsandboxed-$PPID\n(asked because it asks to run outside the sandbox)",
    ]);
    expect(asked.map((r) => r.escalation)).toEqual([
      "it asks for network access",
      "it asks to run outside the sandbox",
    ]);
    expect(existsSync(join(ws, "inside.txt"))).toBe(true);
    expect(existsSync(join(ws, "net.txt"))).toBe(true);
    const results =
      server.requests[1]?.body.messages.filter((m) => m.role === "tool").map((m) => m.content) ?? [];
    expect(results[2]).toContain("stay inside");
    await rt.close();
  });

  it("on a terminal: y allows once, n with a reason denies, a allows the tool for the rest of the run", async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    let printed = "";
    output.on("data", (chunk) => (printed += chunk));
    const approver = ttyApprover(async () => {}, input, output);
    const request = (tool: string): ApprovalRequest => ({
      runId: "r",
      agentId: "a",
      callId: `c-${tool}`,
      tool,
      arguments: "{}",
      effect: "execute",
      detail: "rm build/out.txt",
      paths: ["build/out.txt"],
    });
    const signal = new AbortController().signal;
    const first = approver.decide(request("shell"), signal);
    // Enter, or a word it does not know, is asked again: nothing is decided for the person.
    input.write("\n");
    input.write("yse\n");
    input.write("n not in this repo\n");
    expect(await first).toEqual({ approved: false, by: "user", reason: "not in this repo" });
    const second = approver.decide(request("shell"), signal);
    input.write("a\n");
    expect((await second).approved).toBe(true);
    // "always" holds for the rest of the run: no question asked.
    expect(await approver.decide(request("shell"), signal)).toMatchObject({ approved: true, by: "user" });
    const third = approver.decide(request("write_file"), signal);
    input.write("y\n");
    expect(await third).toEqual({ approved: true, by: "user" });
    expect(printed).toContain(
      'shell (execute) wants to:\n  command (1 line): "rm build/out.txt"\n  paths: build/out.txt\n? allow shell (c-shell)?',
    );
    expect(printed).toContain('? y, n [reason] or a: ? "yse" is not an answer: y, n [reason] or a: ');
    expect(printed.match(/\? allow shell \(c-shell\)\?/g)).toHaveLength(2);
  });

  it("on a terminal: what was typed before the question is not its answer (a model's text can draw a question of its own)", async () => {
    const input = Object.assign(new PassThrough(), { isTTY: true });
    const output = new PassThrough();
    let printed = "";
    output.on("data", (chunk) => (printed += chunk));
    let show: () => void = () => {};
    const shown = new Promise<void>((resolve) => (show = resolve));
    const approver = ttyApprover(() => shown, input, output);
    const answered = approver.decide(
      {
        runId: "r",
        agentId: "a",
        callId: "c-1",
        tool: "shell",
        arguments: "{}",
        effect: "execute",
        detail: "touch /outside",
        paths: [],
        escalation: "it asks to run outside the sandbox",
      },
      new AbortController().signal,
    );
    // Typed while the output still drew the model's fake question: before the real one is asked.
    input.write("y\n");
    await new Promise((resolve) => setTimeout(resolve, 20));
    show();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(printed).toContain("? allow shell (c-1)?");
    input.write("n not that\n");
    expect(await answered).toEqual({ approved: false, by: "user", reason: "not that" });
    expect(printed).toContain("(what was typed before this question was ignored: answer it now)");
  });

  it("on a terminal: a status line while a question is open goes on a line of its own, and the question is asked again below it", async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    let printed = "";
    output.on("data", (chunk) => (printed += chunk));
    const approver = ttyApprover(async () => {}, input, output);
    approver.say("troupe: before any question");
    const answered = approver.decide(
      {
        runId: "r",
        agentId: "a",
        callId: "c-1",
        tool: "shell",
        arguments: "{}",
        effect: "execute",
        detail: "make",
        paths: [],
      },
      new AbortController().signal,
    );
    await new Promise((resolve) => setImmediate(resolve));
    approver.say("troupe: reconnecting to NATS…");
    input.write("y\n");
    expect(await answered).toEqual({ approved: true, by: "user" });
    const question = "? allow shell (c-1)? y = yes, n [reason] = no, a = always: ";
    expect(printed.startsWith("troupe: before any question\n")).toBe(true);
    expect(printed.endsWith(`${question}\ntroupe: reconnecting to NATS…\n${question}`)).toBe(true);
  });

  it("on a terminal: a call leaving the sandbox is asked every time, whatever was answered `a` before", async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    let printed = "";
    output.on("data", (chunk) => (printed += chunk));
    const approver = ttyApprover(async () => {}, input, output);
    const request = (callId: string, escalation?: string): ApprovalRequest => ({
      runId: "r",
      agentId: "a",
      callId,
      tool: "shell",
      arguments: "{}",
      effect: "execute",
      detail: "curl example.com",
      paths: [],
      ...(escalation ? { escalation } : {}),
    });
    const signal = new AbortController().signal;
    const first = approver.decide(request("c1"), signal);
    input.write("a\n");
    expect((await first).approved).toBe(true);
    // Not covered by that "always": asked, and `a` to it allows it once.
    const second = approver.decide(request("c2", "it asks for network access"), signal);
    input.write("a\n");
    expect(await second).toEqual({
      approved: true,
      by: "user",
      reason: "allowed once: it leaves the sandbox",
    });
    const third = approver.decide(request("c3", "it asks for network access"), signal);
    input.write("n\n");
    expect((await third).approved).toBe(false);
    // A call staying in the sandbox is still covered.
    expect(await approver.decide(request("c4"), signal)).toMatchObject({ approved: true });
    expect(printed.match(/\? allow shell/g)).toHaveLength(3);
    expect(printed).toContain(
      "? allow shell (c2)? y = yes, n [reason] = no, a = this once (it leaves the sandbox): ",
    );
  });

  it("on a terminal: a request decided elsewhere is withdrawn, cleared if asked, and the next one asked", async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    let printed = "";
    output.on("data", (chunk) => (printed += chunk));
    const approver = ttyApprover(async () => {}, input, output);
    const request = (callId: string): ApprovalRequest => ({
      runId: "r",
      agentId: "a",
      callId,
      tool: "shell",
      arguments: "{}",
      effect: "execute",
      detail: `make ${callId}`,
      paths: [],
    });
    const signal = new AbortController().signal;
    const [one, two, three] = ["c1", "c2", "c3"].map((id) => approver.decide(request(id), signal));
    await new Promise((resolve) => setTimeout(resolve, 50));
    approver.cancel("c2"); // waiting its turn: never asked
    approver.cancel("c1"); // being asked: cleared
    await expect(one).rejects.toThrow(/decided elsewhere/);
    await expect(two).rejects.toThrow(/decided elsewhere/);
    input.write("y\n");
    expect(await three).toEqual({ approved: true, by: "user" });
    expect(printed).toContain("? allow shell (c1)? y = yes, n [reason] = no, a = always: \r\x1b[K");
    expect(printed).not.toContain("make c2");
    expect(printed).toContain("make c3");
  });
});
