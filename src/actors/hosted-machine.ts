import { type ActorOptions, type ActorSystem, type ActorSystemInfo, createActor, fromPromise } from "xstate";
import { agentMachine } from "../machines/agent-machine.js";
import { wallGraceMs } from "../machines/agent-rules.js";
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

/** Each running machine's host, by the machine's actor system (what its invoked actors are given). */
const hostBySystem = new WeakMap<ActorSystem<ActorSystemInfo>, HostedActors>();
/** And by `<runId>.<agentId>` for the guard, which is given only the context. */
const hostByAgent = new Map<string, HostedActors>();

const hostOf = (system: ActorSystem<ActorSystemInfo>): HostedActors => {
  const host = hostBySystem.get(system);
  if (!host) throw new Error("an agent machine is running without its host");
  return host;
};

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
 * The agent machine with its actors provided once for the whole process: each actor finds its
 * agent's host when invoked. (Providing it per agent rebuilt the machine's state nodes every
 * time: about a millisecond and 20 KB per agent.)
 */
const hostedMachine = agentMachine.provide({
  actors: {
    callModel: fromPromise<ModelTurn, ModelTurnInput>(async ({ input, signal, system }) => {
      const host = hostOf(system);
      await stateReported(host);
      return host.callModel(input, signal);
    }),
    awaitApproval: fromPromise<ApprovalDecision[], { calls: PlannedCall[] }>(({ input, signal, system }) =>
      hostOf(system).awaitApproval(input, signal),
    ),
    runTools: fromPromise<ToolBatchOutput, { calls: PlannedCall[] }>(({ input, signal, system }) =>
      hostOf(system).runTools(input, signal),
    ),
    compact: fromPromise<CompactionOutput, CompactionInput>(({ input, signal, system }) =>
      hostOf(system).compact(input, signal),
    ),
    partialAnswer: fromPromise<string, void>(async ({ system }) => hostOf(system).partialAnswer()),
  },
  guards: {
    needsCompaction: ({ context }) =>
      hostByAgent.get(`${context.runId}.${context.agentId}`)?.needsCompaction(context.messages) ?? false,
  },
});

/**
 * An actor of the shared agent machine whose actors and guard `hosted` serves, until `release()`
 * (once the agent has stopped or gone to another host).
 */
export function hostedActor(
  hosted: HostedActors,
  options: ActorOptions<typeof hostedMachine> & { input: { runId: string; agentId: string } },
) {
  const actor = createActor(hostedMachine, options);
  const key = `${options.input.runId}.${options.input.agentId}`;
  hostBySystem.set(actor.system, hosted);
  hostByAgent.set(key, hosted);
  const release = () => {
    if (hostByAgent.get(key) === hosted) hostByAgent.delete(key);
  };
  return { actor, release };
}

/**
 * Arms a restored agent's wall on the host's clock: `reached` at `maxWallMs`, `passed` at its end of
 * grace, counting the `elapsedMs` it had used. Returns what disarms them.
 */
export function armWall(
  maxWallMs: number | undefined,
  elapsedMs: number,
  send: (type: "WALL_REACHED" | "WALL_PASSED") => void,
): () => void {
  if (maxWallMs === undefined) return () => {};
  const reached = setTimeout(() => send("WALL_REACHED"), Math.max(0, maxWallMs - elapsedMs));
  const passed = setTimeout(
    () => send("WALL_PASSED"),
    Math.max(0, maxWallMs + wallGraceMs(maxWallMs) - elapsedMs),
  );
  return () => {
    clearTimeout(reached);
    clearTimeout(passed);
  };
}
