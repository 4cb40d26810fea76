import { createHash } from "node:crypto";
import { z } from "zod";
import type { Bus, KvStore } from "../bus/bus.js";
import { KvConflictError } from "../bus/bus.js";
import { callKey } from "../bus/subjects.js";
import { budgetSchema } from "../config/budget-schema.js";
import { approvalPolicySchema, sandboxModeSchema } from "../config/policy-schemas.js";
import type { ToolEffect } from "../config/tool-catalog.js";
import { TroupeError } from "../errors.js";
import type { Logger } from "../log.js";
import type { JournaledOutcome } from "../tools/call-outcome.js";
import type { BatchJournal } from "../tools/run-batch.js";
import type { RecordSeal } from "../trust/record-seal.js";
import {
  JOURNAL_ENTRY_VERSION,
  type JournalEntry,
  parseJournalEntry,
  type StoredJournalEntry,
} from "./journal-entry.js";
import { AGENT_RECORD_VERSION, migrateRecord, type StoredRecord } from "./record-migrations.js";

export { AGENT_RECORD_VERSION };

/** Everything needed to bring an agent back: its machine's persisted snapshot and who it is. */
export const agentRecordSchema = z.object({
  v: z.literal(AGENT_RECORD_VERSION),
  machineVersion: z.number().int(),
  runId: z.string(),
  agentId: z.string(),
  parentId: z.string().optional(),
  name: z.string(),
  depth: z.number().int().nonnegative(),
  task: z.string(),
  budget: budgetSchema,
  /** `plan` when the agent runs in plan mode. */
  mode: z.enum(["act", "plan"]).optional(),
  /** The approval policy its run asked for, when one did. */
  approval: approvalPolicySchema.optional(),
  /** The sandbox mode its run asked for, when one did. */
  sandbox: sandboxModeSchema.optional(),
  /** The seq its next event gets. */
  nextSeq: z.number().int().nonnegative(),
  /** Wall time spent so far. */
  elapsedMs: z.number().nonnegative(),
  /** XState's `getPersistedSnapshot()`, redacted. */
  snapshot: z.unknown(),
  /** Whether the machine has reached `stopped`. */
  done: z.boolean(),
});
export type AgentRecord = z.infer<typeof agentRecordSchema>;

export class IncompatibleRecordError extends TroupeError {
  override name = "IncompatibleRecordError";
}

/** Another host took the agent over (its record moved on past what this host wrote): stop here. */
export class AgentMovedError extends TroupeError {
  override name = "AgentMovedError";
}

/** A stored value's digest: what a host compares to know a record for the one it wrote. */
const digestOf = (value: unknown) => createHash("sha256").update(JSON.stringify(value)).digest("base64");

/** Keys are `<runId>.<agentId>`: both are subject tokens, so they are valid KV keys. */
const keyOf = (runId: string, agentId: string) => `${runId}.${agentId}`;

/** Makes an agent's record when it is to be written; `undefined` when there is nothing to write. */
export type TakeRecord = () => Promise<AgentRecord | undefined>;

interface Writer {
  next: TakeRecord | undefined;
  /** Told whether the agent is still this host's once the save is done. */
  waiting: Array<(owned: boolean) => void>;
  /** Told when nothing is left to write. */
  idle: Array<() => void>;
}

/**
 * Agent snapshots in the KV bucket `snapshots`. Each agent writes its own key with the revision it
 * last wrote, so a stale writer (a host that lost its agent to another) cannot move state backwards.
 *
 * The daemon's store has its seal (`RecordSeal`): what it writes carries the seal, and a record it
 * reads without one is no record of the agent (rebuilt from the log instead), nor is one it finds
 * over its own a sign that another host took the agent over (written over instead). A worker's seed
 * may write the bucket (it hosts subagents), and so could otherwise rewrite what a run's first
 * agent remembers, or have the daemon let it go as moved. Only a daemon with the same key (a
 * standby with the same data dir's credentials) takes a daemon's agent over.
 */
export class AgentStore {
  #revisions = new Map<string, number>();
  /** Agents another host took over (a write conflicted): nothing more is written of them from here. */
  #moved = new Set<string>();
  #writers = new Map<string, Writer>();
  /**
   * The digest of what a write that failed without an answer (a timeout) tried to store, by key: it
   * may have been stored all the same, and the next write then conflicts with this host's own record.
   * A stopped agent's last write is not kept: nothing more is written of it.
   */
  #unanswered = new Map<string, string>();

  private constructor(
    private readonly kv: KvStore,
    private readonly log: Logger,
    private readonly seal: RecordSeal | undefined,
  ) {}

  static async open(bus: Bus, log: Logger, seal?: RecordSeal): Promise<AgentStore> {
    return new AgentStore(await bus.kv("snapshots"), log, seal);
  }

  /**
   * Saves an agent, one write per agent at a time. `take` makes the record when its turn comes, so
   * of the saves asked for while one is being written only the latest is taken and written (a record
   * is the whole agent: only the latest counts); `undefined` writes nothing. Resolves once this save,
   * or a later one, is done: false when another host owns the agent now (a write conflicted, from
   * here or before), and nothing more is written of it unless it is loaded again.
   */
  save(runId: string, agentId: string, take: TakeRecord): Promise<boolean> {
    const key = keyOf(runId, agentId);
    if (this.#moved.has(key)) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const writer = this.#writers.get(key);
      if (writer) {
        writer.next = take;
        writer.waiting.push(resolve);
        return;
      }
      const started: Writer = { next: take, waiting: [resolve], idle: [] };
      this.#writers.set(key, started);
      void this.#write(key, started);
    });
  }

  async #write(key: string, writer: Writer) {
    for (let take = writer.next; take; take = writer.next) {
      const waiting = writer.waiting;
      writer.next = undefined;
      writer.waiting = [];
      const record = await take();
      if (record) await this.#put(key, record);
      const owned = !this.#moved.has(key);
      if (!owned) writer.next = undefined;
      for (const resolve of waiting) resolve(owned);
    }
    this.#writers.delete(key);
    for (const resolve of writer.idle) resolve();
  }

  /**
   * Resolves once every save asked for so far (and any asked for meanwhile) is written; rejects with
   * `AgentMovedError` when another host owns the agent now. What writes or executes waits for this.
   */
  async settled(runId: string, agentId: string): Promise<void> {
    const key = keyOf(runId, agentId);
    const writer = this.#writers.get(key);
    if (writer) await new Promise<void>((resolve) => writer.idle.push(resolve));
    if (this.#moved.has(key)) throw new AgentMovedError(`another host took ${agentId} over`);
  }

  async #put(key: string, record: AgentRecord, overJunk = true): Promise<void> {
    const value = this.seal ? this.seal.sealAsWritten(record) : record;
    try {
      const expected = this.#revisions.get(key);
      const revision = await this.kv.put(
        key,
        value,
        expected === undefined ? {} : { expectedRevision: expected },
      );
      this.#unanswered.delete(key);
      // A stopped agent is written no more unless it is loaded again (which reads its revision).
      if (record.done) this.#revisions.delete(key);
      else this.#revisions.set(key, revision);
    } catch (error) {
      if (!(error instanceof KvConflictError)) {
        if (record.done) this.#unanswered.delete(key);
        else this.#unanswered.set(key, digestOf(value));
        this.log.error({ err: error, key }, "snapshot not saved");
        return;
      }
      const current = await this.kv.get<unknown>(key).catch(() => null);
      // This host's own write, stored though its answer never came (a busy host's put timed out):
      // still this host's agent, written on from that revision. Taking it for another host's would
      // let the agent go with no one to take it over.
      const unanswered = this.#unanswered.get(key);
      this.#unanswered.delete(key);
      if (current && unanswered !== undefined && digestOf(current.value) === unanswered) {
        this.log.info({ key }, "a snapshot whose write timed out was stored: written on from it");
        this.#revisions.set(key, current.revision);
        await this.#put(key, record, overJunk);
        return;
      }
      // Another host that took this agent over writes a record of it. Anything else there was
      // put by the server for someone who may only read a stream (a stored message sent onto the
      // key): this host's record goes over it, from the revision it has now.
      const parsed = agentRecordSchema.safeParse(this.#opened(current?.value));
      if (overJunk && current && !(parsed.success && keyOf(parsed.data.runId, parsed.data.agentId) === key)) {
        this.log.warn({ key }, "a snapshot was replaced by something that is none: written over");
        this.#revisions.set(key, current.revision);
        await this.#put(key, record, false);
        return;
      }
      this.log.debug({ key }, "snapshot not saved: another host has moved this agent on");
      this.#moved.add(key);
      this.#revisions.delete(key);
    }
  }

  /**
   * The record, brought up to this version (`migrateRecord`); one of a version no migration
   * starts from is refused with a clear message.
   */
  async load(runId: string, agentId: string): Promise<AgentRecord | undefined> {
    const key = keyOf(runId, agentId);
    const entry = await this.kv.get<unknown>(key);
    if (!entry) return undefined;
    const stored = this.#opened(entry.value);
    if (typeof stored !== "object" || stored === null || Array.isArray(stored))
      throw new IncompatibleRecordError(
        `the snapshot of ${agentId} is not a record of it${this.seal ? " sealed by this daemon" : ""}`,
      );
    const migrated = migrateRecord(stored as StoredRecord);
    if ("refused" in migrated)
      throw new IncompatibleRecordError(
        `the snapshot of ${agentId} was written by another version of Troupe (${migrated.refused})`,
      );
    const parsed = agentRecordSchema.safeParse(migrated.record);
    // Anything else under the key (a stored message the server was asked to send there, another
    // agent's record copied over it) is no snapshot of this agent.
    if (!parsed.success || keyOf(parsed.data.runId, parsed.data.agentId) !== key)
      throw new IncompatibleRecordError(`the snapshot of ${agentId} is not a record of it`);
    this.#revisions.set(key, entry.revision);
    this.#moved.delete(key);
    return parsed.data;
  }

  /** A stored value as this store takes it: with a seal, only one it sealed (without the seal). */
  #opened(value: unknown): unknown {
    return this.seal ? this.seal.openAsWritten(value) : value;
  }

  /**
   * Takes an agent over from a host that went silent: loads its record and writes it back at once
   * over the revision read, so that host, should it come back, conflicts at its next write and lets
   * the agent go. When that host wrote in between, the newer record is loaded and written instead.
   */
  async takeOver(runId: string, agentId: string): Promise<AgentRecord | undefined> {
    const key = keyOf(runId, agentId);
    for (;;) {
      const record = await this.load(runId, agentId);
      if (!record) return undefined;
      try {
        this.#revisions.set(
          key,
          await this.kv.put(key, record, { expectedRevision: this.#revisions.get(key) }),
        );
        return record;
      } catch (error) {
        if (!(error instanceof KvConflictError)) throw error;
        this.log.info({ key }, "the snapshot moved on while it was taken over: reading it again");
      }
    }
  }
}

/**
 * Tool calls journaled in the KV bucket `journal` under `<runId>.<agentId>.<callId>`. The daemon's
 * journal has its seal, as its snapshots do (`AgentStore`): an entry it reads without one is of
 * unknown outcome, never a finished call with a result of someone else's. Each entry says the
 * version it was written at (`v`); one an earlier build wrote is read as what it stands for
 * (journal-entry.ts).
 */
export class ToolJournal {
  private constructor(
    private readonly kv: KvStore,
    private readonly seal: RecordSeal | undefined,
  ) {}

  static async open(bus: Bus, seal?: RecordSeal): Promise<ToolJournal> {
    return new ToolJournal(await bus.kv("journal"), seal);
  }

  /**
   * The journal of one agent, as a tool batch uses it. Local reads are not journaled at all: one cut
   * short, or finished but not yet in a snapshot, is simply run again (only what writes or executes,
   * or is a remote program's call, must not happen twice). A `fresh` agent (started here, not resumed) has no entries but the ones
   * written here, so it looks them up in memory instead of asking the bucket.
   */
  forAgent(
    runId: string,
    agentId: string,
    options: {
      fresh: boolean;
      /** What must be done before a call that writes or executes starts (its snapshot written). */
      beforeStart?: () => Promise<void>;
    },
  ): BatchJournal {
    const written = options.fresh ? new Map<string, JournalEntry>() : undefined;
    return {
      get: async (callId) => (written ? written.get(callId) : this.get(runId, agentId, callId)),
      started: async (call) => {
        if (!isJournaled(call)) return;
        await options.beforeStart?.();
        written?.set(call.id, { status: "started", name: call.name, effect: call.effect });
        await this.started(runId, agentId, call.id, call.name, call.effect);
      },
      finished: async (call, outcome) => {
        if (!isJournaled(call)) return;
        written?.set(call.id, { status: "finished", name: call.name, effect: call.effect, outcome });
        await this.finished(runId, agentId, call.id, call.name, call.effect, outcome);
      },
    };
  }

  /**
   * The entry of a call, or undefined when none was written. Its seal is checked on the value as
   * stored, then an entry of an earlier version is brought up to this one (`parseJournalEntry`).
   * Whatever else is under its key (anyone who may read a stream can have the server write a stored
   * message over any key), and an entry of a version this build does not read, is taken as a start
   * whose outcome is unknown: the call is then not run again, rather than run twice.
   */
  async get(runId: string, agentId: string, callId: string): Promise<JournalEntry | undefined> {
    const entry = await this.kv.get(journalKey(runId, agentId, callId));
    if (!entry) return undefined;
    const value = this.seal ? this.seal.openAsWritten(entry.value) : entry.value;
    return parseJournalEntry(value) ?? { status: "started", name: "?", effect: "execute" };
  }

  async started(
    runId: string,
    agentId: string,
    callId: string,
    name: string,
    effect: ToolEffect,
  ): Promise<void> {
    await this.#put(journalKey(runId, agentId, callId), {
      v: JOURNAL_ENTRY_VERSION,
      status: "started",
      name,
      effect,
    });
  }

  async finished(
    runId: string,
    agentId: string,
    callId: string,
    name: string,
    effect: ToolEffect,
    outcome: JournaledOutcome,
  ): Promise<void> {
    await this.#put(journalKey(runId, agentId, callId), {
      v: JOURNAL_ENTRY_VERSION,
      status: "finished",
      name,
      effect,
      outcome,
    });
  }

  async #put(key: string, entry: StoredJournalEntry): Promise<void> {
    await this.kv.put(key, this.seal ? this.seal.sealAsWritten(entry) : entry);
  }
}

/** What writes or executes, and whatever leaves the process (an MCP call): at most once, so journaled. */
function isJournaled(call: { effect: ToolEffect; remote?: boolean }): boolean {
  return call.effect !== "read" || call.remote === true;
}

/** Call ids come from model servers: as one key token each, one to one (as approvals have them). */
function journalKey(runId: string, agentId: string, callId: string): string {
  return `${runId}.${agentId}.${callKey(callId)}`;
}
