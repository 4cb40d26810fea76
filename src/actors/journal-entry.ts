import { z } from "zod";
import type { ToolEffect } from "../config/tool-catalog.js";
import { type JournaledOutcome, type ResultDetails, resultContent } from "../tools/call-outcome.js";
import type { ToolResult } from "../tools/tool.js";
import { migrateVersioned, type VersionedRecord, type VersionStep } from "../util/record-versions.js";

/**
 * The version of a journal entry as this build writes it. An entry without `v` is of version 1: its
 * finished call's `result` is a `ToolResult` whose `output` is the wrapped text the model read, with
 * `answer` beside it; it is read as the outcome it stands for (`fromV1`), so a call finished by an
 * earlier build is still never run again and its model reads the same text. An entry of a version
 * this build does not read is none (`parseJournalEntry`): its call's outcome is unknown.
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

/** A version 1 entry's `result`: a `ToolResult` whose `output` is the wrapped text the model read. */
const resultV1 = z.looseObject({ ok: z.boolean(), output: z.string() });

/**
 * The steps from each earlier version of an entry to the next, in order (`migrateVersioned`). Each
 * earlier version has stored fixtures in test/fixtures/journal/ and test/fixtures/stored-runs/.
 */
export const JOURNAL_MIGRATIONS: readonly VersionStep[] = [
  {
    from: 1,
    to: 2,
    why: "a finished call keeps the outcome it stands for (what the model read, a terminating call's answer, the tool's details), not the ToolResult whose output was the wrapped text",
    migrate: ({ result, ...entry }) => {
      const v1 = resultV1.safeParse(result);
      return entry.status === "finished" && v1.success
        ? { ...entry, v: 2, outcome: fromV1(v1.data as ToolResult & { answer?: string }) }
        : { ...entry, v: 2 };
    },
  },
];

const stored = z.discriminatedUnion("status", [
  z.object({ v: z.literal(JOURNAL_ENTRY_VERSION), status: z.literal("started"), name: z.string(), effect }),
  z.object({
    v: z.literal(JOURNAL_ENTRY_VERSION),
    status: z.literal("finished"),
    name: z.string(),
    effect,
    outcome: z.object({
      content: z.string(),
      answer: z.string().optional(),
      details: z.looseObject({ ok: z.boolean() }),
    }),
  }),
]);

/**
 * An entry read back, brought up to this version by `JOURNAL_MIGRATIONS`; undefined when it is none
 * (not an entry, or of a version this build does not read).
 */
export function parseJournalEntry(value: unknown): JournalEntry | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const migrated = migrateVersioned(value as VersionedRecord, JOURNAL_ENTRY_VERSION, JOURNAL_MIGRATIONS);
  if ("refused" in migrated) return undefined;
  const parsed = stored.safeParse(migrated.record);
  if (!parsed.success) return undefined;
  const { v: _, ...entry } = parsed.data;
  return entry as JournalEntry;
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
