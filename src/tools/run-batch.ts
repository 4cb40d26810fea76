import { cleanOutput, DEFAULT_OUTPUT_CAP } from "../safety/hygiene.js";
import type { Redactor } from "../safety/redact.js";
import { wrapUntrusted } from "../safety/untrusted.js";
import {
  type CallOutcome,
  contentOf,
  type JournaledOutcome,
  plainOutcome,
  type ResultDetails,
} from "./call-outcome.js";
import { type PlannedCall, parseArguments } from "./plan.js";
import {
  type Elicitor,
  resultExtras,
  type Sampler,
  type Tool,
  type ToolContext,
  type ToolProgress,
  type ToolRegistry,
  type ToolResult,
  toolError,
} from "./tool.js";

/** Artifacts, and next actions, a result may carry to the model and into events. */
const MAX_EXTRAS = 50;

/** The least time between two progress reports of one call that observers are told of. */
export const PROGRESS_INTERVAL_MS = 250;

/** Characters of a progress message observers are told. */
const MAX_PROGRESS_MESSAGE = 200;

export interface BatchObserver {
  onStart?(call: PlannedCall): void;
  /**
   * How far a running call has come, as its tool says: at most one report per `PROGRESS_INTERVAL_MS`
   * (and its last, when it reaches its total); its message cut to 200 characters and redacted.
   */
  onProgress?(call: PlannedCall, progress: ToolProgress): void;
  onFinish?(call: PlannedCall, outcome: CallOutcome, durationMs: number): void;
  /** The images a call returned (ahead of its finish), for a model that takes them. */
  onImages?(call: PlannedCall, images: NonNullable<ToolResult["images"]>): void;
}

export interface BatchOptions {
  registry: ToolRegistry;
  context: Omit<ToolContext, "callId" | "signal" | "sample" | "elicit">;
  signal: AbortSignal;
  observer?: BatchObserver;
  /** Answers the completions a call's program asks the agent for (an MCP server's sampling), by call. */
  sampler?: (call: PlannedCall) => Sampler;
  /** Puts the questions a call's program has for the user (an MCP server's elicitation), by call. */
  elicitor?: (call: PlannedCall) => Elicitor;
  defaultTimeoutMs?: number;
  /** Secrets come out of every output and error. */
  redactor?: Redactor;
  /** Characters of output a result may carry. Default 30000. */
  outputCap?: number;
  /** Where calls that write or execute are journaled, so a finished one is never run again after a restart. */
  journal?: BatchJournal;
  /** User hooks around each call: `before` may block it (its result stands instead), `after` may replace the result. */
  gate?: {
    /** A result that stands instead of the call (blocked), or the call with changed arguments. */
    before(call: PlannedCall): Promise<{ blocked?: ToolResult; call?: PlannedCall } | undefined>;
    after(call: PlannedCall, result: ToolResult): Promise<ToolResult>;
  };
}

/** The tool-call journal of one agent. */
export interface BatchJournal {
  get(callId: string): Promise<{ status: "started" | "finished"; outcome?: JournaledOutcome } | undefined>;
  started(call: PlannedCall): Promise<void>;
  finished(call: PlannedCall, outcome: JournaledOutcome): Promise<void>;
}

/**
 * Runs the calls of one batch that are cleared to run. Consecutive read calls run together; a write
 * or execute call runs alone, in the order the model asked, so a read after a write sees it.
 * Returns each call's outcome by call id; a tool that throws or times out becomes an error result.
 */
export async function runBatch(
  calls: readonly PlannedCall[],
  options: BatchOptions,
): Promise<Record<string, CallOutcome>> {
  // Each running call has a controller of its own; the turn's signal gets one listener for the
  // whole batch, however many reads run at once (Node warns of a leak past ten on one signal).
  const running = new Set<AbortController>();
  const onAbort = () => {
    for (const controller of running) controller.abort(options.signal.reason);
  };
  options.signal.addEventListener("abort", onAbort, { once: true });
  const results: Record<string, CallOutcome> = {};
  const batch = calls.map(({ id, name }) => ({ id, name }));
  options = { ...options, context: { ...options.context, batch } };
  let group: PlannedCall[] = [];
  const flush = async () => {
    const reads = group;
    group = [];
    await Promise.all(reads.map(async (call) => (results[call.id] = await runOne(call, options, running))));
  };
  try {
    for (const call of calls) {
      if (options.signal.aborted) break;
      if (call.effect === "read") {
        group.push(call);
        continue;
      }
      await flush();
      // Aborted while the reads before it ran: a write or command is not started after the abort.
      if (options.signal.aborted) break;
      results[call.id] = await runOne(call, options, running);
    }
    await flush();
  } finally {
    options.signal.removeEventListener("abort", onAbort);
  }
  return results;
}

async function runOne(
  call: PlannedCall,
  options: BatchOptions,
  running: Set<AbortController>,
): Promise<CallOutcome> {
  const journaled = await options.journal?.get(call.id);
  if (journaled?.status === "finished" && journaled.outcome) return journaled.outcome;
  // Cut short by a crash, it may or may not have taken effect: one that may run twice runs again;
  // of any other the model is told, and it is not run twice (at most once, with notice).
  if (journaled?.status === "started" && !options.registry.get(call.name)?.idempotent) {
    const unknown = plainOutcome(
      toolError(
        `${call.name} was running when its host stopped; its outcome is unknown`,
        "check whether it took effect (read the files it touches) before you run it again",
      ),
    );
    // Its host died before saying it finished: said here, so observers see what the model is told.
    options.observer?.onFinish?.(call, unknown, 0);
    return unknown;
  }
  await options.journal?.started(call);
  const outcome = await execute(call, options, running);
  const { shown: _, ...kept } = outcome;
  await options.journal?.finished(call, kept);
  return outcome;
}

async function execute(
  call: PlannedCall,
  options: BatchOptions,
  running: Set<AbortController>,
): Promise<CallOutcome> {
  const tool = options.registry.get(call.name);
  if (!tool) return plainOutcome(toolError(`unknown tool "${call.name}"`, "call one of the tools available"));
  options.observer?.onStart?.(call);
  const started = performance.now();
  const gated = await options.gate?.before(call);
  if (gated?.call) call = gated.call;
  if (gated?.blocked) {
    const outcome = outcomeOf(gated.blocked, tool.source ?? tool.name, tool.readMore, options);
    options.observer?.onFinish?.(call, outcome, performance.now() - started);
    return outcome;
  }
  const timeoutMs = tool.timeoutMs ?? options.defaultTimeoutMs ?? 120_000;
  const controller = new AbortController();
  running.add(controller);
  if (options.signal.aborted) controller.abort(options.signal.reason);
  const deadline = callDeadline(timeoutMs, tool.maxTotalTimeoutMs, controller);
  const report = progressReporter(call, options);
  let result: ToolResult;
  try {
    const args = parseArguments(tool.parameters, call.arguments);
    const progress = (update: ToolProgress) => {
      deadline.progressed();
      report(update);
    };
    result = await Promise.race([
      Promise.resolve(
        tool.execute(args, {
          ...options.context,
          callId: call.id,
          signal: controller.signal,
          progress,
          ...(options.sampler ? { sample: options.sampler(call) } : {}),
          ...(options.elicitor ? { elicit: options.elicitor(call) } : {}),
          ...(call.sandbox ? { sandbox: call.sandbox } : {}),
        }),
      ),
      deadline.expired,
    ]);
  } catch (error) {
    result =
      error instanceof ToolTimeoutError
        ? toolError(`${call.name} ${error.message}`, "try a smaller request, or a different approach")
        : toolError(
            `${call.name} failed: ${error instanceof Error ? error.message : String(error)}`,
            "check the arguments, or try a different approach",
          );
  } finally {
    deadline.clear();
    running.delete(controller);
  }
  if (options.gate) result = await options.gate.after(call, result);
  if (result.ok && result.images?.length) options.observer?.onImages?.(call, result.images);
  const outcome = outcomeOf(result, tool.source ?? tool.name, tool.readMore, options);
  options.observer?.onFinish?.(call, outcome, performance.now() - started);
  return outcome;
}

/**
 * What a result comes to on its way to the model: control and escape characters out, the size
 * capped with a note on how to read the rest, secrets redacted. All the tool said (summary or error,
 * output, artifacts, next actions) is `shown` to people as it said it, and wrapped as untrusted data
 * in `content`, which is what the model reads; `details` keep its error, summary, artifacts, next
 * actions and recovery hint plain, cleaned and redacted, for events and people; so does a
 * terminating result's `answer`. The result itself is left as it is. A text that is not a string
 * (a JavaScript tool's, an afterTool hook's JSON) is taken as its string.
 */
export function outcomeOf(
  result: ToolResult,
  source: string,
  readMore: string | undefined,
  options: Pick<BatchOptions, "redactor" | "outputCap">,
): CallOutcome {
  const redact = (text: string) => (options.redactor ? options.redactor.redact(text) : text);
  const clean = (text: unknown, cap: number, more?: string) => redact(cleanOutput(String(text), cap, more));
  const details: ResultDetails = { ok: result.ok };
  if (result.error !== undefined) details.error = clean(result.error, 2000);
  if (result.summary !== undefined) details.summary = clean(result.summary, 500);
  if (result.artifacts !== undefined) details.artifacts = texts(result.artifacts).map((a) => clean(a, 500));
  if (result.nextActions !== undefined)
    details.nextActions = texts(result.nextActions).map((a) => clean(a, 1000));
  if (result.recoveryHint !== undefined) details.recoveryHint = clean(result.recoveryHint, 500);
  if (result.terminate !== undefined) details.terminate = result.terminate;
  const output = clean(result.output, options.outputCap ?? DEFAULT_OUTPUT_CAP, readMore);
  const said = [
    result.ok ? details.summary : (details.error ?? "the tool failed"),
    output,
    ...resultExtras(details),
  ];
  const shown = said.filter(Boolean).join("\n");
  const outcome: CallOutcome = { content: contentOf(details, wrapUntrusted(source, shown)), shown, details };
  if (result.terminate) outcome.answer = output || details.summary || "";
  return outcome;
}

/** The first strings of a list a tool or an afterTool hook gave, whatever else it held. */
function texts(list: unknown): string[] {
  return Array.isArray(list)
    ? list.filter((item): item is string => typeof item === "string").slice(0, MAX_EXTRAS)
    : [];
}

/**
 * The timeout of one call: `expired` rejects after `timeoutMs` and the call is aborted. Each
 * `progressed()` starts the wait again when the tool allows it (`maxTotalMs`), never past `maxTotalMs`
 * from the start.
 */
function callDeadline(
  timeoutMs: number,
  maxTotalMs: Tool["maxTotalTimeoutMs"],
  controller: AbortController,
): { expired: Promise<never>; progressed(): void; clear(): void } {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  let over = false;
  let fail: (error: ToolTimeoutError) => void = () => {};
  const expired = new Promise<never>((_, reject) => (fail = reject));
  // The error is made when the time is up, not per call: an Error takes its stack when made.
  const arm = (ms: number, why: string) => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      // Settle the race as a timeout before the tool reacts to the abort.
      fail(new ToolTimeoutError(why));
      controller.abort(new Error("timeout"));
    }, ms);
  };
  arm(timeoutMs, `timed out after ${timeoutMs} ms`);
  return {
    expired,
    progressed() {
      // A late report, after the call settled, starts nothing.
      if (maxTotalMs === undefined || over) return;
      const left = started + maxTotalMs - Date.now();
      if (left <= timeoutMs) arm(left, `timed out after ${maxTotalMs} ms in all`);
      else arm(timeoutMs, `timed out after ${timeoutMs} ms without progress`);
    },
    clear() {
      over = true;
      clearTimeout(timer);
    },
  };
}

/**
 * Tells the observer of a call's progress, at most once per `PROGRESS_INTERVAL_MS` (a chatty server
 * cannot flood the event log) and always when it reaches its total; the message redacted and cut.
 */
function progressReporter(
  call: PlannedCall,
  options: Pick<BatchOptions, "observer" | "redactor">,
): (update: ToolProgress) => void {
  let last = Number.NEGATIVE_INFINITY;
  return ({ progress, total, message }) => {
    const now = Date.now();
    const done = total !== undefined && progress >= total;
    if (!options.observer?.onProgress || (now - last < PROGRESS_INTERVAL_MS && !done)) return;
    last = now;
    // Redacted whole, then cut: a secret across the cut is not left half shown.
    const told = message === undefined || !options.redactor ? message : options.redactor.redact(message);
    const cut = told && told.length > MAX_PROGRESS_MESSAGE ? `${told.slice(0, MAX_PROGRESS_MESSAGE)}…` : told;
    const update: ToolProgress = { progress, total, message: cut };
    options.observer.onProgress(call, update);
  };
}

class ToolTimeoutError extends Error {
  override name = "ToolTimeoutError";
}
