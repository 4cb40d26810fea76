import { join } from "node:path";
import type { AgentEventMap } from "../actors/agent-events.js";
import { Runtime } from "../actors/runtime.js";
import type { Envelope } from "../bus/envelope.js";
import { FileStore } from "../bus/file-store.js";
import { loadConfig } from "../config/load.js";
import { dataDir } from "../config/paths.js";
import type { RunRecord } from "../daemon/api.js";
import { UserError } from "../errors.js";
import type { Logger } from "../log.js";
import type { AgentOutput } from "../machines/agent-types.js";
import { denyingApprover } from "../safety/approver.js";
import { callApi, connectClient, NoDaemonError } from "./client.js";
import { humanRenderer, jsonRenderer } from "./render.js";
import { localBus, RUN_EXIT } from "./run.js";
import { table } from "./table.js";

export class HistoryError extends UserError {
  override name = "HistoryError";
}

const CONTINUE = "Continue the task where you left off.";

interface RunRow {
  runId: string;
  where: "local" | "daemon";
  agent: string;
  state: string;
  tokens: number;
  costUsd: number;
  startedAt: number;
}

export function storeOf(config: ReturnType<typeof loadConfig>): FileStore {
  return new FileStore(join(dataDir(config.troupe.dataDir), "local", config.troupe.nats.prefix));
}

export function eventsOf(store: FileStore, runId: string): Envelope[] | undefined {
  return store.loadEvents(runId)?.map((line) => JSON.parse(line) as Envelope);
}

/** `troupe runs`: local runs from the data dir, and the daemon's when one answers. */
export async function runRuns(
  configPath: string | undefined,
  flags: { json?: boolean },
  log: Logger,
): Promise<number> {
  const config = loadConfig({ config: configPath });
  const store = storeOf(config);
  const rows: RunRow[] = [];
  for (const runId of store.runs()) {
    const events = eventsOf(store, runId) ?? [];
    const started = events.find((e) => e.type === "agent.started" && e.parentId === undefined);
    if (!started) continue;
    // A resumed run stops again: its last word counts.
    const stopped = events.findLast((e) => e.type === "agent.stopped" && e.agentId === started.agentId)
      ?.data as AgentOutput | undefined;
    const usage =
      stopped?.total.usage ??
      events
        .filter((e) => e.type === "usage.updated" && e.agentId === started.agentId)
        .map((e) => (e.data as AgentEventMap["usage.updated"]).usage)
        .at(-1);
    rows.push({
      runId,
      where: "local",
      agent: (started.data as AgentEventMap["agent.started"]).name,
      state: stopped ? stopped.reason : "unfinished",
      tokens: (usage?.inputTokens ?? 0) + (usage?.outputTokens ?? 0),
      costUsd: usage?.costUsd ?? 0,
      startedAt: started.ts,
    });
  }
  try {
    const bus = await connectClient(config, "troupe-runs", log, 1000);
    try {
      const { runs } = (await callApi(bus, config, "runs.list", {})) as { runs: RunRecord[] };
      for (const run of runs)
        rows.push({
          runId: run.runId,
          where: "daemon",
          agent: run.agent,
          state: run.status,
          tokens: 0,
          costUsd: 0,
          startedAt: run.startedAt,
        });
    } finally {
      await bus.close();
    }
  } catch (error) {
    // No daemon (or no NATS): the local runs are the whole list, and the list says so.
    const { url, prefix } = config.troupe.nats;
    const why = error instanceof NoDaemonError ? "no daemon answers" : "cannot reach NATS";
    process.stderr.write(`troupe: the daemon's runs are not listed: ${why} on ${url} (prefix ${prefix})\n`);
  }
  rows.sort((a, b) => a.startedAt - b.startedAt);
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(rows)}\n`);
    return 0;
  }
  const now = Date.now();
  const age = (ms: number) =>
    ms < 3_600_000 ? `${Math.round(ms / 60_000)}m` : `${Math.round(ms / 3_600_000)}h`;
  process.stdout.write(
    `${table(
      ["RUN", "WHERE", "AGENT", "STATE", "SPEND", "AGE"],
      rows.map((r) => [
        r.runId,
        r.where,
        r.agent,
        r.state,
        r.where === "local" ? `${r.tokens} tokens $${r.costUsd.toFixed(4)}` : "-",
        age(now - r.startedAt),
      ]),
    )}\n`,
  );
  return 0;
}

/** `troupe resume RUN_ID`: a local run from its snapshot in the data dir, else the daemon's. */
export async function runResume(
  configPath: string | undefined,
  runId: string,
  flags: { json?: boolean },
  log: Logger,
): Promise<number> {
  const config = loadConfig({ config: configPath });
  const store = storeOf(config);
  const events = eventsOf(store, runId);
  if (!events) {
    const bus = await connectClient(config, "troupe-resume", log);
    try {
      const since = Date.now();
      const resumed = (await callApi(bus, config, "runs.resume", { runId })) as {
        runId: string;
        agentId: string;
      };
      return await follow(bus, resumed.agentId, runId, flags, (e) => e.ts >= since);
    } finally {
      await bus.close();
    }
  }
  const root = events.find((e) => e.type === "agent.started" && e.parentId === undefined);
  if (!root) throw new HistoryError(`run ${runId} has no first agent in its log`);
  const lastStop = events.findLast((e) => e.type === "agent.stopped" && e.agentId === root.agentId)?.data as
    | AgentOutput
    | undefined;
  if (lastStop?.reason === "done") {
    throw new HistoryError(`run ${runId} is done; nothing to resume (troupe replay ${runId} shows it)`);
  }
  const bus = localBus(config, log);
  const runtime = await new Runtime({
    config,
    log,
    bus,
    approver: denyingApprover("no terminal to ask for approval in a resumed run"),
  }).open();
  try {
    const handle = await runtime.resume(runId, root.agentId, { as: "own-record", reopen: CONTINUE });
    if (!handle) throw new HistoryError(`run ${runId} has no snapshot to resume from`);
    const before = new Set(events.map((e) => e.id));
    return await follow(bus, handle.agentId, runId, flags, (e) => !before.has(e.id));
  } finally {
    await runtime.close();
    await bus.close();
  }
}

/** `troupe replay RUN_ID`: a run's events as observe prints them. */
export async function runReplay(
  configPath: string | undefined,
  runId: string,
  flags: { json?: boolean },
  log: Logger,
): Promise<number> {
  const config = loadConfig({ config: configPath });
  const events = eventsOf(storeOf(config), runId);
  if (events) {
    const renderer =
      flags.json || !process.stdout.isTTY ? jsonRenderer() : humanRenderer(() => events[0]?.agentId);
    for (const envelope of events) renderer.event({ envelope });
    renderer.close();
    return 0;
  }
  const bus = await connectClient(config, "troupe-replay", log);
  // A daemon's run as a local one is shown: for people on a terminal, as JSON lines otherwise.
  let root: string | undefined;
  const renderer = flags.json || !process.stdout.isTTY ? jsonRenderer() : humanRenderer(() => root);
  try {
    let seen = 0;
    for await (const event of bus.log.read({ runId })) {
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

/** Shows a resumed run from the start of its log, skipping what came before the resume. */
async function follow(
  bus: { log: Runtime["bus"]["log"] },
  agentId: string,
  runId: string,
  flags: { json?: boolean },
  isNew: (envelope: Envelope) => boolean,
): Promise<number> {
  const renderer = flags.json ? jsonRenderer() : humanRenderer(() => agentId);
  try {
    for await (const event of bus.log.read({ runId, follow: true })) {
      if (!isNew(event.envelope)) continue;
      renderer.event(event);
      if (event.envelope.type === "agent.stopped" && event.envelope.agentId === agentId)
        return RUN_EXIT[(event.envelope.data as AgentOutput).reason];
    }
    return RUN_EXIT.aborted;
  } finally {
    renderer.close();
  }
}
