import { type ActorOptions, type ActorSystem, type ActorSystemInfo, createActor, fromPromise } from "xstate";
import { agentMachine } from "../machines/agent-machine.js";
import type {
  ApprovalDecision,
  CompactionInput,
  CompactionOutput,
  ModelTurn,
  ModelTurnInput,
  ToolBatchOutput,
} from "../machines/agent-types.js";
import type { ChatMessage } from "../model/types.js";
import type { PlannedCall } from "../tools/plan.js";

/** What one host does for its machine: the actors the machine invokes and its compaction guard. */
export interface HostedActors {
  callModel(input: ModelTurnInput, signal: AbortSignal): Promise<ModelTurn>;
  awaitApproval(input: { calls: PlannedCall[] }, signal: AbortSignal): Promise<ApprovalDecision[]>;
  runTools(input: { calls: PlannedCall[] }, signal: AbortSignal): Promise<ToolBatchOutput>;
  compact(input: CompactionInput, signal: AbortSignal): Promise<CompactionOutput>;
  /** The text the model call cut off at the hard wall had streamed ("" when none was in flight). */
  partialAnswer(): string;
  needsCompaction(messages: readonly ChatMessage[]): boolean;
  /** Hands the events the host has made to the bus now, not at the end of the microtask queue. */
  sendEvents(): void;
}

/**
 * Resolves once the state that invoked an actor has been reported and its events have left. XState
 * starts an invoked actor before it tells the host of the new state; the host's events and snapshot
 * go out at the end of the event loop's turn (`AckedPublisher`). Building a model request is CPU work
 * (a process's first loads Node's HTTP client: tens of ms), so the model call waits for them: the
 * microtask lets the host hear of the state; its events are then handed to the bus at once (they
 * would wait for a microtask of their own, queued after ours), so the bus's write is scheduled
 * before our immediate.
 */
async function stateReported(host: HostedActors): Promise<void> {
  await Promise.resolve();
  host.sendEvents();
  await new Promise((resolve) => setImmediate(resolve));
}

/**
 * The agent machine with its actors provided once for a runtime (`Runtime` makes one): each actor
 * finds its agent's host when invoked, by the machine's actor system; the compaction guard, which
 * XState gives only the context, by `<runId>.<agentId>`, unique among one runtime's agents. Two
 * runtimes in a process have a provided machine and maps each, so their agents never meet.
 * (Providing it per agent rebuilt the machine's state nodes every time: about a millisecond and
 * 20 KB per agent.)
 */
export class HostedMachines {
  /** Each running machine's host, by the machine's actor system (what its invoked actors are given). */
  readonly #bySystem = new WeakMap<ActorSystem<ActorSystemInfo>, HostedActors>();
  /** And by `<runId>.<agentId>` for the guard, which is given only the context. */
  readonly #byAgent = new Map<string, HostedActors>();
  readonly #machine: AgentMachine = this.#provided();

  /**
   * An actor of the provided agent machine whose actors and guard `hosted` serves, until
   * `release()` (once the agent has stopped or gone to another host).
   */
  host(
    hosted: HostedActors,
    options: ActorOptions<AgentMachine> & { input: { runId: string; agentId: string } },
  ) {
    const actor = createActor(this.#machine, options);
    const key = `${options.input.runId}.${options.input.agentId}`;
    this.#bySystem.set(actor.system, hosted);
    this.#byAgent.set(key, hosted);
    const release = () => {
      if (this.#byAgent.get(key) === hosted) this.#byAgent.delete(key);
    };
    return { actor, release };
  }

  #hostOf(system: ActorSystem<ActorSystemInfo>): HostedActors {
    const host = this.#bySystem.get(system);
    if (!host) throw new Error("an agent machine is running without its host");
    return host;
  }

  #provided(): AgentMachine {
    return agentMachine.provide({
      actors: {
        callModel: fromPromise<ModelTurn, ModelTurnInput>(async ({ input, signal, system }) => {
          const host = this.#hostOf(system);
          await stateReported(host);
          return host.callModel(input, signal);
        }),
        awaitApproval: fromPromise<ApprovalDecision[], { calls: PlannedCall[] }>(
          ({ input, signal, system }) => this.#hostOf(system).awaitApproval(input, signal),
        ),
        runTools: fromPromise<ToolBatchOutput, { calls: PlannedCall[] }>(({ input, signal, system }) =>
          this.#hostOf(system).runTools(input, signal),
        ),
        compact: fromPromise<CompactionOutput, CompactionInput>(({ input, signal, system }) =>
          this.#hostOf(system).compact(input, signal),
        ),
        partialAnswer: fromPromise<string, void>(async ({ system }) => this.#hostOf(system).partialAnswer()),
      },
      guards: {
        needsCompaction: ({ context }) =>
          this.#byAgent.get(`${context.runId}.${context.agentId}`)?.needsCompaction(context.messages) ??
          false,
      },
    });
  }
}

/** The agent machine as a runtime provides it. */
type AgentMachine = ReturnType<typeof agentMachine.provide>;
