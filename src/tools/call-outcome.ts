import type { ToolResult } from "./tool.js";

/** What a tool said of a call besides its output: whether it worked, its error, summary, extras. */
export type ResultDetails = Omit<ToolResult, "output">;

/**
 * What one call came to, as the pipeline (`runBatch`) hands it on: the text the model reads, apart
 * from what the tool said. The tool's own `ToolResult` is never written into: its output, cleaned
 * and redacted, is in `content` (wrapped for the model) and `shown` (as the tool said it), and the
 * rest of what it said in `details`.
 */
export interface CallOutcome {
  /** The one text the model reads of the call: its tool message. */
  content: string;
  /**
   * What a person watching sees of the call: what the tool said (summary or error, output,
   * artifacts, next actions), cleaned and redacted but not wrapped, so a console shows the tool's
   * words as it said them. Absent when no tool ran here: a result Troupe made itself (a refusal, an
   * outcome unknown after a crash) or one taken back from the journal.
   */
  shown?: string;
  /**
   * Set when the result says `terminate`: what the tool said (its output, else its summary),
   * cleaned and redacted but not wrapped. The agent's answer when its batch stops it.
   */
  answer?: string;
  /** The rest of what the tool said, its texts cleaned and redacted: for events and the agent's rules. */
  details: ResultDetails;
}

/** A call's outcome as the journal keeps it: what people saw is in its `tool.finished` already. */
export type JournaledOutcome = Omit<CallOutcome, "shown">;

/**
 * The tool message the model reads of a call: a failed call's `error:` line first (with Troupe's
 * own error in it when the tool said nothing), then what was said, then how to recover.
 */
export function contentOf(
  details: Pick<ResultDetails, "ok" | "error" | "recoveryHint">,
  said: string,
): string {
  const lines: string[] = [];
  if (!details.ok) lines.push(said ? "error:" : `error: ${details.error ?? "the tool failed"}`);
  if (said) lines.push(said);
  if (!details.ok && details.recoveryHint) lines.push(`how to recover: ${details.recoveryHint}`);
  return lines.join("\n");
}

/**
 * The text the model reads of a result told as it is, not through the pipeline: one Troupe made
 * before or instead of running anything (an unknown tool, bad arguments, a denial), which has no
 * output and whose error is Troupe's own, or a subagent's answer read back from the event log.
 */
export function resultContent(result: ToolResult): string {
  return contentOf(result, result.output);
}

/** A result told as it is (`resultContent`) as a call's outcome. */
export function plainOutcome(result: ToolResult): CallOutcome {
  const { output, ...details } = result;
  const outcome: CallOutcome = { content: resultContent(result), details };
  if (result.terminate) outcome.answer = output;
  return outcome;
}
