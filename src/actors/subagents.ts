import { createHash } from "node:crypto";
import { z } from "zod";
import type { Bus } from "../bus/bus.js";
import type { AgentDefinition } from "../config/agent-schema.js";
import type { Budget } from "../config/budget-schema.js";
import type { SubagentStopReason } from "../events/agent-events.js";
import { makeEnvelope } from "../events/envelope.js";
import { wallGraceMs } from "../machines/agent-rules.js";
import type { AgentOutput, Spend } from "../machines/agent-types.js";
import { addUsage, type Usage, ZERO_USAGE } from "../model/types.js";
import type { CommandHooks } from "../tools/command-hooks.js";
import { defineTool, type Tool, type ToolContext, type ToolResult, toolError } from "../tools/tool.js";
import type { EventPublisher } from "./event-publisher.js";
import { type ChildNews, followChild } from "./follow-child.js";

/** A child with no wall-time limit of its own or its parent's still stops after this long. */
const DEFAULT_CHILD_WALL_MS = 600_000;
/**
 * A child stops itself at its wall and grace; one that has not by this long after (its host gone) is
 * told to abort and counts as a timeout.
 */
const PAST_GRACE_MS = 1000;
/** How long a child told to abort has to say it stopped before it is left behind, not waited for. */
const ABORT_ANSWER_MS = 2000;

export interface SubagentLimits {
  /** How deep subagents may nest under a top-level agent. */
  maxDepth: number;
  /** Children of one parent running at once. */
  maxConcurrent: number;
}

/** What the subagent tools of one parent need from their host. */
export interface ParentSide {
  bus: Bus;
  runId: string;
  agentId: string;
  depth: number;
  budget: Budget;
  limits: SubagentLimits;
  events: EventPublisher;
  /** The time the parent has worked (its wall-time budget's measure: waits for people left out). */
  workedMs(): number;
  /** What the parent and its subtree have spent so far. */
  spent(): Spend;
  /** Charges a child's new spending to the parent, as it happens. */
  charge(delta: Spend): void;
  /** Starts a child actor (in this process, or on a worker); it reports only through the bus. */
  spawn(child: ChildSpec): Promise<void>;
  /** The `traceparent` of the parent's call `callId`, when telemetry is on. */
  traceparent?: ((callId: string) => string | undefined) | undefined;
  /**
   * A child this call started before a restart or an abort: its output when it has stopped, `running`
   * when it is hosted (or now resumed) somewhere, with what it had spent when it was reopened after
   * an abort; undefined when there is none.
   */
  adopt(childId: string): Promise<{ stopped: AgentOutput } | { running: true; spent?: Spend } | undefined>;
  /** The subagentStart / subagentStop hooks. */
  commandHooks?: CommandHooks | undefined;
}

export interface ChildSpec {
  definition: AgentDefinition;
  task: string;
  childId: string;
  /** The parent's call that spawns it. */
  callId?: string;
  /** The W3C `traceparent` it starts in: the span of that call, when telemetry is on. */
  traceparent?: string | undefined;
  parentId: string;
  depth: number;
  budget: Budget;
}

/** The budget each running child still holds back from its parent. */
interface Reservation {
  cap: Budget;
  spent: Spend;
}

/**
 * One `subagent_<name>` tool per subagent a parent lists. A call spawns a child actor with a budget
 * carved out of what the parent has left, charges what the child spends to the parent as it goes,
 * and returns the child's answer as a structured result. A failing child never fails the parent.
 */
export function subagentTools(children: readonly AgentDefinition[], parent: ParentSide): Tool[] {
  const running = new Map<string, Reservation>();
  const names = new Set(children.map((child) => `${SUBAGENT_TOOL_PREFIX}${child.name}`));
  return children.map(
    (child) =>
      defineTool({
        name: `${SUBAGENT_TOOL_PREFIX}${child.name}`,
        description: child.description,
        // A subagent only reads, so several run at once.
        effect: "read",
        parameters: z.object({
          task: z
            .string()
            .min(1)
            .describe(
              "What the subagent should find out or check; it sees nothing else of this conversation",
            ),
          context: z
            .string()
            .optional()
            .describe("Facts the subagent needs: paths, names, what is already known"),
        }),
        timeoutMs: 24 * 3_600_000,
        async execute({ task, context }, { signal, callId, batch }) {
          const depth = parent.depth + 1;
          if (depth > parent.limits.maxDepth) {
            return toolError(
              `subagents may nest at most ${parent.limits.maxDepth} deep`,
              "do this part yourself",
            );
          }
          if (running.size >= parent.limits.maxConcurrent) {
            return toolError(
              `${parent.limits.maxConcurrent} subagents are already running`,
              "wait for their results, then call again",
            );
          }
          const budget = carve(child.budget, parent, [...running.values()], sharesOf(callId, batch, names));
          // The same call gets the same child: a parent resumed after a crash finds it again.
          const childId = childIdOf(child.name, parent.runId, parent.agentId, callId);
          const reservation: Reservation = { cap: budget, spent: { usage: { ...ZERO_USAGE }, toolCalls: 0 } };
          running.set(childId, reservation);
          try {
            const fullTask = context ? `${task}\n\nContext from the agent that asked:\n${context}` : task;
            const outcome = await runChild(
              parent,
              {
                definition: child,
                task: fullTask,
                childId,
                callId,
                traceparent: parent.traceparent?.(callId),
                parentId: parent.agentId,
                depth,
                budget,
              },
              reservation,
              signal,
            );
            await parent.commandHooks?.notify("subagentStop", child.name, {
              runId: parent.runId,
              parentId: parent.agentId,
              childId,
              reason: outcome.reason,
              result: outcome.result,
            });
            parent.events.emit("subagent.finished", {
              childId,
              reason: outcome.reason,
              usage: reservation.spent.usage,
              toolCalls: reservation.spent.toolCalls,
            });
            return resultOf(child.name, childId, outcome, reservation.spent);
          } finally {
            running.delete(childId);
          }
        },
      }) as Tool,
  );
}

/**
 * Among the subagent calls of a batch, in the model's order, how many are this call and those after
 * it: each takes its share of what the parent has left when it starts, those before it having taken
 * theirs (and holding them back), so n calls of one batch each get about a nth.
 */
function sharesOf(callId: string, batch: ToolContext["batch"], names: ReadonlySet<string>): number {
  const children = (batch ?? []).filter((call) => names.has(call.name));
  const at = children.findIndex((call) => call.id === callId);
  return at < 0 ? 1 : children.length - at;
}

/** A budget's dimensions a child's share is carved in: what counts against each, and its least. */
const SHARED: readonly {
  key: "maxTokens" | "maxToolCalls" | "maxCostUsd";
  used: (spend: Spend) => number;
  whole: boolean;
  least: number;
}[] = [
  { key: "maxTokens", used: (s) => s.usage.inputTokens + s.usage.outputTokens, whole: true, least: 1 },
  { key: "maxToolCalls", used: (s) => s.toolCalls, whole: true, least: 1 },
  { key: "maxCostUsd", used: (s) => s.usage.costUsd, whole: false, least: 1e-9 },
];

/**
 * The child's budget: its own turns; for tokens, tool calls, cost and wall time the smaller of its
 * YAML budget and its share of what the parent has left (after what running siblings hold back).
 */
export function carve(own: Budget, parent: ParentSide, siblings: Reservation[], shares: number): Budget {
  const spent = parent.spent();
  const budget: Budget = {};
  if (own.maxTurns !== undefined) budget.maxTurns = own.maxTurns;
  for (const { key, used, whole, least } of SHARED) {
    const limit = parent.budget[key];
    const heldBack = siblings.reduce((sum, r) => sum + Math.max(0, (r.cap[key] ?? 0) - used(r.spent)), 0);
    const left = limit === undefined ? undefined : Math.max(0, (limit - used(spent) - heldBack) / shares);
    const value = smaller(own[key], left);
    if (value !== undefined) budget[key] = Math.max(least, whole ? Math.floor(value) : value);
  }
  const wallLeft =
    parent.budget.maxWallMs === undefined ? undefined : parent.budget.maxWallMs - parent.workedMs();
  budget.maxWallMs = Math.max(1, Math.floor(smaller(own.maxWallMs, wallLeft) ?? DEFAULT_CHILD_WALL_MS));
  return budget;
}

function smaller(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}

export interface ChildOutcome {
  reason: SubagentStopReason;
  result: string;
  error?: string;
}

/**
 * Spawns the child (unless a resumed parent finds it again) and follows it (`followChild`): what it
 * spends is charged to the parent as it goes, its `agent.stopped` ends the wait. When the parent is
 * aborted, or the child is past its wall (`patience`), it is told to abort on its control subject; a
 * child that does not stop then is left behind, never waited for.
 */
async function runChild(
  parent: ParentSide,
  spec: ChildSpec,
  reservation: Reservation,
  signal: AbortSignal,
): Promise<ChildOutcome> {
  const chargeUpTo = (total: Spend) => chargeToParent(parent, reservation, total);
  const news = followChild(parent.bus, parent.runId, spec.childId);
  const abortChild = (reason: string) => tellToAbort(parent, spec.childId, reason);
  const onAbort = () => abortChild("the parent was aborted");
  signal.addEventListener("abort", onAbort, { once: true });
  const wait = patience(spec.budget.maxWallMs ?? DEFAULT_CHILD_WALL_MS, abortChild);
  try {
    await parent.bus.flush();
    const existing = await parent.adopt(spec.childId);
    if (existing && "stopped" in existing) {
      chargeUpTo(existing.stopped.total);
      const { reason, result, error } = existing.stopped;
      return { reason, result, ...(error ? { error } : {}) };
    }
    // Reopened after an abort: what it spent before was charged to the parent as it spent it.
    if (existing && "running" in existing && existing.spent) reservation.spent = existing.spent;
    if (!existing) {
      await parent.commandHooks?.notify("subagentStart", spec.definition.name, {
        runId: parent.runId,
        parentId: parent.agentId,
        childId: spec.childId,
        task: spec.task,
      });
      parent.events.emit("subagent.spawned", {
        childId: spec.childId,
        ...(spec.callId ? { callId: spec.callId } : {}),
        name: spec.definition.name,
        task: spec.task,
        budget: spec.budget,
      });
      await parent.spawn(spec);
    }
    const leftBehind = wait.leftBehind.then((): ChildOutcome => ({ reason: "timeout", result: "" }));
    return await Promise.race([untilStopped(news, chargeUpTo, wait.timedOut), leftBehind]);
  } finally {
    wait.clear();
    signal.removeEventListener("abort", onAbort);
    void news.return?.();
  }
}

/** Reads a child's news to its stop, charging what it spends; a stop after its wall is a timeout. */
async function untilStopped(
  news: AsyncIterable<ChildNews>,
  chargeUpTo: (total: Spend) => void,
  timedOut: () => boolean,
): Promise<ChildOutcome> {
  for await (const item of news) {
    if ("spent" in item) {
      chargeUpTo(item.spent);
      continue;
    }
    const { total, reason, result, error } = item.stopped;
    chargeUpTo(total);
    return { reason: timedOut() ? "timeout" : reason, result, ...(error ? { error } : {}) };
  }
  // Only when its reader gave up first (left behind): that outcome is the one taken.
  return { reason: "timeout", result: "" };
}

/**
 * How long a parent waits for a child. A child stops itself at its wall and grace
 * (budget_exhausted, with its answer so far); one that has not by `PAST_GRACE_MS` after that (its
 * host gone) is told to abort and is a timeout, and one that has not answered the abort
 * `ABORT_ANSWER_MS` later is left behind.
 */
function patience(
  wallMs: number,
  abortChild: (reason: string) => void,
): { timedOut: () => boolean; leftBehind: Promise<void>; clear: () => void } {
  let timedOut = false;
  let answerTimer: NodeJS.Timeout | undefined;
  let leave: () => void = () => {};
  const leftBehind = new Promise<void>((resolve) => (leave = resolve));
  const wallTimer = setTimeout(
    () => {
      timedOut = true;
      abortChild(`past its wall time of ${wallMs} ms`);
      answerTimer = setTimeout(leave, ABORT_ANSWER_MS);
    },
    wallMs + wallGraceMs(wallMs) + PAST_GRACE_MS,
  );
  return {
    timedOut: () => timedOut,
    leftBehind,
    clear: () => {
      clearTimeout(wallTimer);
      clearTimeout(answerTimer);
    },
  };
}

/** Charges the parent what a child has spent past what it was charged already (a running total). */
function chargeToParent(parent: ParentSide, reservation: Reservation, total: Spend): void {
  const delta: Spend = {
    usage: subtract(total.usage, reservation.spent.usage),
    toolCalls: total.toolCalls - reservation.spent.toolCalls,
  };
  if (
    delta.toolCalls === 0 &&
    delta.usage.inputTokens === 0 &&
    delta.usage.outputTokens === 0 &&
    delta.usage.costUsd === 0
  )
    return;
  reservation.spent = total;
  parent.charge(delta);
}

/** Tells a child to abort on its control subject; one that is already gone has nothing to abort. */
function tellToAbort(parent: ParentSide, childId: string, reason: string): void {
  const envelope = makeEnvelope({
    runId: parent.runId,
    agentId: parent.agentId,
    seq: 0,
    type: "abort",
    data: { reason },
  });
  // Commands are requests the child acks.
  parent.bus
    .request(parent.bus.subjects.control(parent.runId, childId, "abort"), envelope, {
      timeoutMs: ABORT_ANSWER_MS,
    })
    .catch(() => {});
}

/** The tool a parent calls to run the child `name`. */
export const SUBAGENT_TOOL_PREFIX = "subagent_";

/** The id of the child one call starts: the same call gets the same child, so a resumed parent finds it. */
export function childIdOf(name: string, runId: string, parentId: string, callId: string): string {
  return `${name}-${createHash("sha256").update(`${runId}/${parentId}/${callId}`).digest("hex").slice(0, 10)}`;
}

export function resultOf(name: string, childId: string, outcome: ChildOutcome, spent: Spend): ToolResult {
  const tokens = spent.usage.inputTokens + spent.usage.outputTokens;
  const footer = `[subagent ${name} (${childId}) stopped: ${outcome.reason}; ${tokens} tokens, ${spent.toolCalls} tool calls, $${spent.usage.costUsd.toFixed(4)}]`;
  const answer = outcome.result || "(no answer)";
  if (outcome.reason === "done")
    return { ok: true, output: `${answer}\n${footer}`, summary: `${name}: done` };
  return {
    ok: false,
    output: `${answer}\n${footer}`,
    error: `subagent ${name} stopped: ${outcome.reason}${outcome.error ? ` (${outcome.error})` : ""}`,
    recoveryHint:
      outcome.reason === "aborted"
        ? "the run is being aborted"
        : "use what it found, give it a narrower task, or do this part yourself",
  };
}

function subtract(a: Usage, b: Usage): Usage {
  return addUsage(a, {
    inputTokens: -b.inputTokens,
    outputTokens: -b.outputTokens,
    cachedInputTokens: -b.cachedInputTokens,
    costUsd: -b.costUsd,
  });
}
