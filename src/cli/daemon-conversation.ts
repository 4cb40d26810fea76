import { resolve as resolvePath } from "node:path";
import type { CompactionReport } from "../actors/agent-deps.js";
import { newRunId } from "../actors/run-ids.js";
import { RunTreeBuilder } from "../actors/run-tree.js";
import { RemoteError } from "../bus/bus.js";
import { followRun } from "../bus/follow-run.js";
import { BusUnavailableError, ServerNotOursError } from "../bus/nats-connect.js";
import type { LoadedConfig } from "../config/load.js";
import type { ApprovalPolicy } from "../config/policy-schemas.js";
import type { RunRecord } from "../daemon/api.js";
import type { Logger } from "../log.js";
import type { AgentOutput } from "../machines/agent-types.js";
import { callApi, connectClient } from "./client.js";
import type { Conversation, ConversationOptions } from "./conversation.js";
import { followDaemonTurn } from "./daemon-turn.js";
import { ConversationError } from "./local-conversation.js";
import { humanRenderer, jsonRenderer, screenOf } from "./render.js";
import { DaemonUnreachableError, submit } from "./run-client.js";
import type { TtyApprover } from "./tty-approver.js";

type ClientBus = Awaited<ReturnType<typeof connectClient>>;

/** How long a chat waits for the daemon to compact a run: its model summarises the conversation. */
const COMPACT_WAIT_MS = 300_000;

/**
 * A conversation with a run on the daemon: the first turn starts it (`runs.start`), each next one
 * hands a running run the message (`runs.followUp`) or brings a stopped one back with it
 * (`runs.resume` with `text`). Each turn is followed as `troupe run` follows a run.
 */
export async function openDaemonConversation(
  config: LoadedConfig,
  options: ConversationOptions,
  log: Logger,
): Promise<Conversation> {
  const waitMs = Math.max(0, Number(options.waitDaemon ?? 30)) * 1000;
  const bus = await connectClient(config, "troupe-chat", log, Math.max(1000, waitMs)).catch((error) => {
    throw error instanceof BusUnavailableError && !(error instanceof ServerNotOursError)
      ? new DaemonUnreachableError(`${error.message} (waited ${waitMs / 1000} s)`, { cause: error })
      : error;
  });
  try {
    const record = options.runId ? await recordOf(bus, config, options.runId) : undefined;
    return new DaemonConversation(bus, config, options, record, waitMs, log);
  } catch (error) {
    await bus.close();
    throw error;
  }
}

/** The daemon's record of `runId`; one line when it has none. */
async function recordOf(bus: ClientBus, config: LoadedConfig, runId: string): Promise<RunRecord> {
  try {
    return (await callApi(bus, config, "runs.get", { runId })) as RunRecord;
  } catch (error) {
    if (error instanceof RemoteError && error.message.includes(`no run ${runId}`))
      throw new ConversationError(`no run ${runId} here or on the daemon (troupe runs lists them)`);
    throw error;
  }
}

class DaemonConversation implements Conversation {
  readonly where = "daemon";
  readonly tree = new RunTreeBuilder();
  #runId: string | undefined;
  #agentId: string | undefined;
  #approval: ApprovalPolicy | undefined;
  #model: string | undefined;
  /** The ids of the run's events read so far: each counted once in `tree`. */
  readonly #seen = new Set<string>();
  #asker: TtyApprover | undefined;

  constructor(
    private readonly bus: ClientBus,
    private readonly config: LoadedConfig,
    private readonly options: ConversationOptions,
    record: RunRecord | undefined,
    private readonly waitMs: number,
    private readonly log: Logger,
  ) {
    this.#runId = record?.runId;
    this.#agentId = record?.agentId;
    this.#asker = options.asker?.();
  }

  get runId(): string | undefined {
    return this.#runId;
  }

  async turn(text: string): Promise<AgentOutput["reason"]> {
    const runId = this.#runId ?? newRunId();
    const reading = new AbortController();
    this.#reading = reading;
    const asker = this.#asker;
    const status = (line: string) => (asker ? asker.say(line) : void process.stderr.write(`${line}\n`));
    const events = followRun(this.bus, runId, {
      signal: reading.signal,
      onRetry: () => status("troupe: reconnecting to NATS…"),
    })[Symbol.asyncIterator]();
    const first = events.next();
    first.catch(() => {}); // awaited below, once the daemon has answered
    const renderer = this.options.json
      ? jsonRenderer()
      : humanRenderer(() => this.#agentId, ...screenOf(this.options));
    try {
      // Events before this turn's ask are the run's past: counted, not shown again. (The daemon
      // stamps them; it runs on this machine's clock, or one kept near it.)
      const since = Date.now();
      const agentId = await this.#ask(runId, text).catch((error: unknown) => {
        this.#approval = undefined;
        this.#model = undefined;
        throw error;
      });
      this.#runId = runId;
      this.#agentId = agentId;
      const output = await followDaemonTurn(
        this.bus,
        this.config,
        {
          runId,
          agentId,
          events,
          first,
          renderer,
          reading,
          asker,
          status,
          via: "troupe chat",
          isNew: (envelope) => envelope.ts >= since,
          seen: (envelope) => {
            if (this.#seen.has(envelope.id)) return;
            this.#seen.add(envelope.id);
            this.tree.apply(envelope);
          },
        },
        this.log,
      );
      this.#ended = output !== undefined;
      return output?.reason ?? "aborted";
    } finally {
      renderer.close();
      reading.abort();
      this.#reading = undefined;
      await events.return?.();
    }
  }

  #reading: AbortController | undefined;
  /** The last turn was seen to end with the run's first agent stopping. */
  #ended = false;

  /** Asks the daemon for the turn: its run started, handed the message, or brought back with it. */
  async #ask(runId: string, text: string): Promise<string> {
    const { bus, config, options } = this;
    if (!this.#agentId) {
      const started = await submit(bus, config, Date.now() + this.waitMs, {
        task: text,
        runId,
        agent: options.agent,
        approval: options.approval,
        mode: options.mode,
        sandbox: options.sandbox,
        skill: options.skill,
        // The daemon takes it only inside its workspaces, and says so otherwise.
        ...(options.workspace ? { workspace: resolvePath(options.workspace) } : {}),
      });
      return started.agentId;
    }
    const record = await this.#settled(runId);
    if (record.status === "running") {
      await callApi(bus, config, "runs.followUp", { runId, text });
      return record.agentId;
    }
    const resumed = (await callApi(bus, config, "runs.resume", {
      runId,
      text,
      approval: this.#approval,
      model: this.#model,
    })) as { agentId: string };
    return resumed.agentId;
  }

  /**
   * The run's record; after a turn this client saw end, once it says so (the daemon writes it just
   * after the run's last event): a follow-up handed to a run that has just stopped would be lost.
   */
  async #settled(runId: string): Promise<RunRecord> {
    for (let waited = 0; ; waited += 100) {
      const record = await recordOf(this.bus, this.config, runId);
      if (record.status !== "running" || !this.#ended || waited >= 5000) return record;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async steer(text: string): Promise<void> {
    if (!this.#runId || !this.#reading) throw new ConversationError("no turn is going on to steer");
    await this.#control("runs.steer", { runId: this.#runId, text });
  }

  async compact(): Promise<{ tokensBefore: number; tokensAfter: number }> {
    if (!this.#runId || !this.#agentId)
      throw new ConversationError("nothing to compact yet: the run starts with the first line");
    let report: CompactionReport;
    try {
      // A summary takes the model a while: the daemon answers once it is done.
      report = (await callApi(
        this.bus,
        this.config,
        "runs.compact",
        { runId: this.#runId },
        COMPACT_WAIT_MS,
      )) as CompactionReport;
    } catch (error) {
      if (error instanceof RemoteError && error.remoteName === "RequestRefusedError")
        throw new ConversationError(error.message.slice(error.subject.length + 2), { cause: error });
      throw error;
    }
    if ("error" in report) throw new ConversationError(`the conversation was not compacted: ${report.error}`);
    return report;
  }

  async abort(): Promise<void> {
    if (!this.#runId || !this.#reading) return;
    await this.#control("runs.abort", { runId: this.#runId, reason: "interrupted by the user" });
  }

  /** A command for the run; the daemon's refusal (the run stopped meanwhile, too much unread) is one line. */
  async #control(verb: "runs.steer" | "runs.abort", data: { runId: string; text?: string; reason?: string }) {
    try {
      await callApi(this.bus, this.config, verb, data as never);
    } catch (error) {
      if (error instanceof RemoteError && error.remoteName === "RequestRefusedError")
        throw new ConversationError(error.message.slice(error.subject.length + 2), { cause: error });
      throw error;
    }
  }

  setApproval(policy: ApprovalPolicy): void {
    this.#approval = policy;
  }

  setModel(model: string): void {
    this.#model = model;
  }

  async close(): Promise<void> {
    this.#reading?.abort();
    await this.bus.close();
  }
}
