import { readdirSync, readFileSync, statSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AgentEventMap } from "../../src/events/agent-events.js";
import type { Envelope } from "../../src/events/envelope.js";
import { ScriptedModelServer, type ScriptedReply } from "../../src/testing/scripted-model-server.js";
import { runTroupe, tempTree } from "../support/cli.js";

/*
 * What the model says besides its answer (reasoning), and answers that never arrived whole, as
 * `troupe run --local` shows them: end to end through the CLI, the runtime and the openai SDK over
 * HTTP to the scripted server.
 */

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;

beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree(
    {
      "config/troupe.yaml": "defaultAgent: worker\ndefaultModel: scripted\n",
      "config/agents/worker.yaml":
        "name: worker\ndescription: Reads files.\ntools: [read_file, write_file]\nbudget:\n  maxTurns: 6\n",
      "ws/a.txt": "alpha\n",
    },
    { trusted: true },
  ));
});
afterEach(async () => {
  await server.close();
  dispose();
});

const env = () => ({ OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "" });
const run = (...args: string[]) =>
  runTroupe(["run", "--local", "-w", "ws", ...args], { cwd: dir, env: env() });
const events = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Envelope);

const READ_A = { name: "read_file", arguments: { path: "a.txt" } };
const TOKENS = String.raw`\d+ tokens`;

describe("troupe run --local: the model's reasoning", () => {
  const script = () =>
    server.script(
      {
        match: { turn: 1 },
        reply: { reasoning: "The user wants a.txt; read it.", text: "Looking.", toolCalls: [READ_A] },
      },
      {
        match: { turn: 2 },
        reply: { reasoning: "It holds alpha.", reasoningField: "reasoning", text: "It says alpha." },
      },
    );

  it("is shown on stderr, stdout stays what the agent said and did, and it is never sent back to the model", async () => {
    script();
    const result = await run("Read a.txt");
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('Looking.\n▸ read_file {"path":"a.txt"}\nIt says alpha.\n');
    expect(result.stderr).toMatch(
      new RegExp(
        `^thinking: The user wants a\\.txt; read it\\.\nthinking: It holds alpha\\.\n✓ done · 2 turns · 1 tool call · ${TOKENS}\n$`,
      ),
    );
    // The second request carries the first answer as the server gave it, less its reasoning.
    const sent = server.requests[1]?.body;
    const assistant = sent?.messages.find((m) => m.role === "assistant");
    expect(Object.keys(assistant ?? {}).sort()).toEqual(["content", "role", "tool_calls"]);
    expect(JSON.stringify(sent)).not.toMatch(/reasoning|The user wants/);
    server.assertComplete();
  });

  it("--json: model.reasoning events as they came, between the turn's callingModel and its model.completed", async () => {
    script();
    const result = await run("--json", "Read a.txt");
    expect(result.code).toBe(0);
    const all = events(result.stdout);
    const thoughts = all.filter((e) => e.type === "model.reasoning");
    // One a turn: the deltas of a turn's reasoning are merged before they leave (docs/daemon.md).
    expect(thoughts.length).toBe(2);
    expect(thoughts.map((e) => (e.data as AgentEventMap["model.reasoning"]).text).join("")).toBe(
      "The user wants a.txt; read it.It holds alpha.",
    );
    const first = all.indexOf(thoughts[0] as Envelope);
    // Between the state change and the reasoning: only what the request fills of the context.
    expect(all[first - 1]).toMatchObject({ type: "context.usage" });
    expect(all[first - 2]).toMatchObject({ type: "state.changed", data: { to: "callingModel" } });
    const lastOfTurn = all.findIndex((e) => e.type === "model.delta");
    expect(all.slice(first, lastOfTurn).every((e) => e.type === "model.reasoning")).toBe(true);
  });
});

describe("troupe run --local never ends `done` when a turn's answer was lost", () => {
  it.each<[string, ScriptedReply]>([
    ["a connection dropped", { toolCalls: [READ_A], dropAfterChunks: 3 }],
    [
      "an error event mid-stream",
      {
        raw: [
          `data: {"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"scripted","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\\"pa"}}]},"finish_reason":null}]}`,
          `data: {"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"scripted","error":{"code":502,"message":"Provider disconnected"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`,
          "",
        ].join("\n\n"),
      },
    ],
  ])(
    "a stream cut by %s once a tool call had begun: exit 1, not retried against a script that moved on",
    async (_, cut) => {
      server.script({ match: { turn: 1 }, reply: cut }, { reply: { text: "All done." }, times: 3 });
      const result = await run("Read a.txt");
      expect(result.code).toBe(1);
      expect(result.stdout).not.toContain("All done.");
      expect(result.stderr).toMatch(/^■ failed · 0 turns · 0 tool calls · 0 tokens\ntroupe: .*\n$/);
      expect(result.stderr).toContain("the stream broke after the answer had begun; not asked again");
      expect(server.requests).toHaveLength(1);
    },
  );

  it("after a 500 the call is asked again: the retry's answer is the run's", async () => {
    server.script(
      { match: { turn: 1 }, reply: { error: { status: 500, message: "upstream overloaded" } } },
      { match: { turn: 1 }, reply: { toolCalls: [READ_A] } },
      { match: { turn: 2 }, reply: { text: "It says alpha." } },
    );
    const result = await run("Read a.txt");
    expect(result.code).toBe(0);
    // The retry notice is a status of the run, on stderr; stdout is what the agent said and did.
    expect(result.stderr).toContain("· 500 from");
    expect(result.stdout).not.toContain("· 500 from");
    expect(result.stdout).toContain('▸ read_file {"path":"a.txt"}\nIt says alpha.\n');
    server.assertComplete();
  });

  it.each<[string, ScriptedReply, RegExp]>([
    [
      "the length limit before it said anything (a reasoning model that thought too long)",
      { reasoning: "Let me think about this at great length", finishReason: "length" },
      /cut off before it said anything by the output length limit \(finish_reason length\)/,
    ],
    [
      "the length limit mid-answer",
      { text: "The file a.txt says al", finishReason: "length" },
      /answer was cut off by the output length limit/,
    ],
    [
      "the content filter",
      { text: "Here is", finishReason: "content_filter" },
      /cut off by the server's content filter \(finish_reason content_filter\)/,
    ],
  ])("an answer cut off by %s: exit 1 with what was said and why", async (_, reply, why) => {
    server.script({ reply });
    const result = await run("--json", "Read a.txt");
    expect(result.code).toBe(1);
    const stopped = events(result.stdout).at(-1);
    expect(stopped?.type).toBe("agent.stopped");
    const output = stopped?.data as AgentEventMap["agent.stopped"];
    expect(output).toMatchObject({ reason: "failed", turns: 1, result: "text" in reply ? reply.text : "" });
    expect(output.error).toMatch(why);
  });

  it("a tool call cut off by the length limit is said, the model is told, and the run goes on", async () => {
    server.script(
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ name: "read_file", arguments: '{"path": "a.t' }], finishReason: "length" },
      },
      { match: { turn: 2 }, reply: { toolCalls: [READ_A] } },
      { match: { turn: 3 }, reply: { text: "It says alpha." } },
    );
    const result = await run("Read a.txt");
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(
      '· the answer was cut off by the output length limit: its tool call was not run (the model is told)\n▸ read_file {"path":"a.txt"}\nIt says alpha.\n',
    );
    expect(server.requests[1]?.body.messages.at(-1)?.content).toContain("cut off by the output length limit");
    server.assertComplete();
  });

  it("a server that gives every call the same id: each call still runs, and the model sees each call's own result", async () => {
    server.script(
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ id: "0", name: "write_file", arguments: { path: "x.txt", content: "one" } }] },
      },
      {
        match: { turn: 2 },
        reply: { toolCalls: [{ id: "0", name: "write_file", arguments: { path: "y.txt", content: "two" } }] },
      },
      { match: { turn: 3 }, reply: { text: "Wrote both." } },
    );
    const result = await runTroupe(
      ["run", "--local", "-w", "ws", "--approval", "auto-edit", "Write x and y"],
      {
        cwd: dir,
        env: env(),
      },
    );
    expect(result.code).toBe(0);
    expect(readFileSync(join(dir, "ws", "y.txt"), "utf8")).toBe("two");
    const history = server.requests[2]?.body.messages ?? [];
    const ids = history.flatMap((m) => (m.role === "assistant" ? (m.tool_calls ?? []).map((c) => c.id) : []));
    expect(ids).toHaveLength(2);
    expect(new Set(ids).size).toBe(2);
    const results = history.filter((m) => m.role === "tool").map((m) => m.content);
    expect(results[1]).toContain("y.txt");
    server.assertComplete();
  });
});

describe("troupe run --local against a model that never stops talking", () => {
  /**
   * A server that streams reasoning, 64 KiB a delta, until the client goes or 64 MiB are out, then
   * answers, and says the whole reply was 1 token: what a hostile model or server can send.
   */
  async function endlessServer() {
    const seen = { requests: 0, sent: 0, cut: false };
    const chunk = (delta: object, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "scripted", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    const thought = chunk({ reasoning_content: "y".repeat(65_536) });
    const http = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        seen.requests++;
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(chunk({ role: "assistant", content: "" }));
        res.once("close", () => {
          if (!res.writableFinished) seen.cut = true;
        });
        const pump = () => {
          while (seen.sent < 64 * 1024 * 1024) {
            if (res.destroyed) return;
            seen.sent += 65_536;
            if (!res.write(thought)) return void res.once("drain", pump);
          }
          res.write(chunk({ content: "Done." }, "stop"));
          res.write(
            `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "scripted", choices: [], usage: { prompt_tokens: 10, completion_tokens: 1, total_tokens: 11 } })}\n\n`,
          );
          res.end("data: [DONE]\n\n");
        };
        pump();
      });
    });
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    const { port } = http.address() as AddressInfo;
    return {
      seen,
      baseURL: `http://127.0.0.1:${port}/v1`,
      close: () => new Promise<void>((resolve) => http.close(() => resolve())),
    };
  }

  it("stops the reply at 4 Mi characters: the run fails saying so, the stream is cut, and its log stays small", async () => {
    const model = await endlessServer();
    try {
      const result = await runTroupe(["run", "--local", "-w", "ws", "Read a.txt"], {
        cwd: dir,
        env: { OPENAI_BASE_URL: model.baseURL, OPENAI_API_KEY: "" },
      });
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(
        /\n■ failed · 0 turns · 0 tool calls · 0 tokens\ntroupe: the reply from http:\/\/127\.0\.0\.1:\d+\/v1 \(provider openai, model scripted\) passed 4194304 characters: stopped there, not asked again — providers\.openai\.maxReplyChars raises the cap\n$/,
      );
      expect(result.stdout).not.toContain("Done.");
      // Asked once, and left before the server was through.
      expect(model.seen).toMatchObject({ requests: 1, cut: true });
      expect(model.seen.sent).toBeLessThan(32 * 1024 * 1024);
      const runs = join(dir, ".data", "local", "troupe", "runs");
      const [runId] = readdirSync(runs);
      const log = join(runs, runId as string, "events.jsonl");
      expect(statSync(log).size).toBeLessThan(6 * 1024 * 1024);
      const last = JSON.parse(readFileSync(log, "utf8").trim().split("\n").at(-1) ?? "{}") as Envelope;
      expect(last).toMatchObject({ type: "agent.stopped", data: { reason: "failed" } });
    } finally {
      await model.close();
    }
  }, 60_000);
});
