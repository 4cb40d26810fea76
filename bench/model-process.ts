/**
 * The scripted model server in a process of its own, so that a measurement of memory counts only
 * the agents' side of each open request. Run as a script it serves the named scenario and prints its
 * base URL; `startModelProcess` spawns it and stops it by its pid.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import {
  type ChatRequest,
  ScriptedModelServer,
  type ScriptRule,
} from "../src/testing/scripted-model-server.js";
import { stopChild } from "./processes.js";

const toolTurns = (messages: ReadonlyArray<{ role: string }>) =>
  messages.filter((m) => m.role === "tool").length;

/** Subagents a lead spawns at once in the "lead-and-workers-20ms" scenario. */
export const WORKERS_PER_LEAD = 100;

/** A tool call, as the scripted model makes one. */
type ToolCall = { name: string; arguments: Record<string, unknown> };

/**
 * Two calls of `call`, then an answer; each reply after `delayMs`. A stamped answer says when it is
 * sent (`done@<ms since the epoch>`): made `delayMs` before and stamped with that time, so a reader's
 * latency from it is, if anything, too long by the timer's lateness.
 */
const threeTurns = (call: ToolCall, delayMs = 20, stamped = false): ScriptRule[] => [
  {
    match: { where: (r) => toolTurns(r.messages) < 2 },
    reply: { toolCalls: [call], chunks: 1, delayMs },
    times: Number.POSITIVE_INFINITY,
  },
  {
    match: { where: (r) => toolTurns(r.messages) >= 2 },
    reply: stamped
      ? () => ({ text: `done@${Date.now() + delayMs}`, chunks: 1, delayMs })
      : { text: "done", chunks: 1, delayMs },
    times: Number.POSITIVE_INFINITY,
  },
];

const echoCall: ToolCall = { name: "echo", arguments: { text: "hello" } };

const offersWorkers = (r: ChatRequest) =>
  r.tools?.some((tool) => tool.function.name === "subagent_worker") ?? false;

/**
 * A lead (offered `subagent_worker`) spawns `WORKERS_PER_LEAD` workers in one reply, then answers;
 * each worker does three turns calling `call`. Every reply after `delayMs`.
 */
const leadAndWorkers = (call: ToolCall, delayMs = 20, stamped = false): ScriptRule[] => [
  {
    match: { where: (r) => offersWorkers(r) && toolTurns(r.messages) === 0 },
    reply: {
      toolCalls: Array.from({ length: WORKERS_PER_LEAD }, (_, i) => ({
        name: "subagent_worker",
        arguments: { task: `call ${call.name}, twice (${i})` },
      })),
      chunks: 1,
      delayMs,
    },
    times: Number.POSITIVE_INFINITY,
  },
  {
    match: { where: (r) => offersWorkers(r) && toolTurns(r.messages) > 0 },
    reply: { text: "done", chunks: 1, delayMs },
    times: Number.POSITIVE_INFINITY,
  },
  ...threeTurns(call, delayMs, stamped),
];

const readNotes: ToolCall = { name: "read_file", arguments: { path: "notes.txt" } };

/** Scenarios by name: rules with functions cannot cross a process boundary, names can. */
const scenarios: Record<string, ScriptRule[]> = {
  "three-turns-20ms": threeTurns(echoCall),
  /** Leads of `WORKERS_PER_LEAD` workers, each of which echoes twice, then answers. */
  "lead-and-workers-20ms": leadAndWorkers(echoCall),
  /**
   * The same with workers that read `notes.txt`: a tool every `troupe worker` has, for workers
   * placed on other processes (bench/cluster.ts), where the bench's own echo tool is not.
   */
  "lead-and-readers-20ms": leadAndWorkers(readNotes),
  /** The same at 200 ms a reply, each worker's answer stamped with when it was sent (bench/scale-workers.ts). */
  "lead-and-readers-200ms-stamped": leadAndWorkers(readNotes, 200, true),
  /** A tool call after 10 s: agents wait in their model call long enough to be measured there. */
  "slow-tool-call": [
    {
      reply: { toolCalls: [{ name: "echo", arguments: { text: "hello" } }], chunks: 1, delayMs: 10_000 },
      times: Number.POSITIVE_INFINITY,
    },
  ],
  /** A call of the `note` tool, at once. */
  "note-call": [
    {
      reply: { toolCalls: [{ name: "note", arguments: { text: "hi" } }], chunks: 1 },
      times: Number.POSITIVE_INFINITY,
    },
  ],
};

export interface ModelProcess {
  baseURL: string;
  stop(): Promise<void>;
}

export async function startModelProcess(scenario: keyof typeof scenarios): Promise<ModelProcess> {
  const child: ChildProcess = spawn(process.execPath, [fileURLToPath(import.meta.url), scenario], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const baseURL = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      if (out.includes("\n")) resolve(out.trim());
    });
    child.once("exit", (code) => reject(new Error(`the model server process exited (${code})`)));
  });
  return {
    baseURL,
    stop: () => stopChild(child),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const rules = scenarios[process.argv[2] ?? ""];
  if (!rules) throw new Error(`unknown scenario ${process.argv[2]}; one of ${Object.keys(scenarios)}`);
  const server = await ScriptedModelServer.start(rules);
  // The record of every request is the server's memory, not the agents': it is not kept.
  setInterval(() => server.requests.splice(0), 1000).unref();
  process.stdout.write(`${server.baseURL}\n`);
  process.once("SIGTERM", () => void server.close().then(() => process.exit(0)));
}
