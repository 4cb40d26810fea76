import { createHash } from "node:crypto";
import { z } from "zod";
import { ulid } from "../util/ulid.js";
import { ApproverTrust, type Identity } from "./approvers.js";

/** Clocks of different hosts disagree a little; an answer may be this much older than its request. */
export const CLOCK_SKEW_MS = 60_000;

/** What an approver signs: the request it saw (by digest), the decision, who and when. */
export const answerContentSchema = z.strictObject({
  v: z.literal(1),
  answerId: z.string().min(1).max(64),
  runId: z.string().min(1),
  callId: z.string().min(1),
  /** The digest of the request record the approver was shown. */
  requestId: z.string().min(1),
  decision: z.enum(["allow", "deny"]),
  reason: z.string().max(4000).optional(),
  time: z.number().int(),
  name: z.string().min(1).max(64),
  publicKey: z.string().min(1).max(64),
  /** Where it was answered: `troupe approve`, `troupe observe`, `troupe run`. */
  via: z.string().max(64).optional(),
});
export type AnswerContent = z.infer<typeof answerContentSchema>;

export const signedAnswerSchema = z.strictObject({
  content: answerContentSchema,
  /** ed25519 over `canonicalAnswer(content)`, base64. */
  signature: z.string().min(1).max(200),
});
export type SignedAnswer = z.infer<typeof signedAnswerSchema>;

/** The fields of a request that its digest covers: a different command or diff is a different request. */
export interface RequestFacts {
  runId: string;
  agentId: string;
  callId: string;
  tool: string;
  arguments: string;
  effect: string;
  detail: string;
  paths: readonly string[];
  /** Why the call would leave the sandbox, when it would. */
  escalation?: string | undefined;
  /** Random, per request record: a request asked again is a new request. */
  nonce: string;
  createdAt: number;
}

export function requestDigest(facts: RequestFacts): string {
  const { runId, agentId, callId, tool, arguments: args, effect, detail, paths, nonce, createdAt } = facts;
  // Only a request that leaves the sandbox has the slot: the digests of the others are as they were.
  const escalation = facts.escalation === undefined ? [] : [{ escalation: facts.escalation }];
  const canonical = JSON.stringify([
    "troupe-approval-request/v1",
    runId,
    agentId,
    callId,
    tool,
    args,
    effect,
    detail,
    [...paths],
    nonce,
    createdAt,
    ...escalation,
  ]);
  return createHash("sha256").update(canonical).digest("base64url");
}

/** The bytes that are signed: fixed order, and a domain tag so the signature means nothing elsewhere. */
export function canonicalAnswer(content: AnswerContent): Uint8Array {
  const { v, answerId, runId, callId, requestId, decision, reason, time, name, publicKey, via } = content;
  return new TextEncoder().encode(
    JSON.stringify([
      "troupe-approval-answer/v1",
      v,
      answerId,
      runId,
      callId,
      requestId,
      decision,
      reason ?? null,
      time,
      name,
      publicKey,
      via ?? null,
    ]),
  );
}

export function signAnswer(
  identity: Identity,
  answer: {
    runId: string;
    callId: string;
    requestId: string;
    approved: boolean;
    reason?: string;
    via?: string;
  },
  now = Date.now(),
): SignedAnswer {
  const content: AnswerContent = {
    v: 1,
    answerId: ulid().toLowerCase(),
    runId: answer.runId,
    callId: answer.callId,
    requestId: answer.requestId,
    decision: answer.approved ? "allow" : "deny",
    ...(answer.reason ? { reason: answer.reason } : {}),
    time: now,
    name: identity.name,
    publicKey: identity.publicKey,
    ...(answer.via ? { via: answer.via } : {}),
  };
  return { content, signature: Buffer.from(identity.sign(canonicalAnswer(content))).toString("base64") };
}

export type Verdict =
  | { ok: true; answer: SignedAnswer; by: string }
  | { ok: false; why: string; claimedBy?: string };

/**
 * Checks an answer against the request it claims to answer: its shape, that it is for this run,
 * call and request (so an old answer replayed does not fit a new request), that it is not older
 * than the request, that the signature is the key's, and that the key is a trusted approver's
 * under the name it gives. `by` is then the verified name (and where it was answered).
 */
export function verifyAnswer(
  raw: unknown,
  request: { runId: string; callId: string; requestId: string; createdAt: number },
  trust: ApproverTrust,
  now = Date.now(),
): Verdict {
  const parsed = signedAnswerSchema.safeParse(raw);
  if (!parsed.success) return { ok: false, why: "not a signed answer" };
  const { content, signature } = parsed.data;
  const claimedBy = content.name;
  const refuse = (why: string): Verdict => ({ ok: false, why, claimedBy });
  if (content.runId !== request.runId || content.callId !== request.callId)
    return refuse("signed for another call");
  if (content.requestId !== request.requestId) return refuse("signed for another request (an old answer?)");
  if (content.time < request.createdAt - CLOCK_SKEW_MS) return refuse("older than the request");
  if (content.time > now + CLOCK_SKEW_MS) return refuse("dated in the future");
  if (!ApproverTrust.verify(content.publicKey, canonicalAnswer(content), Buffer.from(signature, "base64")))
    return refuse("bad signature");
  const trusted = trust.nameOf(content.publicKey);
  if (trusted === undefined)
    return refuse(`signed by a key that is not a trusted approver's (${content.publicKey})`);
  if (trusted !== content.name) return refuse(`signed as ${content.name} with ${trusted}'s key`);
  return { ok: true, answer: parsed.data, by: content.via ? `${trusted} (${content.via})` : trusted };
}
