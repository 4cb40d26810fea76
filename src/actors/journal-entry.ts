import { z } from "zod";
import type { ToolEffect } from "../config/tool-catalog.js";
import { type JournaledOutcome, type ResultDetails, resultContent } from "../tools/call-outcome.js";
import type { ToolResult } from "../tools/tool.js";

/**
 * The version of a journal entry as this build writes it. An entry without `v` is of version 1: its
 * finished call's `result` is a `ToolResult` whose `output` is the wrapped text the model read, with
 * `answer` beside it; it is read as the outcome it stands for (`fromV1`), so a call finished by an
 * earlier build is still never run again and its model reads the same text.
 */
export const JOURNAL_ENTRY_VERSION = 2;

/** One tool call's journal entry: a finished call is never run again. */
export interface JournalEntry {
  status: "started" | "finished";
  name: string;
  effect: ToolEffect;
  /** A finished call's outcome, as the model read it. */
  outcome?: JournaledOutcome;
}

/** An entry as it is stored, at this version. */
export type StoredJournalEntry = JournalEntry & { v: typeof JOURNAL_ENTRY_VERSION };

const effect = z.enum(["read", "write", "execute"]);

const started = z.object({ status: z.literal("started"), name: z.string(), effect });

const finishedV1 = z.object({
  v: z.never().optional(),
  status: z.literal("finished"),
  name: z.string(),
  effect,
  result: z.looseObject({ ok: z.boolean(), output: z.string() }),
});

const finished = z.object({
  v: z.literal(JOURNAL_ENTRY_VERSION),
  status: z.literal("finished"),
  name: z.string(),
  effect,
  outcome: z.object({
    content: z.string(),
    answer: z.string().optional(),
    details: z.looseObject({ ok: z.boolean() }),
  }),
});

/** An entry read back, whichever version wrote it; undefined when it is none of them. */
export function parseJournalEntry(value: unknown): JournalEntry | undefined {
  const v2 = finished.safeParse(value);
  if (v2.success) {
    const { v: _, ...entry } = v2.data;
    return entry as JournalEntry;
  }
  const v1 = finishedV1.safeParse(value);
  if (v1.success) {
    const { name, effect, result } = v1.data;
    return { status: "finished", name, effect, outcome: fromV1(result as ToolResult & { answer?: string }) };
  }
  const start = started.safeParse(value);
  return start.success ? start.data : undefined;
}

/**
 * A version 1 result as the outcome it stands for: its `output` is the wrapped text already, and a
 * terminating one's answer is its `answer`, else that output (as the agent took it then).
 */
function fromV1(result: ToolResult & { answer?: string }): JournaledOutcome {
  const { output, answer, ...details } = result;
  const outcome: JournaledOutcome = { content: resultContent(result), details: details as ResultDetails };
  if (result.terminate) outcome.answer = answer ?? output;
  return outcome;
}
