import { AGENT_MACHINE_VERSION } from "../machines/agent-machine.js";

/*
 * An agent's stored record names the version of its own shape (`v`) and of the machine whose
 * snapshot it holds (`machineVersion`). A record of an earlier version is brought up to this one by
 * the migrations below, in order, before it is read: nothing reads an absent field as a default.
 * Each earlier version has a stored fixture in test/fixtures/records/ that the tests migrate and resume.
 */

/** The version of the record's own shape (its fields beside the snapshot). */
export const AGENT_RECORD_VERSION = 1;

/** A record's two versions. */
export interface RecordVersion {
  v: number;
  machine: number;
}

/** One step from one version of a record to the next, and why it was taken. */
export interface RecordMigration {
  from: RecordVersion;
  to: RecordVersion;
  why: string;
  /** Returns the record at `to`; it may change the record it is given. */
  migrate(record: StoredRecord): StoredRecord;
}

/** A record as stored, before its shape is checked. */
export type StoredRecord = Record<string, unknown> & {
  v?: unknown;
  machineVersion?: unknown;
  snapshot?: { context?: Record<string, unknown> };
};

export const RECORD_MIGRATIONS: readonly RecordMigration[] = [
  {
    from: { v: 1, machine: 1 },
    to: { v: 1, machine: 2 },
    why: "the machine keeps onToolError in its context; a snapshot of machine 1 may lack it, which meant continue",
    migrate: (record) => {
      const context = record.snapshot?.context;
      if (context && context.onToolError === undefined) context.onToolError = "continue";
      return { ...record, machineVersion: 2 };
    },
  },
  {
    from: { v: 1, machine: 2 },
    to: { v: 1, machine: 3 },
    why: "the machine keeps the time it waited for people (waitedMs) in its context; a snapshot of machine 2 had waited none that it knew of",
    migrate: (record) => {
      const context = record.snapshot?.context;
      if (context && context.waitedMs === undefined) context.waitedMs = 0;
      return { ...record, machineVersion: 3 };
    },
  },
  {
    from: { v: 1, machine: 3 },
    to: { v: 1, machine: 4 },
    why: "the machine's context holds fewer fields, grouped (copied at every step, it stays quick to copy): steering and follow-ups in `unread`, the calls loop detection watches in `loop`, the limit reached in `finalizing`; the time worked is the record's `elapsedMs` alone",
    migrate: (record) => {
      const context = record.snapshot?.context;
      if (context) regroup(context);
      return { ...record, machineVersion: 4 };
    },
  },
  {
    from: { v: 1, machine: 4 },
    to: { v: 1, machine: 5 },
    why: "the machine has a state for a compaction a person asked for (compactingAsked); a snapshot of machine 4 is never in it, and reads as it is",
    migrate: (record) => ({ ...record, machineVersion: 5 }),
  },
];

/** A machine 3 context in machine 4's shape (in place). */
function regroup(context: Record<string, unknown>): void {
  const {
    steering = [],
    followUps = [],
    recentCalls = [],
    nudgedForLoop = false,
    finalizing,
    limit,
  } = context;
  context.unread = { steering, followUps };
  context.loop = { recentCalls, nudged: nudgedForLoop };
  context.finalizing =
    typeof finalizing === "string"
      ? { reason: finalizing, ...(typeof limit === "string" ? { limit } : {}) }
      : null;
  for (const gone of ["steering", "followUps", "recentCalls", "nudgedForLoop", "limit", "elapsedMs"])
    delete context[gone];
}

const CURRENT: RecordVersion = { v: AGENT_RECORD_VERSION, machine: AGENT_MACHINE_VERSION };

const same = (a: RecordVersion, b: RecordVersion) => a.v === b.v && a.machine === b.machine;

/**
 * The record brought up to this version of Troupe, or why it cannot be: a version no migration
 * starts from (a newer Troupe's, or none at all).
 */
export function migrateRecord(
  stored: StoredRecord,
): { record: StoredRecord; from: RecordVersion } | { refused: string } {
  const from = { v: Number(stored.v), machine: Number(stored.machineVersion) };
  let at = from;
  let record = stored;
  while (!same(at, CURRENT)) {
    const step = RECORD_MIGRATIONS.find((migration) => same(migration.from, at));
    if (!step)
      return {
        refused: `record v${String(stored.v)}, machine v${String(stored.machineVersion)}; this one reads v${CURRENT.v}/v${CURRENT.machine}`,
      };
    record = step.migrate(structuredClone(record));
    at = step.to;
  }
  return { record, from };
}
