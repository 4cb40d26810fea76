import { z } from "zod";
import type { Bus } from "../bus/bus.js";
import { UserError } from "../errors.js";
import { MAX_REASON } from "../limits.js";
import type { Identity } from "../trust/approvers.js";
import { requestDigest, signAnswer } from "../trust/signed-answer.js";
import {
  type ApprovalRecord,
  type ApprovalRef,
  answerKey,
  approvalKey,
  approvalOf,
} from "./approval-record.js";

/*
 * The approver's side of an approval: find the request its host wrote, show it, sign it. What a
 * person is shown is the record in the bucket `approvals` (only hosts write there), never an event:
 * an event is what some connection put on a subject, and the digest that gets signed is the
 * record's, worked out again here from what the record says.
 */

const recordSchema = z.object({
  request: z.object({
    runId: z.string(),
    agentId: z.string(),
    callId: z.string(),
    tool: z.string(),
    arguments: z.string(),
    effect: z.enum(["read", "write", "execute"]),
    detail: z.string(),
    paths: z.array(z.string()),
    escalation: z.string().optional(),
  }),
  requestId: z.string(),
  nonce: z.string(),
  createdAt: z.number(),
  status: z.enum(["pending", "approved", "denied", "closed"]),
});

/**
 * A stored value as an approval record of `ref`, when it is one, brought up to this version
 * (`approvalOf`): its shape, its place (the key it is under names its run, agent and call) and its
 * digest, which is of what it shows.
 */
export function genuineRecord(value: unknown, ref: ApprovalRef): ApprovalRecord | undefined {
  const record = approvalOf(value);
  const parsed = recordSchema.safeParse(record);
  if (!parsed.success) return undefined;
  const { request, nonce, createdAt, requestId } = parsed.data;
  if (request.runId !== ref.runId || request.agentId !== ref.agentId || request.callId !== ref.callId)
    return undefined;
  if (requestDigest({ ...request, nonce, createdAt }) !== requestId) return undefined;
  return record;
}

/** The request of one call as its host wrote it, or undefined (none, or not a genuine record). */
export async function readApproval(bus: Bus, ref: ApprovalRef): Promise<ApprovalRecord | undefined> {
  const entry = await (await bus.kv("approvals")).get(approvalKey(ref));
  return entry ? genuineRecord(entry.value, ref) : undefined;
}

/**
 * The pending request of one call, once its host has written it: an `approval.requested` event is
 * published just before the record is. Undefined when none comes within `timeoutMs`, or the
 * request is decided already.
 */
export async function awaitApproval(
  bus: Bus,
  ref: ApprovalRef,
  signal: AbortSignal,
  timeoutMs = 10_000,
): Promise<ApprovalRecord | undefined> {
  const kv = await bus.kv("approvals");
  const watching = AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]);
  for await (const change of kv.watch({ key: approvalKey(ref), signal: watching })) {
    const record = change.value === null ? undefined : genuineRecord(change.value, ref);
    if (record) return record.status === "pending" ? record : undefined;
  }
  return undefined;
}

/** Every genuine request (of one run, when `runId` is given), pending ones first, then oldest first. */
export async function listApprovals(bus: Bus, runId?: string): Promise<ApprovalRecord[]> {
  const kv = await bus.kv("approvals");
  const found: ApprovalRecord[] = [];
  for (const key of await kv.keys()) {
    if (runId !== undefined && !key.startsWith(`${runId}.`)) continue;
    const entry = await kv.get(key);
    const record = entry?.value as ApprovalRecord | undefined;
    const genuine = record?.request && genuineRecord(record, record.request);
    // Under the key its own run, agent and call make: a record copied elsewhere is not this one.
    if (genuine && approvalKey(genuine.request) === key) found.push(genuine);
  }
  const pendingFirst = (r: ApprovalRecord) => (r.status === "pending" ? 0 : 1);
  return found.sort((a, b) => pendingFirst(a) - pendingFirst(b) || a.createdAt - b.createdAt);
}

/** Every genuine request of a call id (in one run, when `runId` is given), pending ones first. */
export async function findApprovals(bus: Bus, callId: string, runId?: string): Promise<ApprovalRecord[]> {
  return (await listApprovals(bus, runId)).filter((record) => record.request.callId === callId);
}

/** The request of a call id, pending first: where a call id is known to be unique (a test, a script). */
export async function findApproval(bus: Bus, callId: string): Promise<ApprovalRecord | undefined> {
  return (await findApprovals(bus, callId))[0];
}

export type DecisionOutcome =
  | "decided"
  | "already-decided"
  | "closed"
  | "rejected"
  | "sent"
  | "changed"
  | "unknown";

/**
 * Answers the request a person was shown (`shown`, a genuine record) as `identity`: signs its
 * digest and writes the answer to the bucket `answers`, then waits (up to `waitMs`) for the host
 * to act on it. `decided`: this answer decided it; `already-decided`: another got there first (the
 * record says whose); `closed`: its run ended before anyone answered (nothing is written);
 * `rejected`: the host refused it (`why`); `sent`: no host has acted yet (it
 * will when it is back); `changed`: the call has been asked again, with a request not shown;
 * `unknown`: there is no such request any more.
 */
export async function answerApproval(
  bus: Bus,
  identity: Identity,
  shown: ApprovalRecord,
  answer: { approved: boolean; reason?: string; via?: string },
  waitMs = 10_000,
): Promise<{ outcome: DecisionOutcome; record?: ApprovalRecord; why?: string }> {
  if ((answer.reason?.length ?? 0) > MAX_REASON)
    throw new UserError(`a reason is at most ${MAX_REASON} characters; say it shorter`);
  const ref = shown.request;
  if (!genuineRecord(shown, ref)) return { outcome: "changed" };
  const key = approvalKey(ref);
  const kv = await bus.kv("approvals");
  const entry = await kv.get(key);
  const current = entry ? genuineRecord(entry.value, ref) : undefined;
  if (!current) return { outcome: "unknown" };
  if (current.requestId !== shown.requestId) return { outcome: "changed", record: current };
  if (current.status === "closed") return { outcome: "closed", record: current };
  if (current.status !== "pending") return { outcome: "already-decided", record: current };
  const { runId, callId } = ref;
  const signed = signAnswer(identity, { runId, callId, requestId: shown.requestId, ...answer });
  const answerId = signed.content.answerId;
  const changes = kv.watch({ key, signal: AbortSignal.timeout(waitMs) });
  await (await bus.kv("answers")).create(answerKey(key, shown.requestId, answerId), signed);
  for await (const change of changes) {
    if (change.value === null) return { outcome: "unknown" };
    const record = approvalOf(change.value);
    if (!record) continue;
    const refusal = record.rejected?.find((r) => r.answerId === answerId);
    if (refusal) return { outcome: "rejected", record, why: refusal.why };
    if (record.status === "pending") continue;
    if (record.status === "closed") return { outcome: "closed", record };
    const mine = record.answer?.content.answerId === answerId;
    return { outcome: mine ? "decided" : "already-decided", record };
  }
  return { outcome: "sent" };
}
