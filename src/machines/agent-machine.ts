import { assign, fromPromise, setup } from "xstate";
import { repairToolPairs } from "../context/repair.js";
import { addUsage, type ChatMessage, ZERO_USAGE } from "../model/types.js";
import type { PlannedCall } from "../tools/plan.js";
import {
  answerStop,
  awaitsDecision,
  batchOutcomes,
  decideAsked,
  denyAsked,
  exhausted,
  lastText,
  limitBatch,
  loopAfter,
  lostAnswer,
  lostStop,
  recordBatch,
  stopWith,
  terminatedStop,
  toolErrorStop,
  unreadRefusal,
  userMessage,
  wallStop,
} from "./agent-rules.js";
import type {
  AgentCommand,
  AgentContext,
  AgentInput,
  AgentOutput,
  ApprovalDecision,
  CompactionInput,
  CompactionOutput,
  ModelTurn,
  ModelTurnInput,
  ToolBatchOutput,
} from "./agent-types.js";
import { detectLoop } from "./loop-detection.js";

/**
 * Bumped when the context or states change; stored with every snapshot. A snapshot of an earlier
 * version is brought up to this one by a migration (src/actors/record-migrations.ts), with a stored
 * fixture of it in test/fixtures/records/. 2: `onToolError` is always in the context. 3: `waitedMs`
 * (time waited for people) is. 4: the context's fields grouped (`unread`, `loop`, the limit in
 * `finalizing`) and `elapsedMs` gone from it (its host keeps the time worked). 5: `compactingAsked`, a
 * compaction a person asked for.
 */
export const AGENT_MACHINE_VERSION = 5;

/** An actor the host provides (`machine.provide`), typed here so the machine's table reads its output typed. */
const notProvided = <Output, Input>(name: string) =>
  fromPromise<Output, Input>(async () => {
    throw new Error(`${name} is provided by the agent host (machine.provide)`);
  });

/** A done event's output, typed by XState from the invoked actor: the params of what reads it. */
const output = <T>({ event }: { event: { output: T } }): T => event.output;
/** A guard or action of a model call's done event, given the model's turn. */
const turn = <T extends string>(type: T) => ({ type, params: output<ModelTurn> });
/** A guard or action of a tool batch's done event, given the batch's results. */
const batch = <T extends string>(type: T) => ({ type, params: output<ToolBatchOutput> });
/** An error event's error: what the actor threw. */
const thrown = ({ event }: { event: { error: unknown } }): unknown => event.error;

/**
 * One agent's lifecycle (DESIGN.md): idle → callingModel ⇄ (awaitingApproval →) executingTools,
 * with compacting before a model call when the context is too full, until stopped. Pure: the model
 * call, the approval wait, the tool batch and compaction are actors the host provides, and it has
 * no clock: the wall-time budget is two moments its host tells it (at the wall a last call for the
 * answer, past its grace a stop), counted on a clock that stands still while a person is waited for.
 */
export const agentMachine = setup({
  types: {
    context: {} as AgentContext,
    events: {} as AgentCommand,
    input: {} as AgentInput,
    output: {} as AgentOutput,
  },
  actors: {
    callModel: notProvided<ModelTurn, ModelTurnInput>("callModel"),
    awaitApproval: notProvided<ApprovalDecision[], { calls: PlannedCall[] }>("awaitApproval"),
    runTools: notProvided<ToolBatchOutput, { calls: PlannedCall[] }>("runTools"),
    compact: notProvided<CompactionOutput, CompactionInput>("compact"),
    partialAnswer: notProvided<string, void>("partialAnswer"),
  },
  guards: {
    /** The host provides this from the token count and the model's context window. */
    needsCompaction: () => false,
    mustFinalizeForBudget: ({ context }) => context.finalizing === null && exhausted(context) !== undefined,
    isFinalizing: ({ context }) => context.finalizing !== null,
    truncatedToolCall: (_, turn: ModelTurn) => turn.truncatedToolCalls,
    answerLost: (_, turn: ModelTurn) => lostAnswer(turn) !== undefined,
    hasToolCalls: (_, turn: ModelTurn) => turn.plan.length > 0,
    /** Tool calls of which one waits on a person (none when there are no calls). */
    needsApproval: ({ context }, turn: ModelTurn) => limitBatch(context, turn.plan).some(awaitsDecision),
    /** Calls of the batch still to run: a reopened agent's reads that its abort cut short (`reopen`). */
    hasCutReads: ({ context }) => context.batch.some((call) => !call.result && call.decision === "allow"),
    hasSteering: ({ context }) => context.unread.steering.length > 0,
    /** A steer or follow-up within what the agent holds unread; its host refuses one past it first. */
    roomUnread: ({ context, event }) => unreadRefusal(context, event as AgentCommand) === undefined,
    hasFollowUp: ({ context }) => context.unread.followUps.length > 0,
    /** A call that ran failed, under `onToolError: stop`. */
    toolErrorStops: ({ context }, batch: ToolBatchOutput) => toolErrorStop(context, batch) !== undefined,
    allTerminate: ({ context }, batch: ToolBatchOutput) => {
      const results = batchOutcomes(context, batch);
      return results.length > 0 && results.every((r) => r.outcome.details.terminate === true);
    },
    loopDetected: ({ context }, batch: ToolBatchOutput) => loopAfter(context, batch) !== undefined,
    /** Still looping after being told so once. */
    loopAfterNudge: ({ context }, batch: ToolBatchOutput) =>
      context.loop.nudged && loopAfter(context, batch) !== undefined,
    contextLengthFirstTime: ({ context }, error: unknown) =>
      !context.compactedForError && error instanceof Error && error.name === "ContextLengthExceededError",
    hasWallLimit: ({ context }) => context.budget.maxWallMs !== undefined && context.finalizing === null,
    wallLimited: ({ context }) => context.budget.maxWallMs !== undefined,
  },
  actions: {
    addTask: assign({
      messages: ({ context, event }) =>
        event.type === "START"
          ? [...context.messages, { role: "user", content: event.task }]
          : context.messages,
    }),
    steerWithTask: assign({
      unread: ({ context: { unread }, event }) =>
        event.type === "START" ? { ...unread, steering: [...unread.steering, event.task] } : unread,
    }),
    queueSteering: assign({
      unread: ({ context: { unread }, event }) =>
        event.type === "STEER" ? { ...unread, steering: [...unread.steering, event.text] } : unread,
    }),
    queueFollowUp: assign({
      unread: ({ context: { unread }, event }) =>
        event.type === "FOLLOW_UP" ? { ...unread, followUps: [...unread.followUps, event.text] } : unread,
    }),
    injectSteering: assign(({ context: { messages, unread } }) =>
      unread.steering.length === 0
        ? {}
        : {
            messages: [...messages, ...unread.steering.map(userMessage)],
            unread: { ...unread, steering: [] },
          },
    ),
    takeFollowUp: assign(({ context: { messages, unread } }) => {
      const [next, ...rest] = unread.followUps;
      return next === undefined
        ? {}
        : { messages: [...messages, userMessage(next)], unread: { ...unread, followUps: rest } };
    }),
    repairHistory: assign({ messages: ({ context }) => repairToolPairs(context.messages) as ChatMessage[] }),
    recordTurn: assign(({ context }, turn: ModelTurn) => ({
      messages: [...context.messages, turn.message],
      usage: addUsage(context.usage, turn.usage),
      turns: context.turns + 1,
      compactedForError: false,
    })),
    noteTruncation: assign({
      messages: ({ context }) => [
        ...context.messages,
        userMessage(
          "Your last answer was cut off by the output length limit, so its tool call was not run. Make the call again with shorter arguments, or split the work.",
        ),
      ],
    }),
    setBatch: assign({ batch: ({ context }, turn: ModelTurn) => limitBatch(context, turn.plan) }),
    applyDecisions: assign({
      batch: ({ context }, answers: ApprovalDecision[]) => decideAsked(context.batch, answers),
    }),
    denyAllAsked: assign({ batch: ({ context }) => denyAsked(context.batch) }),
    recordResults: assign(({ context }, batch: ToolBatchOutput) => recordBatch(context, batch)),
    nudgeLoop: assign(({ context }) => ({
      messages: [
        ...context.messages,
        userMessage(
          `You seem to be repeating yourself (${detectLoop(context.loop.recentCalls)}). Try a different approach, or give your final answer if you have enough.`,
        ),
      ],
      loop: { recentCalls: [], nudged: true },
    })),
    beginLoopFinal: assign(({ context }) => ({
      messages: [
        ...context.messages,
        userMessage(
          `You are still repeating yourself (${detectLoop(context.loop.recentCalls)}). Stop calling tools and give your final answer now with what you have.`,
        ),
      ],
      finalizing: { reason: "loop_detected" as const },
    })),
    beginBudgetFinal: assign(({ context }) => ({
      messages: [
        ...context.messages,
        userMessage(
          `Your budget is used up (${exhausted(context)?.spent}). Give your final answer now with what you have; no more tool calls.`,
        ),
      ],
      finalizing: { reason: "budget_exhausted" as const, limit: exhausted(context)?.limit },
    })),
    beginWallFinal: assign(({ context }) => ({
      messages: [
        ...(repairToolPairs(context.messages) as ChatMessage[]),
        userMessage(
          `Your time budget of ${context.budget.maxWallMs} ms is used up. Give your final answer now with what you have; no more tool calls.`,
        ),
      ],
      finalizing: { reason: "budget_exhausted" as const, limit: `maxWallMs ${context.budget.maxWallMs}` },
      batch: [],
    })),
    markContextRetry: assign({ compactedForError: true }),
    addWait: assign({
      waitedMs: ({ context, event }) =>
        event.type === "WAITED" ? context.waitedMs + event.ms : context.waitedMs,
    }),
    chargeChild: assign({
      children: ({ context, event }) =>
        event.type === "CHILD_SPENT"
          ? {
              usage: addUsage(context.children.usage, event.usage),
              toolCalls: context.children.toolCalls + event.toolCalls,
            }
          : context.children,
    }),
    chargeSampling: assign({
      usage: ({ context, event }) =>
        event.type === "SAMPLED" ? addUsage(context.usage, event.usage) : context.usage,
    }),
    applyCompaction: assign(({ context }, compacted: CompactionOutput) => ({
      messages: compacted.messages,
      usage: addUsage(context.usage, compacted.usage),
    })),
    stopAfterTurn: assign({ stop: ({ context }, turn: ModelTurn) => answerStop(context, turn) }),
    stopTerminated: assign({ stop: ({ context }, batch: ToolBatchOutput) => terminatedStop(context, batch) }),
    /** Before the batch is recorded: the messages and tool calls counted are those before it. */
    stopOnToolError: assign({
      stop: ({ context }, batch: ToolBatchOutput) => ({
        ...stopWith(context, "failed", ""),
        error: toolErrorStop(context, batch),
      }),
    }),
    stopLost: assign({ stop: ({ context }, turn: ModelTurn) => lostStop(context, turn) }),
    stopFailed: assign({
      stop: ({ context }, error: unknown) => ({
        ...stopWith(context, "failed", ""),
        error: error instanceof Error ? error.message : String(error),
      }),
    }),
    stopAborted: assign({ stop: ({ context }) => stopWith(context, "aborted", lastText(context.messages)) }),
    /** `partial`: the text the call cut off had streamed (none when the actor failed). */
    stopAtWall: assign({ stop: ({ context }, partial: string | undefined) => wallStop(context, partial) }),
  },
}).createMachine({
  id: "agent",
  context: ({ input }) => ({
    runId: input.runId,
    agentId: input.agentId,
    name: input.name,
    budget: input.budget,
    onToolError: input.onToolError ?? "continue",
    waitedMs: 0,
    messages: [{ role: "system", content: input.systemPrompt }],
    unread: { steering: [], followUps: [] },
    usage: { ...ZERO_USAGE },
    turns: 0,
    toolCalls: 0,
    children: { usage: { ...ZERO_USAGE }, toolCalls: 0 },
    batch: [],
    loop: { recentCalls: [], nudged: false },
    finalizing: null,
    compactedForError: false,
    stop: null,
  }),
  initial: "idle",
  on: {
    STEER: { guard: "roomUnread", actions: "queueSteering" },
    FOLLOW_UP: { guard: "roomUnread", actions: "queueFollowUp" },
    ABORT: { target: ".stopped", actions: "stopAborted" },
    CHILD_SPENT: { actions: "chargeChild" },
    SAMPLED: { actions: "chargeSampling" },
    WAITED: { actions: "addWait" },
    // The wall is soft first (a last call for the answer), then hard: past its grace the run stops.
    // Its host tells both moments, from the time the agent worked (waits for people left out).
    WALL_REACHED: { guard: "hasWallLimit", target: ".nextTurn", actions: "beginWallFinal" },
    WALL_PASSED: { guard: "wallLimited", target: ".cuttingOff" },
  },
  states: {
    idle: {
      on: {
        START: [
          // Reopened after an abort cut its batch: the reads cut short run first, the task is read after them.
          { guard: "hasCutReads", target: "executingTools", actions: "steerWithTask" },
          { target: "nextTurn", actions: "addTask" },
        ],
        COMPACT: { target: "compactingAsked" },
      },
    },
    /** A compaction a person asked for, of a stopped agent reopened for it: it stops again as it had. */
    compactingAsked: {
      invoke: {
        src: "compact",
        input: ({ context }) => ({ messages: context.messages, reason: "requested" as const }),
        onDone: { target: "stopped", actions: { type: "applyCompaction", params: output } },
        // The conversation stays as it was; its host says why (`compaction()`).
        onError: { target: "stopped" },
      },
    },
    /** Transient: the budget check before every model call. */
    nextTurn: {
      always: [
        { guard: "mustFinalizeForBudget", target: "checkingContext", actions: "beginBudgetFinal" },
        { target: "checkingContext" },
      ],
    },
    /** Transient: compact first when the context is too full. */
    checkingContext: {
      always: [{ guard: "needsCompaction", target: "compacting" }, { target: "callingModel" }],
    },
    callingModel: {
      entry: "repairHistory",
      invoke: {
        src: "callModel",
        input: ({ context }) => ({ messages: context.messages, withTools: context.finalizing === null }),
        onDone: [
          {
            guard: "isFinalizing",
            target: "stopped",
            actions: [turn("recordTurn"), turn("stopAfterTurn")],
          },
          // Never `done` on an answer that was cut off or failed: what it lost is not known.
          { guard: turn("answerLost"), target: "stopped", actions: [turn("recordTurn"), turn("stopLost")] },
          {
            guard: turn("truncatedToolCall"),
            target: "nextTurn",
            actions: [turn("recordTurn"), "noteTruncation"],
          },
          {
            guard: turn("needsApproval"),
            target: "awaitingApproval",
            actions: [turn("recordTurn"), turn("setBatch")],
          },
          {
            guard: turn("hasToolCalls"),
            target: "executingTools",
            actions: [turn("recordTurn"), turn("setBatch")],
          },
          { guard: "hasSteering", target: "nextTurn", actions: [turn("recordTurn"), "injectSteering"] },
          { guard: "hasFollowUp", target: "nextTurn", actions: [turn("recordTurn"), "takeFollowUp"] },
          { target: "stopped", actions: [turn("recordTurn"), turn("stopAfterTurn")] },
        ],
        onError: [
          {
            guard: { type: "contextLengthFirstTime", params: thrown },
            target: "compacting",
            actions: "markContextRetry",
          },
          { target: "stopped", actions: { type: "stopFailed", params: thrown } },
        ],
      },
    },
    awaitingApproval: {
      invoke: {
        src: "awaitApproval",
        input: ({ context }) => ({ calls: context.batch.filter(awaitsDecision) }),
        onDone: { target: "executingTools", actions: { type: "applyDecisions", params: output } },
        onError: { target: "executingTools", actions: "denyAllAsked" },
      },
    },
    executingTools: {
      invoke: {
        src: "runTools",
        input: ({ context }) => ({
          calls: context.batch.filter((call) => !call.result && call.decision === "allow"),
        }),
        onDone: [
          { guard: batch("toolErrorStops"), target: "stopped", actions: batch("stopOnToolError") },
          {
            guard: batch("allTerminate"),
            target: "stopped",
            actions: [batch("stopTerminated"), batch("recordResults")],
          },
          {
            guard: batch("loopAfterNudge"),
            target: "nextTurn",
            actions: [batch("recordResults"), "beginLoopFinal"],
          },
          {
            guard: batch("loopDetected"),
            target: "nextTurn",
            actions: [batch("recordResults"), "nudgeLoop", "injectSteering"],
          },
          { target: "nextTurn", actions: [batch("recordResults"), "injectSteering"] },
        ],
        onError: { target: "stopped", actions: { type: "stopFailed", params: thrown } },
      },
    },
    compacting: {
      invoke: {
        src: "compact",
        input: ({ context }) => ({
          messages: context.messages,
          reason: context.compactedForError ? ("context_length" as const) : ("threshold" as const),
        }),
        onDone: { target: "callingModel", actions: { type: "applyCompaction", params: output } },
        onError: { target: "stopped", actions: { type: "stopFailed", params: thrown } },
      },
    },
    /** Past the wall's grace: whatever was in flight is cut; the text the model had streamed is kept. */
    cuttingOff: {
      invoke: {
        src: "partialAnswer",
        onDone: { target: "stopped", actions: { type: "stopAtWall", params: output } },
        onError: { target: "stopped", actions: { type: "stopAtWall", params: () => undefined } },
      },
    },
    stopped: {
      type: "final",
    },
  },
  output: ({ context }) => context.stop ?? stopWith(context, "failed", ""),
});

export { budgetLeft, exhausted, failedOutput, totalSpend, unreadRefusal } from "./agent-rules.js";
