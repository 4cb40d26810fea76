import { type Actor, createActor, fromPromise, SimulatedClock, type Snapshot } from "xstate";
import type { ToolEffect } from "../../src/config/tool-catalog.js";
import { agentMachine } from "../../src/machines/agent-machine.js";
import type {
  AgentInput,
  ApprovalDecision,
  CompactionInput,
  CompactionOutput,
  ModelTurn,
  ModelTurnInput,
} from "../../src/machines/agent-types.js";
import type { ChatMessage } from "../../src/model/types.js";
import { ZERO_USAGE } from "../../src/model/types.js";
import { plainOutcome } from "../../src/tools/call-outcome.js";
import type { PlannedCall } from "../../src/tools/plan.js";
import type { ToolResult } from "../../src/tools/tool.js";

/** Each call's result as a tool returned it, by call id. */
type ToolResults = Record<string, ToolResult>;

/** A model turn that answers with text. */
export function text(content: string, usage: Partial<typeof ZERO_USAGE> = {}): ModelTurn {
  return {
    message: { role: "assistant", content },
    finishReason: "stop",
    usage: { ...ZERO_USAGE, inputTokens: 10, outputTokens: 5, ...usage },
    model: "stub",
    truncatedToolCalls: false,
    plan: [],
  };
}

let callCounter = 0;

/** A model turn that asks for tool calls; each call's effect and policy decision are given. */
export function calls(
  ...specs: Array<{
    name: string;
    args?: Record<string, unknown>;
    effect?: ToolEffect;
    decision?: PlannedCall["decision"];
    id?: string;
  }>
): ModelTurn {
  const plan: PlannedCall[] = specs.map((spec) => ({
    id: spec.id ?? `call_${++callCounter}`,
    name: spec.name,
    arguments: JSON.stringify(spec.args ?? {}),
    effect: spec.effect ?? "read",
    decision: spec.decision ?? "allow",
  }));
  return {
    message: {
      role: "assistant",
      content: null,
      tool_calls: plan.map((p) => ({
        id: p.id,
        type: "function" as const,
        function: { name: p.name, arguments: p.arguments },
      })),
    },
    finishReason: "tool_calls",
    usage: { ...ZERO_USAGE, inputTokens: 10, outputTokens: 5 },
    model: "stub",
    truncatedToolCalls: false,
    plan,
  };
}

type Step<I, O> = O | ((input: I, signal: AbortSignal) => O | Promise<O>);

export interface Stubs {
  model: Array<Step<ModelTurnInput, ModelTurn>>;
  approve?: (calls: PlannedCall[], signal: AbortSignal) => ApprovalDecision[] | Promise<ApprovalDecision[]>;
  /** Each call's result; the batch tells the model each as it is (`plainOutcome`). */
  tools?: (calls: PlannedCall[], signal: AbortSignal) => ToolResults | Promise<ToolResults>;
  /** The calls the batch says it refused (their results come from `tools`). */
  refused?: string[];
  compact?: (input: CompactionInput, signal: AbortSignal) => CompactionOutput | Promise<CompactionOutput>;
  needsCompaction?: (messages: ChatMessage[]) => boolean;
  /** What the model call cut off at the hard wall had streamed. */
  partial?: () => string;
}

/** What the stub actors saw. */
export interface Seen {
  modelInputs: ModelTurnInput[];
  approvals: PlannedCall[][];
  batches: PlannedCall[][];
  compactions: CompactionInput[];
  signals: AbortSignal[];
}

export function okResults(calls: PlannedCall[]): ToolResults {
  return Object.fromEntries(calls.map((c) => [c.id, { ok: true, output: `${c.name} ok` }]));
}

/** The agent machine with stub actors, a simulated clock, and a record of the states it entered. */
export function harness(stubs: Stubs, input: Partial<AgentInput> = {}, snapshot?: Snapshot<unknown>) {
  const seen: Seen = { modelInputs: [], approvals: [], batches: [], compactions: [], signals: [] };
  const clock = new SimulatedClock();
  const machine = agentMachine.provide({
    actors: {
      callModel: fromPromise(async ({ input, signal }: { input: ModelTurnInput; signal: AbortSignal }) => {
        seen.modelInputs.push(input);
        seen.signals.push(signal);
        const step = stubs.model.shift();
        if (step === undefined) throw new Error("the stub model has no more turns");
        return typeof step === "function" ? step(input, signal) : step;
      }),
      awaitApproval: fromPromise(
        async ({ input, signal }: { input: { calls: PlannedCall[] }; signal: AbortSignal }) => {
          seen.approvals.push(input.calls);
          seen.signals.push(signal);
          return (stubs.approve ?? ((c) => c.map((x) => ({ id: x.id, approved: true }))))(
            input.calls,
            signal,
          );
        },
      ),
      runTools: fromPromise(
        async ({ input, signal }: { input: { calls: PlannedCall[] }; signal: AbortSignal }) => {
          seen.batches.push(input.calls);
          seen.signals.push(signal);
          const results = await (stubs.tools ?? okResults)(input.calls, signal);
          const outcomes = Object.entries(results).map(([id, result]) => [id, plainOutcome(result)]);
          return { results: Object.fromEntries(outcomes), refused: stubs.refused ?? [] };
        },
      ),
      compact: fromPromise(async ({ input, signal }: { input: CompactionInput; signal: AbortSignal }) => {
        seen.compactions.push(input);
        seen.signals.push(signal);
        return (
          (await stubs.compact?.(input, signal)) ?? {
            messages: [input.messages[0] as ChatMessage, { role: "user", content: "summary" }],
            usage: { ...ZERO_USAGE, inputTokens: 100, outputTokens: 20 },
          }
        );
      }),
      partialAnswer: fromPromise(async () => stubs.partial?.() ?? ""),
    },
    guards: {
      needsCompaction: ({ context }) => stubs.needsCompaction?.(context.messages) ?? false,
    },
  });
  const actor = createActor(machine, {
    clock,
    input: { runId: "run1", agentId: "a1", name: "tester", systemPrompt: "You test.", budget: {}, ...input },
    ...(snapshot ? { snapshot } : {}),
  });
  const states: string[] = [];
  actor.subscribe((s) => {
    const value = String(s.value);
    if (states.at(-1) !== value) states.push(value);
  });
  return { actor, seen, states, clock, machine };
}

export async function finished(actor: Actor<typeof agentMachine>) {
  return new Promise<NonNullable<ReturnType<typeof actor.getSnapshot>["output"]>>((resolve, reject) => {
    const check = () => {
      const snapshot = actor.getSnapshot();
      if (snapshot.status === "done" && snapshot.output) resolve(snapshot.output);
      if (snapshot.status === "error") reject(snapshot.error);
    };
    actor.subscribe({ next: check, error: reject, complete: check });
    check();
  });
}

/** Resolves when the actor is in `state`. */
export async function reach(actor: Actor<typeof agentMachine>, state: string) {
  return new Promise<void>((resolve) => {
    const check = () => {
      if (actor.getSnapshot().matches(state as never)) {
        sub.unsubscribe();
        resolve();
      }
    };
    const sub = actor.subscribe(check);
    check();
  });
}

/** A promise that never settles until the signal aborts (then rejects), like a hung request. */
export function hang<T>(signal: AbortSignal): Promise<T> {
  return new Promise((_, reject) =>
    signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true }),
  );
}
