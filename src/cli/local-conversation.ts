import type { AgentHandle } from "../actors/agent-deps.js";
import { RunTreeBuilder } from "../actors/run-tree.js";
import type { Runtime } from "../actors/runtime.js";
import { denyingApprover } from "../approvals/approver.js";
import { RequestRefusedError } from "../bus/bus.js";
import { openRuntime } from "../compose/runtime.js";
import { processTelemetry } from "../compose/telemetry.js";
import type { LoadedConfig } from "../config/load.js";
import type { ApprovalPolicy } from "../config/policy-schemas.js";
import { UserError } from "../errors.js";
import { isEvent } from "../events/agent-events.js";
import type { Envelope } from "../events/envelope.js";
import type { Logger } from "../log.js";
import { NotStoppedError } from "../machines/agent-reopen.js";
import type { AgentOutput } from "../machines/agent-types.js";
import type { Telemetry } from "../telemetry/telemetry.js";
import type { Conversation, ConversationOptions } from "./conversation.js";
import { eventsOf, HistoryError, storeOf } from "./history.js";
import { humanRenderer, jsonRenderer, screenOf } from "./render.js";
import { localBus, Signals } from "./run.js";

/** A local run's first agent: whether it stopped last (a next turn reopens it) or was cut short. */
interface RootState {
  agentId: string;
  stopped: boolean;
}

/** A local run's first agent as its log says: also who it is and where it worked. */
interface LocalRoot extends RootState {
  name: string;
  workspace: string | undefined;
}

/** What a local run's log says of its first agent; a `HistoryError` when the data dir has no such run. */
function localRoot(events: Envelope[] | undefined, runId: string): LocalRoot {
  if (!events) throw new HistoryError(`no run ${runId} here (troupe runs lists them)`);
  const root = events.find((e) => isEvent(e, "agent.started") && e.parentId === undefined);
  if (!root || !isEvent(root, "agent.started"))
    throw new HistoryError(`run ${runId} has no first agent in its log`);
  const last = events.findLast((e) => e.agentId === root.agentId);
  return {
    agentId: root.agentId,
    name: root.data.name,
    workspace: root.data.workspace,
    stopped: last !== undefined && isEvent(last, "agent.stopped"),
  };
}

/**
 * A conversation with a run in this process, on the in-process bus kept in the data dir (as `troupe
 * run --local`): the first turn starts the run, each next one reopens its first agent from its
 * snapshot with the user's message (or hands it the message, when it has not stopped).
 */
export async function openLocalConversation(
  config: LoadedConfig,
  options: ConversationOptions,
  log: Logger,
): Promise<Conversation> {
  const before = options.runId ? eventsOf(storeOf(config), options.runId, log) : undefined;
  const root = options.runId ? localRoot(before, options.runId) : undefined;
  const bus = localBus(config, log);
  const displayed = new Signals();
  const telemetry = await processTelemetry(config, "local", log);
  let runtime: Runtime;
  try {
    runtime = await openRuntime(
      {
        config,
        log,
        bus,
        ...(telemetry ? { telemetry } : {}),
        // A run gone on with works where it worked (`-w DIR`), not where this command runs.
        workspace: root?.workspace ?? options.workspace,
        approver:
          options.asker?.((callId) => displayed.wait(callId)) ??
          denyingApprover(
            "no terminal to ask for approval: run from a terminal, or choose a looser --approval policy",
          ),
      },
      (made) => made.assertReady(made.agent(root?.name ?? options.agent)),
    );
  } catch (error) {
    await telemetry?.shutdown();
    await bus.close();
    throw error;
  }
  const conversation = new LocalConversation(
    runtime,
    telemetry,
    options,
    root,
    new Set(before?.map((e) => e.id)),
    displayed,
  );
  for (const envelope of before ?? []) conversation.tree.apply(envelope);
  return conversation;
}

class LocalConversation implements Conversation {
  readonly where = "local";
  readonly tree = new RunTreeBuilder();
  #runId: string | undefined;
  #root: RootState | undefined;
  #handle: AgentHandle | undefined;
  #approval: ApprovalPolicy | undefined;
  #model: string | undefined;

  constructor(
    private readonly runtime: Runtime,
    /** This process's telemetry, when it is on: sent and stopped when the conversation closes. */
    private readonly telemetry: Telemetry | undefined,
    private readonly options: ConversationOptions,
    root: RootState | undefined,
    /** The ids of the run's events read so far: each shown once, and none from before this conversation. */
    private readonly seen: Set<string>,
    private readonly displayed: Signals,
  ) {
    this.#runId = options.runId;
    this.#root = root;
  }

  get runId(): string | undefined {
    return this.#runId;
  }

  async turn(text: string): Promise<AgentOutput["reason"]> {
    const handle = await this.#go(text).catch((error: unknown) => {
      this.#approval = undefined;
      this.#model = undefined;
      throw error;
    });
    this.#handle = handle;
    this.#runId = handle.runId;
    const renderer = this.options.json
      ? jsonRenderer()
      : humanRenderer(() => handle.agentId, ...screenOf(this.options));
    const reading = new AbortController();
    const shown = (async () => {
      for await (const { envelope } of this.runtime.bus.eventLog.read({
        runId: handle.runId,
        follow: true,
        signal: reading.signal,
      })) {
        if (this.seen.has(envelope.id)) continue;
        this.seen.add(envelope.id);
        this.tree.apply(envelope);
        renderer.event({ envelope });
        if (isEvent(envelope, "approval.requested")) this.displayed.fire(envelope.data.callId);
        if (isEvent(envelope, "agent.stopped") && envelope.agentId === handle.agentId) break;
      }
    })();
    try {
      const output = await handle.done;
      await Promise.race([shown, new Promise((resolve) => setTimeout(resolve, 2000))]);
      this.#root = { agentId: handle.agentId, stopped: true };
      return output.reason;
    } finally {
      reading.abort();
      await shown.catch(() => {});
      renderer.close();
    }
  }

  /** The run started with `text`, or its first agent going on with it. */
  async #go(text: string): Promise<AgentHandle> {
    const { options, runtime } = this;
    const runId = this.#runId;
    const root = this.#root;
    if (!runId || !root)
      return runtime.start({
        task: text,
        agent: runtime.agent(options.agent).name,
        approval: options.approval,
        mode: options.mode,
        sandbox: options.sandbox,
        skill: options.skill,
      });
    const handle = await runtime.resume(runId, root.agentId, {
      as: "own-record",
      followUp: text,
      approval: this.#approval,
      model: this.#model,
    });
    if (!handle) throw new HistoryError(`run ${runId} has no snapshot to go on from`);
    // Not stopped (its process ended under it): it goes on where it was, and takes the message when
    // it would otherwise stop.
    if (!root.stopped) handle.followUp(text);
    return handle;
  }

  async steer(text: string): Promise<void> {
    if (!this.#handle) throw new ConversationError("no turn is going on to steer");
    try {
      this.#handle.steer(text);
    } catch (error) {
      if (error instanceof RequestRefusedError) throw new ConversationError(error.message, { cause: error });
      throw error;
    }
  }

  async abort(): Promise<void> {
    this.#handle?.abort("interrupted by the user");
  }

  async compact(): Promise<{ tokensBefore: number; tokensAfter: number }> {
    const runId = this.#runId;
    const root = this.#root;
    if (!runId || !root)
      throw new ConversationError("nothing to compact yet: the run starts with the first line");
    const report = await this.runtime
      .compact(runId, root.agentId, { as: "own-record" })
      .catch((error: unknown) => {
        throw error instanceof NotStoppedError
          ? new ConversationError(error.message, { cause: error })
          : error;
      });
    if (!report) throw new HistoryError(`run ${runId} has no snapshot to compact`);
    // What it logged is behind the next turn, not shown by it; the tree counts what it spent.
    for await (const { envelope } of this.runtime.bus.eventLog.read({ runId })) {
      if (this.seen.has(envelope.id)) continue;
      this.seen.add(envelope.id);
      this.tree.apply(envelope);
    }
    if ("error" in report) throw new ConversationError(`the conversation was not compacted: ${report.error}`);
    return report;
  }

  setApproval(policy: ApprovalPolicy): void {
    this.#approval = policy;
  }

  setModel(model: string): void {
    this.#model = model;
  }

  async close(): Promise<void> {
    await this.runtime.close();
    await this.telemetry?.shutdown();
    await this.runtime.bus.close();
  }
}

/** A conversation asked what it cannot do now: one line. */
export class ConversationError extends UserError {
  override name = "ConversationError";
}
