/*
 * A stored record that names the version of its shape (`v`) is read through listed steps: one of an
 * earlier version is brought up to the current one, a step at a time, before its shape is checked;
 * nothing reads an absent field as a default. A record written before its kind carried a `v` is
 * version 1. Each earlier version has a stored fixture under test/fixtures/ that the tests read
 * through the current code.
 */

/** One step from one version of a record to the next, and why it was taken. */
export interface VersionStep {
  from: number;
  to: number;
  why: string;
  /** Returns the record at `to`; it may change the record it is given (a copy). */
  migrate(record: VersionedRecord): VersionedRecord;
}

/** A record as stored, before its shape is checked. */
export type VersionedRecord = Record<string, unknown> & { v?: unknown };

/** The version a stored record names: 1 when it names none. */
export const versionOf = (record: VersionedRecord): unknown => (record.v === undefined ? 1 : record.v);

/**
 * The record brought up to `current` by `steps`, naming that version, or why it cannot be: a
 * version no step starts from (a newer Troupe's, or none that ever was).
 */
export function migrateVersioned(
  stored: VersionedRecord,
  current: number,
  steps: readonly VersionStep[],
): { record: VersionedRecord; from: number } | { refused: string } {
  const from = versionOf(stored);
  const named = typeof from === "number" ? String(from) : JSON.stringify(from);
  const refused = { refused: `v${named}; this one reads v${current}` };
  if (typeof from !== "number") return refused;
  let at = from;
  let record = stored;
  while (at !== current) {
    const step = steps.find((candidate) => candidate.from === at);
    if (!step) return refused;
    record = step.migrate(structuredClone(record));
    at = step.to;
  }
  return { record: record.v === current ? record : { ...record, v: current }, from };
}
