import { randomBytes } from "node:crypto";
import { type Bus, KvConflictError, type KvEntry, type KvStore } from "../bus/bus.js";
import type { Logger } from "../log.js";
import type { ApproverTrust } from "../trust/approvers.js";
import { requestDigest, type SignedAnswer, verifyAnswer } from "../trust/signed-answer.js";
import { SaidAtMost } from "../util/said-at-most.js";
import { APPROVAL_RECORD_VERSION } from "./approval-migrations.js";
import { type ApprovalRecord, answerPlace, approvalKey, approvalOf, readRecord } from "./approval-record.js";
import type { ApprovalAnswer, ApprovalRequest, Approver, RejectedAnswer } from "./approver.js";

const MAX_REJECTIONS = 20;

/**
 * Approvals as records on the bus, not prompts owned by one process: any approver (an observer,
 * `troupe approve`, the run's own terminal) may answer by writing a signed answer; the host acts
 * on the first one whose signature is a trusted approver's and that names this very request, and
 * records it by compare-and-set. Anything else is refused and reported, and the request stays
 * pending. With no valid answer before the timeout, the request is denied. A pending request
 * survives a restart: an agent resumed while waiting finds its record and goes on waiting.
 */
export class BusApprover implements Approver {
  /** The records of each agent (`<runId>.<agentId>`) this host asked and that may still be open. */
  readonly #asked = new Map<string, Set<string>>();

  constructor(
    private readonly bus: Bus,
    private readonly timeoutMs: number,
    private readonly trust: ApproverTrust,
    private readonly log: Logger,
  ) {}

  async decide(
    request: ApprovalRequest,
    signal: AbortSignal,
    rejected: (refusal: RejectedAnswer) => void = () => {},
  ): Promise<ApprovalAnswer> {
    const kv = await this.bus.kv("approvals");
    const key = approvalKey(request);
    const agent = `${request.runId}.${request.agentId}`;
    const asked = this.#asked.get(agent) ?? new Set();
    this.#asked.set(agent, asked.add(key));
    const entry = await this.#open(kv, key, request);
    // What this host wrote is what answers are checked against, never what the bucket says later:
    // whoever may read a stream can have the server write a stored message over any key.
    const own = entry.value;
    const answer =
      (await this.#settled(kv, entry, own, rejected)) ?? (await this.#await(kv, key, own, signal, rejected));
    asked.delete(key);
    return answer;
  }

  /** Closes what the agent asked here that nobody answered; an aborted wait leaves its record pending. */
  async close(agent: { runId: string; agentId: string }, why: string): Promise<void> {
    const name = `${agent.runId}.${agent.agentId}`;
    const asked = this.#asked.get(name);
    this.#asked.delete(name);
    if (!asked?.size) return;
    const kv = await this.bus.kv("approvals");
    for (const key of asked) {
      const entry = await readRecord(kv, key);
      if (entry?.value?.status !== "pending" || !isRecordOf(entry.value, entry.value.request)) continue;
      await kv
        .put(key, { ...entry.value, status: "closed", reason: why }, { expectedRevision: entry.revision })
        .catch((error) => (error instanceof KvConflictError ? undefined : Promise.reject(error)));
      this.log.info({ key, why }, "closed an approval nobody answered");
    }
  }

  /**
   * The record under `key` when it is still this host's own request (decided or not); otherwise
   * (gone, or replaced by something else) this host's record is put back, and undefined returned.
   */
  async #ours(kv: KvStore, key: string, own: ApprovalRecord): Promise<KvEntry<ApprovalRecord> | undefined> {
    const entry = await readRecord(kv, key);
    if (entry?.value && isOwn(entry.value, own)) return { ...entry, value: entry.value };
    this.log.warn({ key }, "an approval record was replaced by one this host did not write: put back");
    const { status: _s, by: _b, reason: _r, answer: _a, rejected: _j, ...request } = own;
    await kv
      .put(key, { ...request, status: "pending" }, { expectedRevision: entry?.revision ?? 0 })
      .catch((error) => (error instanceof KvConflictError ? undefined : Promise.reject(error)));
    return undefined;
  }

  /** The record of this request: the one already there (a resumed wait), or a new one. */
  async #open(kv: KvStore, key: string, request: ApprovalRequest): Promise<KvEntry<ApprovalRecord>> {
    for (;;) {
      const entry = await readRecord(kv, key);
      if (entry?.value && isRecordOf(entry.value, request)) return { ...entry, value: entry.value };
      // A call id the model used before, for another call, is another request.
      const record = newRecord(request, this.timeoutMs);
      try {
        await kv.put(key, record, { expectedRevision: entry?.revision ?? 0 });
        this.log.info(
          { callId: request.callId, tool: request.tool },
          "waiting for an approval from any terminal",
        );
      } catch (error) {
        if (!(error instanceof KvConflictError)) throw error;
      }
    }
  }

  /** The answer of a decided record, checked again (it may have been decided before a restart). */
  async #settled(
    kv: KvStore,
    entry: KvEntry<ApprovalRecord>,
    own: ApprovalRecord,
    rejected: (refusal: RejectedAnswer) => void,
  ): Promise<ApprovalAnswer | undefined> {
    const record = entry.value;
    if (!isOwn(record, own)) {
      await this.#ours(kv, entry.key, own);
      return undefined;
    }
    if (record.status === "pending") return undefined;
    if (!record.answer) {
      // Unsigned, only a timeout denies, and only once this host's own deadline has passed; what
      // it says is this host's, never the record's (the reason reaches the model).
      if (record.status === "denied" && record.by === "timeout" && Date.now() >= own.expiresAt)
        return TIMED_OUT;
    } else {
      // What the answer says, not what the record says beside it.
      const verdict = verifyAnswer(record.answer, factsOf(own), this.trust);
      if (verdict.ok && (verdict.answer.content.decision === "allow") === (record.status === "approved"))
        return answerOfVerified(verdict.answer, verdict.by);
    }
    // Decided without a valid answer: not by this code. Refuse it and wait on.
    const refusal = { why: "the record was decided without a valid signed answer", ...byOf(record) };
    this.log.warn({ key: entry.key, ...refusal }, "refused an approval decision");
    rejected(refusal);
    const { status: _s, by: _b, reason: _r, answer: _a, ...rest } = record;
    await kv
      .put(entry.key, { ...rest, status: "pending" }, { expectedRevision: entry.revision })
      .catch(() => {});
    return undefined;
  }

  async #await(
    kv: KvStore,
    key: string,
    own: ApprovalRecord,
    signal: AbortSignal,
    rejected: (refusal: RejectedAnswer) => void,
  ): Promise<ApprovalAnswer> {
    const answers = await this.bus.kv("answers");
    const watching = new AbortController();
    const stop = () => watching.abort();
    signal.addEventListener("abort", stop, { once: true });
    let timedOut = false;
    const refusals: Refusals = { told: rejected, said: new SaidAtMost() };
    // Set while this host writes its own decision: any other record of this request that is not
    // pending was decided by something else (a copy written over the key), and is refused.
    let deciding = false;
    const expire = async () => {
      const entry = await this.#ours(kv, key, own);
      if (entry?.value.status !== "pending") return;
      const denied = { ...entry.value, status: "denied", reason: TIMED_OUT.reason, by: "timeout" };
      deciding = true;
      await kv.put(key, denied, { expectedRevision: entry.revision });
      timedOut = true;
    };
    const timer = setTimeout(
      () =>
        void expire()
          .catch((error) =>
            this.log.warn({ key, err: (error as Error).message }, "could not deny by timeout"),
          )
          .finally(stop),
      Math.max(0, own.expiresAt - Date.now()),
    );
    // Anything written over the record while it waits is put back at once, not when an answer comes:
    // another record, or this one decided (or closed) by anything but this host.
    void (async () => {
      for await (const change of kv.watch({ key, signal: watching.signal })) {
        const record = approvalOf(change.value);
        if (!record || !isOwn(record, own)) await this.#ours(kv, key, own);
        else if (record.status !== "pending" && !deciding)
          await this.#settled(kv, { key, value: record, revision: change.revision }, own, rejected);
      }
    })().catch(() => {});
    try {
      // Every answer of the run is looked at, so one under a key of another shape is refused visibly.
      for await (const change of answers.watch({ key: `${own.request.runId}.>`, signal: watching.signal })) {
        if (change.value === null) continue;
        const place = answerPlace(change.key, change.value, key, own.requestId);
        if (place === "elsewhere") continue;
        if (place !== "here") {
          const answerId = change.key.slice(change.key.lastIndexOf(".") + 1);
          await this.#refuse(kv, key, own, { answerId, why: place.misplaced }, refusals);
          continue;
        }
        const answer = await this.#consider(kv, key, own, change.key, change.value, refusals, (on) => {
          deciding = on;
        });
        if (answer) return answer;
      }
      // Stopped watching: aborted, or expired (this host's own timer says which).
      if (timedOut) return TIMED_OUT;
      const final = await this.#ours(kv, key, own);
      if (final && final.value.status !== "pending") {
        const settled = await this.#settled(kv, final, own, rejected);
        if (settled) return settled;
      }
      throw signal.reason ?? new Error("approval wait aborted");
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", stop);
      watching.abort();
    }
  }

  /**
   * An answer refused: said (a warning, an `approval.rejected` event, its line in the record's list),
   * the first 20 of a wait each, then one a second with how many more were refused since; one refused before this wait was resumed is not news. A flood of junk answers
   * costs a count each.
   */
  async #refuse(kv: KvStore, key: string, own: ApprovalRecord, refusal: RejectedAnswer, refusals: Refusals) {
    const more = refusals.said.take();
    if (more === undefined) return;
    const said =
      more > 0 ? { ...refusal, why: `${refusal.why} (and ${more} more refused before it)` } : refusal;
    let told = false;
    for (;;) {
      const entry = await this.#ours(kv, key, own);
      if (entry?.value.status !== "pending") return;
      if (entry.value.rejected?.some((r) => r.answerId === refusal.answerId)) return;
      if (!told) {
        told = true;
        this.log.warn({ key, ...said }, "refused an answer to an approval");
        refusals.told(said);
      }
      const list = [...(entry.value.rejected ?? []), said].slice(-MAX_REJECTIONS);
      const written = await kv
        .put(key, { ...entry.value, rejected: list }, { expectedRevision: entry.revision })
        .then(() => true)
        .catch((error) => (error instanceof KvConflictError ? false : Promise.reject(error)));
      if (written) return;
    }
  }

  /** One answer: refused with a reason, or written into the record unless another got there first. */
  async #consider(
    kv: KvStore,
    key: string,
    own: ApprovalRecord,
    answerKey: string,
    value: unknown,
    refusals: Refusals,
    /** Told when this host writes its decision (and when that write lost to another). */
    deciding: (on: boolean) => void,
  ): Promise<ApprovalAnswer | undefined> {
    const answerId = answerKey.slice(answerKey.lastIndexOf(".") + 1);
    // Checked before anything is read or written: a flood of junk answers costs a check each.
    const verdict = verifyAnswer(value, factsOf(own), this.trust);
    if (!verdict.ok) {
      const refusal = { answerId, why: verdict.why, ...(verdict.claimedBy ? { by: verdict.claimedBy } : {}) };
      await this.#refuse(kv, key, own, refusal, refusals);
      return undefined;
    }
    for (;;) {
      const entry = await this.#ours(kv, key, own);
      if (!entry) continue;
      if (entry.value.status !== "pending") {
        const settled = await this.#settled(kv, entry, own, refusals.told);
        if (settled) return settled;
        continue;
      }
      const { content } = verdict.answer;
      const record: ApprovalRecord = {
        ...entry.value,
        status: content.decision === "allow" ? "approved" : "denied",
        by: verdict.by,
        answer: verdict.answer,
        ...(content.reason ? { reason: content.reason } : {}),
      };
      try {
        deciding(true);
        await kv.put(key, record, { expectedRevision: entry.revision });
        return answerOfVerified(verdict.answer, verdict.by);
      } catch (error) {
        deciding(false);
        if (!(error instanceof KvConflictError)) throw error;
      }
    }
  }
}

function newRecord(request: ApprovalRequest, timeoutMs: number): ApprovalRecord {
  const nonce = randomBytes(16).toString("base64url");
  const createdAt = Date.now();
  return {
    v: APPROVAL_RECORD_VERSION,
    request,
    requestId: requestDigest({ ...request, nonce, createdAt }),
    nonce,
    createdAt,
    status: "pending",
    expiresAt: createdAt + timeoutMs,
  };
}

/** Whether a stored record is of this very request: the same facts, and its digest theirs. */
function isRecordOf(record: ApprovalRecord, request: ApprovalRequest): boolean {
  if (typeof record !== "object" || record === null) return false;
  return record.requestId === requestDigest({ ...request, nonce: record.nonce, createdAt: record.createdAt });
}

/** Whether a stored record is the one this host wrote for its request (whatever it has been decided). */
function isOwn(record: ApprovalRecord, own: ApprovalRecord): boolean {
  return isRecordOf(record, own.request) && record.requestId === own.requestId;
}

function answerOfVerified(answer: SignedAnswer, by: string): ApprovalAnswer {
  const { decision, reason } = answer.content;
  return { approved: decision === "allow", by, ...(reason ? { reason } : {}) };
}

/** What a wait has said of refused answers: the first 20 each, then one a second. */
interface Refusals {
  told: (refusal: RejectedAnswer) => void;
  said: SaidAtMost;
}

/** A request nobody answered before this host's deadline. */
const TIMED_OUT: ApprovalAnswer = { approved: false, by: "timeout", reason: "nobody answered in time" };

/** What an answer to this record must name. */
function factsOf(record: ApprovalRecord) {
  const { runId, callId } = record.request;
  return { runId, callId, requestId: record.requestId, createdAt: record.createdAt };
}

function byOf(record: ApprovalRecord): { by?: string } {
  return record.by ? { by: record.by } : {};
}
