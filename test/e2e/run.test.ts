import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { freePort } from "../../src/bus/embedded-nats.js";
import type { Envelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, TROUPE_BIN, tempTree } from "../support/cli.js";

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;

const AGENT = `name: worker
description: Reads files to answer questions.
tools: [read_file, list_dir]
budget:
  maxTurns: 6
`;

beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree(
    {
      "config/troupe.yaml": "defaultAgent: worker\ndefaultModel: scripted\n",
      "config/agents/worker.yaml": AGENT,
      "ws/a.txt": "alpha\n",
      "ws/b.txt": "beta\n",
      "ws/AGENTS.md": "Always answer in one line.\n",
    },
    { trusted: true },
  ));
});
afterEach(async () => {
  await server.close();
  dispose();
});

const env = () => ({ OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "" });
const events = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Envelope);

describe("troupe run --local", () => {
  it("--json: a three-turn task with two parallel reads, every state on the way, nothing else on stdout", async () => {
    server.script(
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [
            { name: "read_file", arguments: { path: "a.txt" } },
            { name: "list_dir", arguments: {} },
          ],
        },
      },
      { match: { turn: 2 }, reply: { toolCalls: [{ name: "read_file", arguments: { path: "b.txt" } }] } },
      { match: { turn: 3 }, reply: { text: "a.txt says alpha and b.txt says beta." } },
    );
    const result = await runTroupe(
      ["run", "--local", "--json", "--workspace", "ws", "What do the files say?"],
      { cwd: dir, env: env() },
    );
    expect(result.code).toBe(0);
    server.assertComplete();
    const all = events(result.stdout);
    expect(all.every((e) => e.v === 1 && e.runId === all[0]?.runId)).toBe(true);
    expect(all.map((e) => e.seq)).toEqual(all.map((_, i) => i));

    const states = all.filter((e) => e.type === "state.changed").map((e) => (e.data as { to: string }).to);
    expect(states).toEqual([
      "callingModel",
      "executingTools",
      "callingModel",
      "executingTools",
      "callingModel",
      "stopped",
    ]);
    // The two reads ran together: both started before either finished.
    const tools = all
      .filter((e) => e.type.startsWith("tool."))
      .map((e) => `${e.type} ${(e.data as { name: string }).name}`);
    expect(tools.slice(0, 4)).toEqual([
      "tool.requested read_file",
      "tool.requested list_dir",
      "tool.started read_file",
      "tool.started list_dir",
    ]);
    expect(tools.slice(4, 6).sort()).toEqual(["tool.finished list_dir", "tool.finished read_file"]);
    const stopped = all.at(-1);
    expect(stopped?.type).toBe("agent.stopped");
    expect(stopped?.data).toMatchObject({
      reason: "done",
      result: "a.txt says alpha and b.txt says beta.",
      turns: 3,
      toolCalls: 3,
    });
    const types = new Set(all.map((e) => e.type));
    for (const type of [
      "agent.started",
      "model.delta",
      "model.completed",
      "tool.requested",
      "tool.started",
      "tool.finished",
    ]) {
      expect(types).toContain(type);
    }

    // The model saw the tool results, AGENTS.md in the system prompt, and the tools as JSON Schema.
    const second = server.requests[1]?.body;
    expect(second?.messages.find((m) => m.role === "tool")?.content).toContain("1\talpha");
    expect(second?.messages[0]?.content).toContain("Always answer in one line.");
    expect(second?.tools?.map((t) => t.function.name)).toEqual(["read_file", "list_dir"]);
  });

  it("human mode: the answer as it streams and one line per tool call", async () => {
    server.script(
      {
        match: { turn: 1 },
        reply: { text: "Looking.", toolCalls: [{ name: "read_file", arguments: { path: "a.txt" } }] },
      },
      { match: { turn: 2 }, reply: { text: "It says alpha." } },
    );
    const result = await runTroupe(["run", "--local", "-w", "ws", "Read a.txt"], { cwd: dir, env: env() });
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('Looking.\n▸ read_file {"path":"a.txt"}\nIt says alpha.\n');
    expect(result.stderr).toMatch(/^✓ done · 2 turns · 1 tool call · \d+ tokens\n$/);
  });

  it("a refusal is the answer: on stdout, stopped as refused, exit 5", async () => {
    const refusal = readFileSync(
      new URL("../fixtures/wire/openai-refusal-streamed.sse", import.meta.url),
      "utf8",
    );
    server.script({ reply: { raw: refusal, contentType: "text/event-stream" }, times: 2 });
    const human = await runTroupe(["run", "--local", "-w", "ws", "Do something bad"], {
      cwd: dir,
      env: env(),
    });
    expect(human.stdout).toBe("I'm sorry, I can't help with that.\n");
    expect(human.stderr).toMatch(/^■ refused · 1 turn · 0 tool calls · \d+ tokens\n$/);
    expect(human.code).toBe(5);
    const json = await runTroupe(["run", "--local", "--json", "-w", "ws", "Do something bad"], {
      cwd: dir,
      env: env(),
    });
    const stopped = events(json.stdout).at(-1);
    expect(stopped?.type).toBe("agent.stopped");
    expect(stopped?.data).toMatchObject({ reason: "refused", result: "I'm sorry, I can't help with that." });
    expect(json.code).toBe(5);
    server.assertComplete();
  });

  it("exits 3 when the budget runs out, after one last call without tools", async () => {
    server.script(
      {
        match: { withTools: true },
        reply: (request) => ({
          toolCalls: [{ name: "read_file", arguments: { path: "a.txt", offset: request.messages.length } }],
        }),
        times: 6,
      },
      { match: { withTools: false }, reply: { text: "Out of turns; here is what I have." } },
    );
    const result = await runTroupe(["run", "--local", "--json", "-w", "ws", "Loop forever"], {
      cwd: dir,
      env: env(),
    });
    const stopped = events(result.stdout).at(-1);
    expect(stopped?.data).toMatchObject({ reason: "budget_exhausted", turns: 7 });
    expect(result.code).toBe(3);
    expect(server.requests).toHaveLength(7);
  });

  it("names the budget limit it reached, and the final turn's tool call is refused as such, not as an unknown tool", async () => {
    server.script(
      {
        match: { withTools: true },
        reply: (request) => ({
          toolCalls: [{ name: "read_file", arguments: { path: "a.txt", offset: request.messages.length } }],
        }),
        times: 6,
      },
      {
        match: { withTools: false },
        reply: { toolCalls: [{ name: "read_file", arguments: { path: "b.txt" } }] },
      },
    );
    const result = await runTroupe(["run", "--local", "-w", "ws", "Loop forever"], { cwd: dir, env: env() });
    expect(result.code).toBe(3);
    expect(result.stdout).toContain(
      '▸ read_file {"path":"b.txt"}  ✗ no tool calls now: this turn is for the final answer',
    );
    expect(result.stdout).not.toContain("unknown tool");
    expect(result.stderr).toMatch(
      /^■ budget_exhausted \(maxTurns 6 reached\) · 7 turns · 6 tool calls · \d+ tokens\n$/,
    );
  });

  it("refuses an empty task in one line, and says its version", async () => {
    const empty = await runTroupe(["run", "--local", "  "], { cwd: dir, env: env() });
    expect(empty).toMatchObject({
      code: 2,
      stdout: "",
      stderr: 'troupe: say what the agent should do: troupe run "TASK" (or - for stdin, or --file PATH)\n',
    });
    expect(server.requests).toHaveLength(0);
    const version = await runTroupe(["--version"], { cwd: dir });
    expect(version).toMatchObject({ code: 0, stdout: "0.1.0\n" });
  });

  it("exits 1 when the model keeps failing", async () => {
    server.script({ reply: { error: { status: 401, message: "invalid api key" } } });
    const result = await runTroupe(["run", "--local", "-w", "ws", "Hi"], { cwd: dir, env: env() });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `■ failed · 0 turns · 0 tool calls · 0 tokens\ntroupe: 401 from ${server.baseURL} (provider openai, model scripted): invalid api key — check OPENAI_API_KEY or providers.openai.apiKeyEnv\n`,
    );
  });

  it("says which server it cannot reach, and shows each retry as it happens", async () => {
    const port = await freePort();
    const closed = await runTroupe(["run", "--local", "-w", "ws", "Hi"], {
      cwd: dir,
      env: { OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`, OPENAI_API_KEY: "" },
    });
    expect(closed.code).toBe(1);
    expect(closed.stderr).toContain(
      `troupe: cannot reach http://127.0.0.1:${port}/v1 (provider openai, model scripted): connection refused (is the server running?)\n`,
    );
    // A proxy's HTML page for a 503: each retry one line on stderr, with the page's text only.
    const page = readFileSync(new URL("../fixtures/wire/nginx-503.body", import.meta.url), "utf8");
    server.script(
      { reply: { raw: page, status: 503, contentType: "text/html" }, times: 2 },
      { reply: { text: "Back." } },
    );
    const retried = await runTroupe(["run", "--local", "-w", "ws", "Hi"], { cwd: dir, env: env() });
    expect(retried.code).toBe(0);
    expect(retried.stdout).toBe("Back.\n");
    const at = `${server.baseURL} (provider openai, model scripted)`.replace(/[.()]/g, "\\$&");
    expect(retried.stderr).toMatch(
      new RegExp(
        `^· 503 from ${at}: 503 Service Temporarily Unavailable nginx/1\\.27\\.3; retrying \\(1/\\d\\) in \\d+\\.\\d s\n· 503 from ${at}: 503 Service Temporarily Unavailable nginx/1\\.27\\.3; retrying \\(2/\\d\\) in \\d+\\.\\d s\n`,
        "m",
      ),
    );
    expect(retried.stderr).not.toContain("<");
  });

  it("says in one line what to set when no model server is configured, with exit 2", async () => {
    const result = await runTroupe(["run", "--local", "-w", "ws", "Hi"], {
      cwd: dir,
      env: { OPENAI_BASE_URL: "", OPENAI_API_KEY: "" },
    });
    expect(result.stderr).toBe(
      "troupe: no model server: set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL (providers.openai.baseURL in troupe.yaml) for an OpenAI-compatible server\n",
    );
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
  });

  it("exits 2 with one line for an unknown agent or workspace", async () => {
    const agent = await runTroupe(["run", "--local", "-a", "wroker", "-w", "ws", "Hi"], {
      cwd: dir,
      env: env(),
    });
    expect(agent.stderr).toBe(
      'troupe: unknown agent "wroker" (did you mean "worker"?); the agents are worker\n',
    );
    expect(agent.code).toBe(2);
    const workspace = await runTroupe(["run", "--local", "-w", "nowhere", "Hi"], { cwd: dir, env: env() });
    expect(workspace.stderr).toMatch(
      /^troupe: workspace .*nowhere is not a directory; pass --workspace DIR\n$/,
    );
    expect(workspace.code).toBe(2);
  });

  it("gives the model an error result for a path outside the workspace", async () => {
    server.script(
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ name: "read_file", arguments: { path: "../outside.txt" } }] },
      },
      { match: { turn: 2 }, reply: { text: "Could not read it." } },
    );
    const result = await runTroupe(["run", "--local", "--json", "-w", "ws", "Read outside"], {
      cwd: dir,
      env: env(),
    });
    expect(result.code).toBe(0);
    const toolMessage = server.requests[1]?.body.messages.find((m) => m.role === "tool");
    expect(toolMessage?.content).toContain('"../outside.txt" is outside the workspace');
  });

  it("aborts on Ctrl-C: the stream is cancelled and it exits 130 promptly", async () => {
    server.script({ reply: { text: "slow ".repeat(200), chunks: 200, chunkDelayMs: 50 } });
    const child = spawn(
      process.execPath,
      [TROUPE_BIN, "run", "--local", "--json", "-w", "ws", "Talk slowly"],
      {
        cwd: dir,
        env: { ...process.env, ...env() },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    await new Promise<void>((resolve) => {
      const check = () => (stdout.includes('"model.delta"') ? resolve() : setTimeout(check, 20));
      check();
    });
    const started = Date.now();
    child.kill("SIGINT");
    const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
    expect(code).toBe(130);
    expect(Date.now() - started).toBeLessThan(2000);
    const stopped = events(stdout).at(-1);
    expect(stopped?.data).toMatchObject({ reason: "aborted" });
    // The server stopped streaming long before the 10 s the reply would take.
    expect(events(stdout).filter((e) => e.type === "model.delta").length).toBeLessThan(100);
  });
});
