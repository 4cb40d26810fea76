/**
 * Turn overhead: many two-turn runs (a tool call, then an answer) against the scripted model server;
 * overhead = wall time minus the server's own time, per turn. Side by side: a minimal loop on the
 * openai SDK (the floor), @openai/agents (the peer, tracing off), Troupe on LocalBus, Troupe on NATS
 * with events and snapshots on.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled, tool } from "@openai/agents";
import OpenAI from "openai";
import { z } from "zod";
import { Runtime } from "../src/actors/runtime.js";
import type { Approver } from "../src/approvals/approver.js";
import type { Bus } from "../src/bus/bus.js";
import { LocalBus } from "../src/bus/local-bus.js";
import { NatsBus } from "../src/bus/nats-bus.js";
import { agentSchema } from "../src/config/agent-schema.js";
import { troupeConfigSchema } from "../src/config/schema.js";
import { telemetryConfigSchema } from "../src/config/telemetry-schema.js";
import { YamlFile } from "../src/config/yaml-file.js";
import { Daemon } from "../src/daemon/daemon.js";
import { makeEnvelope } from "../src/events/envelope.js";
import { silentLogger } from "../src/log.js";
import { openTelemetry } from "../src/telemetry/otel-setup.js";
import type { Telemetry } from "../src/telemetry/telemetry.js";
import { ScriptedModelServer } from "../src/testing/scripted-model-server.js";
import { defineTool, type Tool } from "../src/tools/tool.js";
import { clientApart, runThroughDaemon } from "./daemon-client.js";
import { defaultServer } from "./default-server.js";

export interface OverheadResult {
  name: string;
  /** Median overhead per turn, ms. */
  perTurnMs: number;
}

const echo = (text: string) => `echo: ${text}`;

async function scripted(): Promise<ScriptedModelServer> {
  return ScriptedModelServer.start([
    {
      match: { where: (r) => !r.messages.some((m) => m.role === "tool") },
      reply: { toolCalls: [{ name: "echo", arguments: { text: "hello" } }], chunks: 1 },
      times: Number.POSITIVE_INFINITY,
    },
    {
      match: { where: (r) => r.messages.some((m) => m.role === "tool") },
      reply: { text: "done", chunks: 1 },
      times: Number.POSITIVE_INFINITY,
    },
  ]);
}

interface Variant {
  name: string;
  /** One run; a number is its wall time as measured elsewhere (by a client in another process). */
  once: () => Promise<unknown>;
}

/**
 * The variants take turns over this many rounds: a machine that speeds up or slows down during
 * the measure weighs on all of them alike.
 */
const ROUNDS = 5;

/**
 * Runs each variant n times, in `ROUNDS` interleaved rounds; per-turn overhead of a run =
 * (wall − server time of its two requests) / 2. The median of each variant's runs.
 */
async function measure(
  server: ScriptedModelServer,
  n: number,
  variants: Variant[],
): Promise<OverheadResult[]> {
  for (const variant of variants) for (let i = 0; i < Math.min(5, n); i++) await variant.once(); // warm up
  const samples = variants.map(() => [] as number[]);
  for (let round = 0; round < ROUNDS; round++) {
    const runs = Math.ceil(n / ROUNDS);
    for (const [v, variant] of variants.entries()) {
      for (let i = 0; i < runs; i++) {
        const before = server.requests.length;
        const started = performance.now();
        const measured = await variant.once();
        const wall = typeof measured === "number" ? measured : performance.now() - started;
        const served = server.requests.slice(before).reduce((sum, r) => sum + (r.servedMs ?? 0), 0);
        samples[v]?.push((wall - served) / 2);
      }
    }
  }
  return variants.map(({ name }, v) => {
    const sorted = (samples[v] ?? []).sort((a, b) => a - b);
    return { name, perTurnMs: sorted[Math.floor(sorted.length / 2)] ?? Number.NaN };
  });
}

/** How the SDK-based loops (a and b) are built. */
export interface LoopOptions {
  /** Runs after each reply, told whether it was the last (the durable floor's append). */
  afterTurn?: (turn: number, last: boolean) => Promise<void>;
  /**
   * The openai client's retries. None in the overhead runs, where none happens; at scale a request
   * may meet a connection the server is just closing, which the SDK retries by default.
   */
  maxRetries?: number;
}

/** The floor: a tool loop on the openai SDK and nothing else. */
export function rawLoop(baseURL: string, options: LoopOptions = {}): () => Promise<void> {
  const { afterTurn, maxRetries = 0 } = options;
  const client = new OpenAI({ baseURL, apiKey: "bench", maxRetries });
  const tools = [
    {
      type: "function" as const,
      function: {
        name: "echo",
        description: "Echo.",
        parameters: { type: "object", properties: { text: { type: "string" } } },
      },
    },
  ];
  return async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "say hello" }];
    for (let turn = 0; ; turn++) {
      const stream = await client.chat.completions.create({
        model: "scripted",
        messages,
        tools,
        stream: true,
      });
      let text = "";
      const calls: Array<{ id: string; name: string; args: string }> = [];
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta;
        if (delta?.content) text += delta.content;
        for (const c of delta?.tool_calls ?? []) {
          calls[c.index] ??= { id: "", name: "", args: "" };
          const slot = calls[c.index] as { id: string; name: string; args: string };
          if (c.id) slot.id = c.id;
          if (c.function?.name) slot.name += c.function.name;
          if (c.function?.arguments) slot.args += c.function.arguments;
        }
      }
      await afterTurn?.(turn, calls.length === 0);
      if (calls.length === 0) return;
      messages.push({
        role: "assistant",
        content: text || null,
        tool_calls: calls.map((c) => ({
          id: c.id,
          type: "function",
          function: { name: c.name, arguments: c.args },
        })),
      });
      for (const c of calls)
        messages.push({ role: "tool", tool_call_id: c.id, content: echo(JSON.parse(c.args).text) });
    }
  };
}

/** The peer: an @openai/agents agent with the same tool, on the same server. */
export function openaiAgents(
  baseURL: string,
  options: Pick<LoopOptions, "maxRetries"> = {},
): () => Promise<void> {
  setTracingDisabled(true);
  const client = new OpenAI({ baseURL, apiKey: "bench", maxRetries: options.maxRetries ?? 0 });
  const agent = new Agent({
    name: "bench",
    instructions: "Use the tool.",
    model: new OpenAIChatCompletionsModel(client, "scripted"),
    tools: [
      tool({
        name: "echo",
        description: "Echo.",
        parameters: z.object({ text: z.string() }),
        execute: async ({ text }) => echo(text),
      }),
    ],
  });
  return async () => {
    const result = await run(agent, "say hello", { stream: true });
    await result.completed;
  };
}

/** Echoes its text: the one tool of the overhead and scale runs. */
export const echoTool = defineTool({
  name: "echo",
  description: "Echo.",
  effect: "read",
  parameters: z.object({ text: z.string() }),
  execute: ({ text }) => ({ ok: true, output: echo(text) }),
}) as Tool;

export interface BenchRuntimeOptions {
  /** Fields of the "bench" agent's definition. */
  agent?: Record<string, unknown>;
  /** More agents beside "bench" (its subagents), by name: the fields of their definitions. */
  others?: Record<string, Record<string, unknown>>;
  /** Fields of troupe.yaml beside the model and the prefix. */
  troupe?: Record<string, unknown>;
  approver?: Approver;
  telemetry?: Telemetry;
}

/**
 * A Runtime with one agent, "bench", that has `tool` (plus what `agent` adds to its definition), and
 * any `others`, each with `tool` too, on the scripted model at `baseURL`.
 */
export function benchRuntime(
  baseURL: string,
  bus: Bus,
  tool: Tool,
  options: BenchRuntimeOptions = {},
): Runtime {
  const defined = (name: string, fields: Record<string, unknown> = {}) => {
    const definition = agentSchema.parse({ name, description: "Bench.", tools: [tool.name], ...fields });
    return [name, { definition, file: new YamlFile(`${name}.yaml`, "") }] as const;
  };
  return new Runtime({
    config: {
      dir: process.cwd(),
      file: undefined,
      troupe: troupeConfigSchema.parse({
        defaultModel: "scripted",
        nats: { prefix: bus.subjects.prefix },
        providers: { openai: { baseURL, models: { scripted: {} } } },
        ...options.troupe,
      }),
      agents: new Map([
        defined("bench", options.agent),
        ...Object.entries(options.others ?? {}).map(([name, fields]) => defined(name, fields)),
      ]),
    },
    bus,
    env: {},
    tools: [tool],
    ...(options.approver ? { approver: options.approver } : {}),
    ...(options.telemetry ? { telemetry: options.telemetry } : {}),
    workspace: process.cwd(),
  });
}

/** The bench agent with the echo tool, and one two-turn run of it. */
export function troupe(
  baseURL: string,
  bus: Bus,
  telemetry?: Telemetry,
): { runtime: Runtime; once: () => Promise<void> } {
  const runtime = benchRuntime(baseURL, bus, echoTool, telemetry ? { telemetry } : {});
  return { runtime, once: async () => void (await runtime.start({ task: "say hello" }).done) };
}

/**
 * The durable floor: the least a run through a broker can do and still be durable and observable,
 * built on the raw SDK loop (a). A client subscribes to the run's events and asks a host (a NATS
 * request) to start it; the host runs the loop and appends one event per turn to JetStream, acked
 * before the loop goes on; the client waits for the last one. No snapshots, journal or run index:
 * whatever Troupe through its daemon costs beyond this is its own.
 */
async function durableFloor(
  baseURL: string,
  nats: () => Promise<Bus>,
): Promise<{ once: () => Promise<void>; close: () => Promise<void> }> {
  const hostBus = await nats();
  const clientBus = await nats();
  // The client may see a run's last event before the host has its ack: close waits for the loops.
  const running = new Set<Promise<void>>();
  const serving = hostBus.reply(hostBus.subjects.api("floor.start"), async (request) => {
    const runId = request.runId;
    const append = (turn: number, last: boolean) =>
      hostBus.eventLog
        .append(
          makeEnvelope({ runId, agentId: "a", seq: turn, type: last ? "floor.stopped" : "turn", data: {} }),
        )
        .then(() => undefined);
    const loop = rawLoop(baseURL, { afterTurn: append })();
    running.add(loop);
    void loop.finally(() => running.delete(loop));
    return makeEnvelope({ runId, agentId: "host", seq: 0, type: "floor.started", data: {} });
  });
  await hostBus.flush();
  let runs = 0;
  const once = async () => {
    const runId = `floor${runs++}`;
    let stopped: () => void = () => {};
    const finished = new Promise<void>((resolve) => (stopped = resolve));
    const sub = clientBus.subscribe(clientBus.subjects.events(runId), (envelope) => {
      if (envelope.type === "floor.stopped") stopped();
    });
    await clientBus.request(
      clientBus.subjects.api("floor.start"),
      makeEnvelope({ runId, agentId: "cli", seq: 0, type: "floor.start", data: {} }),
    );
    await finished;
    sub.unsubscribe();
  };
  const close = async () => {
    serving.unsubscribe();
    await Promise.all(running);
    await clientBus.close();
    await hostBus.close();
  };
  return { once, close };
}

/**
 * A run through the daemon, as `troupe run` makes one (`runThroughDaemon`). The daemon (its Runtime
 * on its own connection) runs in this process; the client has a connection of its own.
 */
async function throughDaemon(
  baseURL: string,
  nats: () => Promise<Bus>,
  secured?: { client: () => Promise<Bus> },
): Promise<{ once: () => Promise<void>; close: () => Promise<void> }> {
  const daemonBus = await nats();
  const { runtime } = troupe(baseURL, daemonBus);
  await runtime.open();
  const daemon = new Daemon(runtime, silentLogger);
  await daemon.start();
  const clientBus = await (secured?.client ?? nats)();
  const once = () => runThroughDaemon(clientBus);
  const close = async () => {
    await daemon.stop();
    await runtime.close();
    await clientBus.close();
    await daemonBus.close();
  };
  return { once, close };
}

export async function measureOverhead(
  n: number,
  url: string,
  prefix: string,
  floorPrefix: string,
): Promise<OverheadResult[]> {
  const nats = () => NatsBus.connect({ url, prefix });
  // What a user runs by default: TLS, and the client in the people's account reading by gets.
  const byDefault = await defaultServer([prefix]);
  const server = await scripted();
  const closing: Array<() => Promise<void>> = [];
  try {
    const local = troupe(server.baseURL, new LocalBus({ prefix: "benchlocal" }));
    await local.runtime.open();
    closing.push(() => local.runtime.close());
    // c with telemetry on: spans and metrics over OTLP/HTTP to a receiver on loopback that takes them.
    const sink = await otlpSink();
    closing.push(sink.close);
    const telemetry = await openTelemetry(
      telemetryConfigSchema.parse({ enabled: true, endpoint: sink.url }),
      { role: "bench", env: {} },
    );
    closing.push(async () => telemetry?.shutdown());
    const traced = troupe(server.baseURL, new LocalBus({ prefix: "benchtraced" }), telemetry);
    await traced.runtime.open();
    closing.push(() => traced.runtime.close());
    const daemon = await throughDaemon(server.baseURL, nats);
    closing.push(daemon.close);
    // The daemon's runtime alone: the same durable run without the API request and the client's read.
    const natsBus = await nats();
    closing.push(() => natsBus.close());
    const durable = troupe(server.baseURL, natsBus);
    await durable.runtime.open();
    closing.push(() => durable.runtime.close());
    const floor = await durableFloor(server.baseURL, () => NatsBus.connect({ url, prefix: floorPrefix }));
    closing.push(floor.close);
    // The same daemon's runs, asked for and followed from another process (one daemon per prefix).
    const client = await clientApart(url, prefix);
    closing.push(client.close);
    const secured = await throughDaemon(server.baseURL, () => byDefault.as("daemon", prefix), {
      client: () => byDefault.as("client", prefix),
    });
    closing.push(secured.close);
    return await measure(server, n, [
      { name: "a: raw openai SDK loop (floor)", once: rawLoop(server.baseURL) },
      { name: "b: @openai/agents 0.14 (tracing off)", once: openaiAgents(server.baseURL) },
      { name: "c: Troupe on LocalBus", once: local.once },
      { name: "d: Troupe through the daemon on NATS (events + snapshots)", once: daemon.once },
      { name: "d′: the daemon's runtime on NATS, in process", once: durable.once },
      { name: "e: durable floor (a + a request, an acked append per turn)", once: floor.once },
      { name: "d″: d with the client in a process of its own, as troupe run is", once: client.run },
      {
        name: "d‴: d on the default server (TLS, two accounts, the client reading by gets)",
        once: secured.once,
      },
      { name: "c‡: c with telemetry on (spans and metrics over OTLP/HTTP to loopback)", once: traced.once },
    ]);
  } finally {
    for (const close of closing.reverse()) await close();
    await server.close();
    await byDefault.stop();
  }
}

/** An OTLP/HTTP endpoint on loopback that takes whatever is sent (the bench measures the sender). */
async function otlpSink(): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((request, response) => {
    request.resume();
    request.on("end", () => response.writeHead(200, { "content-type": "application/x-protobuf" }).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** What one two-turn run writes to NATS: messages appended to the event log, and writes to the buckets. */
export interface RunWrites {
  events: number;
  kvWrites: number;
}

/**
 * The writes of one two-turn run of the daemon's runtime on NATS (d′'s run), counted by the
 * streams' last sequence numbers before and after it (a bucket keeps one value a key, so its count
 * of messages would not show a key written twice).
 */
export async function writesPerRun(url: string, prefix: string): Promise<RunWrites> {
  const server = await scripted();
  const bus = await NatsBus.connect({ url, prefix });
  const { runtime, once } = troupe(server.baseURL, bus);
  try {
    await runtime.open();
    await once(); // warm up: the buckets exist
    const { jetstreamManager } = await import("@nats-io/jetstream");
    const jsm = await jetstreamManager(bus.connection);
    const lastSeqs = async () => {
      const seqs = new Map<string, number>();
      for await (const info of jsm.streams.list())
        if (info.config.name === bus.subjects.eventStream || info.config.name.startsWith(`KV_${prefix}_`))
          seqs.set(info.config.name, info.state.last_seq);
      return seqs;
    };
    const before = await lastSeqs();
    await once();
    const after = await lastSeqs();
    let events = 0;
    let kvWrites = 0;
    for (const [name, seq] of after) {
      const written = seq - (before.get(name) ?? 0);
      if (name === bus.subjects.eventStream) events += written;
      else kvWrites += written;
    }
    return { events, kvWrites };
  } finally {
    await runtime.close();
    await bus.close();
    await server.close();
  }
}
