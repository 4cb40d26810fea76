import type { KvEntry, KvStore } from "../bus/bus.js";
import { callKey } from "../bus/subjects.js";
import { type SignedAnswer, signedAnswerSchema } from "../trust/signed-answer.js";
import { migrateVersioned, type VersionedRecord } from "../util/record-versions.js";
import { APPROVAL_MIGRATIONS, APPROVAL_RECORD_VERSION } from "./approval-migrations.js";
import type { ApprovalRequest } from "./approver.js";

/*
 * What an approval is on the bus: its record in the bucket `approvals`, its key, and where the
 * answers to it lie in the bucket `answers`. BusApprover (bus-approver.ts) writes and waits on them;
 * the observer, the web console and `troupe approve` read them.
 */

/**
 * An approval as the KV bucket `approvals` keeps it, under `<runId>.<agentId>.<call key>`. Only the agent's
 * host writes it; answers are written by approvers to the bucket `answers`, signed, and the host
 * copies the first valid one in.
 */
export interface ApprovalRecord {
  /** The version of its shape (approval-migrations.ts). */
  v: typeof APPROVAL_RECORD_VERSION;
  request: ApprovalRequest;
  /** The digest an answer must name: of the request, a random nonce and when it was made. */
  requestId: string;
  nonce: string;
  createdAt: number;
  /** `closed`: its agent stopped before anyone answered (the run ended); no answer is taken. */
  status: "pending" | "approved" | "denied" | "closed";
  /** When nobody has answered by then, the request is denied. */
  expiresAt: number;
  reason?: string;
  /** The verified approver's name, or `timeout`. */
  by?: string;
  /** The signed answer that decided it; absent for a denial by timeout. */
  answer?: SignedAnswer;
  /** Answers the host refused, the last few. */
  rejected?: Array<{ answerId?: string; why: string; by?: string }>;
}

/** Which approval: a call of one agent of one run. */
export interface ApprovalRef {
  runId: string;
  agentId: string;
  callId: string;
}

/**
 * A stored value brought up to this version of an approval record (`APPROVAL_MIGRATIONS`), or
 * undefined when it is none this build reads (not an object, or of another version). Whether it is
 * a record of a given request is for the reader to check (its digest).
 */
export function approvalOf(value: unknown): ApprovalRecord | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const migrated = migrateVersioned(value as VersionedRecord, APPROVAL_RECORD_VERSION, APPROVAL_MIGRATIONS);
  return "refused" in migrated ? undefined : (migrated.record as unknown as ApprovalRecord);
}

/** The entry under `key`, its record brought up to this version (`approvalOf`). */
export async function readRecord(
  kv: KvStore,
  key: string,
): Promise<KvEntry<ApprovalRecord | undefined> | null> {
  const entry = await kv.get(key);
  return entry && { ...entry, value: approvalOf(entry.value) };
}

export const approvalKey = ({ runId, agentId, callId }: ApprovalRef) =>
  `${runId}.${agentId}.${callKey(callId)}`;

/**
 * Answers live in the bucket `answers` under `<approval key>.<requestId>.<answerId>`: each answer a
 * key of its own (nobody's answer can block another's), grouped by the request they answer.
 */
export const answerKey = (approval: string, requestId: string, answerId: string) =>
  `${approval}.${requestId}.${answerId}`;

/**
 * Where an answer of the run lies for the wait on `approval`: `here` under its own key; `misplaced`
 * when it is under this approval's key in another shape, or under another request's digest while
 * it does not say it answers that request, or of no answer's shape and naming this approval's
 * call; `elsewhere` (another request's answer, or nothing this wait has to say of) otherwise.
 */
export function answerPlace(
  key: string,
  value: unknown,
  approval: string,
  requestId: string,
): "here" | "elsewhere" | { misplaced: string } {
  const tokens = key.split(".");
  const expected = `${approval}.${requestId}.<answerId>`;
  if (key.startsWith(`${approval}.`)) {
    if (tokens.length !== ANSWER_KEY_TOKENS)
      return { misplaced: `under ${key}: an answer goes under ${expected}` };
    if (tokens[3] === requestId) return "here";
    // An answer to an earlier request of the same call, under its own key: not this wait's to refuse.
    const named = signedAnswerSchema.safeParse(value).data?.content.requestId;
    if (named === tokens[3]) return "elsewhere";
    return { misplaced: `under ${key}: this request's answers go under ${expected}` };
  }
  const callKey = approval.split(".")[2];
  if (tokens.length !== ANSWER_KEY_TOKENS && callKey !== undefined && tokens.includes(callKey))
    return { misplaced: `under ${key}: an answer goes under ${expected}` };
  return "elsewhere";
}

/** `<runId>.<agentId>.<call key>.<requestId>.<answerId>` */
const ANSWER_KEY_TOKENS = 5;
