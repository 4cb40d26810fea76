import { type Bus, KvConflictError, type KvStore } from "../bus/bus.js";
import type { Logger } from "../log.js";
import type { ApprovalAnswer, ApprovalRequest, Approver } from "./approver.js";

/** An approval as the KV bucket `approvals` keeps it, under `<runId>.<callId>`. */
export interface ApprovalRecord {
  request: ApprovalRequest;
  status: "pending" | "approved" | "denied";
  /** When nobody has answered by then, the request is denied. */
  expiresAt: number;
  reason?: string;
  by?: string;
}

export const approvalKey = (runId: string, callId: string) =>
  `${runId}.${callId.replace(/[^-/_=A-Za-z0-9]/g, "_")}`;

/**
 * Approvals as records on the bus, not prompts owned by one process: any authorised client (an
 * observer, `troupe approve`, the run's own terminal) may answer; the first answer wins by
 * compare-and-set; with none before the timeout, the request is denied. A pending request survives a
 * restart: an agent resumed while waiting finds its record and goes on waiting.
 */
export class BusApprover implements Approver {
  constructor(
    private readonly bus: Bus,
    private readonly timeoutMs: number,
    private readonly log: Logger,
  ) {}

  async decide(request: ApprovalRequest, signal: AbortSignal): Promise<ApprovalAnswer> {
    const kv = await this.bus.kv("approvals");
    const key = approvalKey(request.runId, request.callId);
    let entry = await kv.get<ApprovalRecord>(key);
    if (!entry) {
      const record: ApprovalRecord = { request, status: "pending", expiresAt: Date.now() + this.timeoutMs };
      try {
        await kv.create(key, record);
        this.log.info(
          { callId: request.callId, tool: request.tool },
          "waiting for an approval from any terminal",
        );
      } catch (error) {
        if (!(error instanceof KvConflictError)) throw error;
      }
      entry = await kv.get<ApprovalRecord>(key);
    }
    if (!entry) throw new Error(`approval ${key} vanished`);
    if (entry.value.status !== "pending") return answerOf(entry.value);
    return this.#await(kv, key, entry.value.expiresAt, signal);
  }

  async #await(kv: KvStore, key: string, expiresAt: number, signal: AbortSignal): Promise<ApprovalAnswer> {
    const watching = new AbortController();
    const stop = () => watching.abort();
    signal.addEventListener("abort", stop, { once: true });
    const timer = setTimeout(() => void expire(kv, key).finally(stop), Math.max(0, expiresAt - Date.now()));
    try {
      for await (const change of kv.watch<ApprovalRecord>({ key, signal: watching.signal })) {
        if (change.value && change.value.status !== "pending") return answerOf(change.value);
      }
      // Stopped watching: aborted, or expired (the record says which).
      const final = (await kv.get<ApprovalRecord>(key))?.value;
      if (final && final.status !== "pending") return answerOf(final);
      throw signal.reason ?? new Error("approval wait aborted");
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", stop);
    }
  }
}

/** Denies a pending request that nobody answered in time (unless an answer got there first). */
async function expire(kv: KvStore, key: string): Promise<void> {
  const entry = await kv.get<ApprovalRecord>(key);
  if (entry?.value.status !== "pending") return;
  try {
    await kv.put(
      key,
      { ...entry.value, status: "denied", reason: "nobody answered in time", by: "timeout" },
      { expectedRevision: entry.revision },
    );
  } catch (error) {
    if (!(error instanceof KvConflictError)) throw error;
  }
}

function answerOf(record: ApprovalRecord): ApprovalAnswer {
  return {
    approved: record.status === "approved",
    by: record.by ?? "unknown",
    ...(record.reason ? { reason: record.reason } : {}),
  };
}

export type DecisionOutcome = "decided" | "already-decided" | "unknown";

/**
 * Answers a pending approval; the first answer wins. Returns `already-decided` (with the record) when
 * another answer got there first, `unknown` when there is no such request.
 */
export async function answerApproval(
  bus: Bus,
  runId: string,
  callId: string,
  answer: { approved: boolean; reason?: string; by: string },
): Promise<{ outcome: DecisionOutcome; record?: ApprovalRecord }> {
  const kv = await bus.kv("approvals");
  const key = approvalKey(runId, callId);
  for (;;) {
    const entry = await kv.get<ApprovalRecord>(key);
    if (!entry) return { outcome: "unknown" };
    if (entry.value.status !== "pending") return { outcome: "already-decided", record: entry.value };
    const record: ApprovalRecord = {
      ...entry.value,
      status: answer.approved ? "approved" : "denied",
      by: answer.by,
      ...(answer.reason ? { reason: answer.reason } : {}),
    };
    try {
      await kv.put(key, record, { expectedRevision: entry.revision });
      return { outcome: "decided", record };
    } catch (error) {
      if (!(error instanceof KvConflictError)) throw error;
    }
  }
}

/** Finds the pending approval of a call id in any run (for `troupe approve CALL_ID`). */
export async function findApproval(bus: Bus, callId: string): Promise<ApprovalRecord | undefined> {
  const kv = await bus.kv("approvals");
  const suffix = `.${callId.replace(/[^-/_=A-Za-z0-9]/g, "_")}`;
  for (const key of await kv.keys()) {
    if (!key.endsWith(suffix)) continue;
    const entry = await kv.get<ApprovalRecord>(key);
    if (entry) return entry.value;
  }
  return undefined;
}
