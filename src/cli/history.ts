import { join } from "node:path";
import type { Runtime } from "../actors/runtime.js";
import { denyingApprover } from "../approvals/approver.js";
import { newStats, RemoteError } from "../bus/bus.js";
import { EventLogUnreadableError, FileStore } from "../bus/file-store.js";
import { followRun } from "../bus/follow-run.js";
import { Intake } from "../bus/intake.js";
import { openRuntime } from "../compose/runtime.js";
import { processTelemetry } from "../compose/telemetry.js";
import { type ConfigChoice, loadConfig } from "../config/load.js";
import { dataDir } from "../config/paths.js";
import type { RunList } from "../daemon/run-index.js";
import { UserError } from "../errors.js";
import { type AgentEvent, type AgentEventType, isEvent } from "../events/agent-events.js";
import type { Envelope } from "../events/envelope.js";
import type { Logger } from "../log.js";
import { jsonVisible, visible, visibleLine } from "../util/visible.js";
import { callApi, connectClient, leftOutLine, whyNoList } from "./client.js";
import { followDaemonTurn } from "./daemon-turn.js";
import { projectRules } from "./project-rules.js";
import { humanRenderer, jsonRenderer } from "./render.js";
import { localBus, RUN_EXIT, Signals } from "./run.js";
import { table } from "./table.js";
import { ttyApprover } from "./tty-approver.js";

export class HistoryError extends UserError {
  override name = "HistoryError";
}

const CONTINUE = "Continue the task where you left off.";

interface RunRow {
  runId: string;
  where: "local" | "daemon";
  agent: string;
  state: string;
  /** Spent so far (local) or in all (a daemon run once it stopped); undefined while not known. */
  tokens: number | undefined;
  costUsd: number | undefined;
  startedAt: number;
  task: string;
}

export function storeOf(config: ReturnType<typeof loadConfig>): FileStore {
  return new FileStore(join(dataDir(config.troupe.dataDir), "local", config.troupe.nats.prefix));
}

/**
 * A local run's events from the data dir, as they are read from it, a line at a time; checked as the
 * bus checks what it reads (src/bus/intake.ts): a line that is no envelope, or an event whose data
 * does not fit its type, is left out with a warning. Undefined when the data dir has no such run; a
 * log that cannot be read throws `EventLogUnreadableError`.
 */
export function eventStreamOf(store: FileStore, runId: string, log: Logger): Iterable<Envelope> | undefined {
  const lines = store.eventLines(runId);
  if (!lines) return undefined;
  return (function* () {
    const intake = new Intake(newStats(), log);
    for (const line of lines) yield* intake.decodeAll(line, `store ${runId}`);
  })();
}

/** A local run's events from the data dir, all of them (see `eventStreamOf`). */
export function eventsOf(store: FileStore, runId: string, log: Logger): Envelope[] | undefined {
  const events = eventStreamOf(store, runId, log);
  return events && [...events];
}

const isRoot = (e: Envelope): e is AgentEvent<"agent.started"> =>
  isEvent(e, "agent.started") && e.parentId === undefined;

/** The first agent of a run: the one no other spawned. */
function rootOf(events: Envelope[]): AgentEvent<"agent.started"> | undefined {
  return events.find(isRoot);
}

/** The last event of `type` from `agentId`. */
function lastOf<T extends AgentEventType>(
  events: Envelope[],
  type: T,
  agentId: string,
): AgentEvent<T> | undefined {
  return events.findLast((e): e is AgentEvent<T> => isEvent(e, type) && e.agentId === agentId);
}

/**
 * A local run as `troupe runs` lists it, from one pass over its log that keeps only what the row
 * says: its first agent's start, last stop and last usage. Undefined when it has no first agent.
 */
export function localRow(
  store: FileStore,
  runId: string,
  log: Logger,
): (RunRow & { workspace?: string | undefined }) | undefined {
  let started: AgentEvent<"agent.started"> | undefined;
  let stopped: AgentEvent<"agent.stopped"> | undefined;
  let updated: AgentEvent<"usage.updated"> | undefined;
  for (const e of eventStreamOf(store, runId, log) ?? []) {
    if (!started) {
      if (isRoot(e)) started = e;
    } else if (e.agentId === started.agentId) {
      // A resumed run stops again: its last word counts.
      if (isEvent(e, "agent.stopped")) stopped = e;
      else if (isEvent(e, "usage.updated")) updated = e;
    }
  }
  if (!started) return undefined;
  const usage = stopped?.data.total.usage ?? updated?.data.usage;
  return {
    runId,
    where: "local",
    agent: started.data.name,
    state: stopped ? stopped.data.reason : "unfinished",
    tokens: (usage?.inputTokens ?? 0) + (usage?.outputTokens ?? 0),
    costUsd: usage?.costUsd ?? 0,
    startedAt: started.ts,
    task: started.data.task,
    workspace: started.data.workspace,
  };
}

/**
 * `troupe runs`: local runs from the data dir, and the daemon's when one answers. A local run whose
 * log cannot be read is left out with one line that says which, and how to forget it.
 */
export async function runRuns(where: ConfigChoice, flags: { json?: boolean }, log: Logger): Promise<number> {
  const config = loadConfig(where);
  const store = storeOf(config);
  const rows: RunRow[] = [];
  for (const runId of store.runs()) {
    try {
      const found = localRow(store, runId, log);
      if (found) {
        // The list says where each run is, not where it worked.
        const { workspace: _, ...row } = found;
        rows.push(row);
      }
    } catch (error) {
      if (!(error instanceof EventLogUnreadableError)) throw error;
      process.stderr.write(`troupe: not listed: ${visibleLine(error.message)}\n`);
    }
  }
  try {
    const bus = await connectClient(config, "troupe-runs", log, 1000);
    try {
      const list = (await callApi(bus, config, "runs.list", {})) as RunList;
      const leftOut = leftOutLine(list);
      if (leftOut) process.stderr.write(`troupe: the daemon's list: ${leftOut.slice(1, -1)}\n`);
      for (const run of list.runs)
        rows.push({
          runId: run.runId,
          where: "daemon",
          agent: run.agent,
          state: run.status,
          tokens: run.usage ? run.usage.inputTokens + run.usage.outputTokens : undefined,
          costUsd: run.usage?.costUsd,
          startedAt: run.startedAt,
          task: run.task,
        });
    } finally {
      await bus.close();
    }
  } catch (error) {
    // No daemon (or no NATS): the local runs are the whole list, and the list says so.
    const { url, prefix } = config.troupe.nats;
    process.stderr.write(
      `troupe: the daemon's runs are not listed: ${visible(whyNoList(error))} on ${url} (prefix ${prefix})\n`,
    );
  }
  rows.sort((a, b) => a.startedAt - b.startedAt);
  if (flags.json) {
    process.stdout.write(`${jsonVisible(JSON.stringify(rows))}\n`);
    return 0;
  }
  const now = Date.now();
  const age = (ms: number) =>
    ms < 3_600_000 ? `${Math.round(ms / 60_000)}m` : `${Math.round(ms / 3_600_000)}h`;
  process.stdout.write(
    `${table(
      ["RUN", "WHERE", "AGENT", "STATE", "SPEND", "AGE", "TASK"],
      rows.map((r) => [
        r.runId,
        r.where,
        visibleLine(r.agent),
        r.state,
        r.tokens === undefined ? "-" : `${r.tokens} tokens $${(r.costUsd ?? 0).toFixed(4)}`,
        age(now - r.startedAt),
        visibleLine(r.task).slice(0, 40),
      ]),
    )}\n`,
  );
  return 0;
}

/** `troupe resume RUN_ID`: a local run from its snapshot in the data dir, else the daemon's. */
export async function runResume(
  where: ConfigChoice,
  runId: string,
  flags: { json?: boolean },
  log: Logger,
): Promise<number> {
  const config = loadConfig(where);
  const store = storeOf(config);
  const events = eventsOf(store, runId, log);
  if (!events) {
    const bus = await connectClient(config, "troupe-resume", log);
    const reading = new AbortController();
    const events = followRun(bus, runId, { signal: reading.signal })[Symbol.asyncIterator]();
    const first = events.next();
    first.catch(() => {}); // awaited below, once the daemon has answered
    try {
      const since = Date.now();
      const resumed = await resumeOrAttach(bus, config, runId);
      // It asks on the terminal it runs in, as `troupe run` does, a question asked before too.
      const asker = process.stdin.isTTY && process.stderr.isTTY ? ttyApprover() : undefined;
      const renderer = flags.json ? jsonRenderer() : humanRenderer(() => resumed.agentId);
      try {
        const output = await followDaemonTurn(
          bus,
          config,
          {
            runId,
            agentId: resumed.agentId,
            events,
            first,
            renderer,
            reading,
            asker,
            status: (line) => (asker ? asker.say(line) : void process.stderr.write(`${line}\n`)),
            via: "troupe resume",
            isNew: (envelope) => envelope.ts >= since,
          },
          log,
        );
        return output ? RUN_EXIT[output.reason] : RUN_EXIT.aborted;
      } finally {
        renderer.close();
      }
    } finally {
      reading.abort();
      await events.return?.();
      await bus.close();
    }
  }
  const root = rootOf(events);
  if (!root) throw new HistoryError(`run ${runId} has no first agent in its log`);
  const lastStop = lastOf(events, "agent.stopped", root.agentId)?.data;
  if (lastStop?.reason === "done") {
    throw new HistoryError(`run ${runId} is done; nothing to resume (troupe replay ${runId} shows it)`);
  }
  const bus = localBus(config, log);
  // A resumed run asks on the terminal it runs in, as the first did, once its question is shown.
  const displayed = new Signals();
  const interactive = process.stdin.isTTY === true && process.stderr.isTTY === true;
  const telemetry = await processTelemetry(config, "local", log);
  const runtime = await openRuntime({
    config,
    log,
    bus,
    ...(telemetry ? { telemetry } : {}),
    // Where it worked (`troupe run -w DIR`), not where this command runs.
    ...(root.data.workspace ? { workspace: root.data.workspace } : {}),
    approver: interactive
      ? ttyApprover((callId) => displayed.wait(callId), process.stdin, process.stderr, projectRules(config))
      : denyingApprover("no terminal to ask for approval: run troupe resume from a terminal"),
  });
  try {
    const handle = await runtime.resume(runId, root.agentId, { as: "own-record", followUp: CONTINUE });
    if (!handle) throw new HistoryError(`run ${runId} has no snapshot to resume from`);
    const before = new Set(events.map((e) => e.id));
    return await follow(bus, handle.agentId, runId, flags, (e) => !before.has(e.id), {
      shown: (envelope) => {
        if (isEvent(envelope, "approval.requested")) displayed.fire(envelope.data.callId);
      },
    });
  } finally {
    await runtime.close();
    await telemetry?.shutdown();
    await bus.close();
  }
}

/**
 * Asks the daemon to bring the run back; one it runs already (the daemon brought it back when it
 * started) is followed from here, as `troupe run --id` follows a run again, and said so.
 */
async function resumeOrAttach(
  bus: Awaited<ReturnType<typeof connectClient>>,
  config: ReturnType<typeof loadConfig>,
  runId: string,
): Promise<{ agentId: string }> {
  try {
    return (await callApi(bus, config, "runs.resume", { runId })) as { agentId: string };
  } catch (error) {
    if (!(error instanceof RemoteError && error.message.includes(`run ${runId} is running`))) throw error;
    process.stderr.write(`troupe: run ${runId} is running on the daemon; following it\n`);
    return (await callApi(bus, config, "runs.get", { runId })) as { agentId: string };
  }
}

/** `troupe replay RUN_ID`: a run's events as observe prints them. */
export async function runReplay(
  where: ConfigChoice,
  runId: string,
  flags: { json?: boolean },
  log: Logger,
): Promise<number> {
  const config = loadConfig(where);
  const events = eventStreamOf(storeOf(config), runId, log);
  if (events) {
    // Shown as it is read: the log is never held whole.
    let first: string | undefined;
    const renderer = flags.json || !process.stdout.isTTY ? jsonRenderer() : humanRenderer(() => first);
    try {
      for (const envelope of events) {
        first ??= envelope.agentId;
        renderer.event({ envelope });
      }
    } finally {
      renderer.close();
    }
    return 0;
  }
  const bus = await connectClient(config, "troupe-replay", log);
  // A daemon's run as a local one is shown: for people on a terminal, as JSON lines otherwise.
  let root: string | undefined;
  const renderer = flags.json || !process.stdout.isTTY ? jsonRenderer() : humanRenderer(() => root);
  try {
    let seen = 0;
    for await (const event of bus.eventLog.read({ runId })) {
      root ??= event.envelope.agentId;
      renderer.event(event);
      seen++;
    }
    if (seen === 0) throw new HistoryError(`no run ${runId} here or on the daemon; troupe runs lists them`);
    return 0;
  } finally {
    renderer.close();
    await bus.close();
  }
}

/**
 * Shows a resumed run from the start of its log, skipping what came before the resume; `signal`
 * ends the reading early.
 */
async function follow(
  bus: { eventLog: Runtime["bus"]["eventLog"] },
  agentId: string,
  runId: string,
  flags: { json?: boolean },
  isNew: (envelope: Envelope) => boolean,
  { shown = () => {}, signal }: { shown?: (envelope: Envelope) => void; signal?: AbortSignal } = {},
): Promise<number> {
  const renderer = flags.json ? jsonRenderer() : humanRenderer(() => agentId);
  try {
    for await (const event of bus.eventLog.read({ runId, follow: true, signal })) {
      if (!isNew(event.envelope)) continue;
      renderer.event(event);
      shown(event.envelope);
      const { envelope } = event;
      if (isEvent(envelope, "agent.stopped") && envelope.agentId === agentId)
        return RUN_EXIT[envelope.data.reason];
    }
    return RUN_EXIT.aborted;
  } finally {
    renderer.close();
  }
}
