import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { findApproval } from "../../src/approvals/answer-approval.js";
import { type ApprovalRecord, answerKey, approvalKey } from "../../src/approvals/approval-record.js";
import type { ApprovalRequest, RejectedAnswer } from "../../src/approvals/approver.js";
import { BusApprover } from "../../src/approvals/bus-approver.js";
import type { Bus, KvStore } from "../../src/bus/bus.js";
import { silentLogger } from "../../src/log.js";
import { signAnswer } from "../../src/trust/signed-answer.js";
import { answerRef, newIdentity, trusting } from "../support/approvers.js";
import { type BusUnderTest, localBus, natsBus } from "../support/buses.js";
import { waitFor } from "../support/wait.js";

const alice = newIdentity("alice");
const bob = newIdentity("bob");
const mallory = newIdentity("mallory");
const trust = trusting(alice, bob);

const request = (callId: string, command = "make deploy"): ApprovalRequest => ({
  runId: "run-1",
  agentId: "coder",
  callId,
  tool: "shell",
  arguments: JSON.stringify({ command }),
  effect: "execute",
  detail: command,
  paths: [],
});

const pendingRecord = async (under: BusUnderTest, callId: string) => {
  await waitFor("the pending record", async () => (await findApproval(under.bus, callId)) !== undefined);
  return (await findApproval(under.bus, callId)) as ApprovalRecord;
};

describe.each([
  ["NATS", natsBus],
  ["local", async () => localBus()],
])("approvals on the %s bus", (_name, makeBus) => {
  let under: BusUnderTest;
  beforeEach(async () => {
    under = await makeBus();
  });
  afterEach(async () => {
    await under.dispose();
  });

  it("wait for the first signed answer from anywhere; a later answer is told it came too late", async () => {
    const waiting = new BusApprover(under.bus, 10_000, trust, silentLogger).decide(
      request("c1"),
      new AbortController().signal,
    );
    expect((await pendingRecord(under, "c1")).status).toBe("pending");
    const first = await answerRef(
      under.bus,
      alice,
      { runId: "run-1", agentId: "coder", callId: "c1" },
      {
        approved: false,
        reason: "not on a Friday",
        via: "test",
      },
    );
    const second = await answerRef(
      under.bus,
      bob,
      { runId: "run-1", agentId: "coder", callId: "c1" },
      { approved: true },
    );
    expect(await waiting).toEqual({ approved: false, reason: "not on a Friday", by: "alice (test)" });
    expect(first.outcome).toBe("decided");
    expect(second).toMatchObject({
      outcome: "already-decided",
      record: { status: "denied", by: "alice (test)" },
    });
    expect(
      await answerRef(
        under.bus,
        alice,
        { runId: "run-1", agentId: "coder", callId: "nope" },
        { approved: true },
      ),
    ).toEqual({
      outcome: "unknown",
    });
  });

  it("deny a request nobody answers before the timeout", async () => {
    const started = Date.now();
    const approver = new BusApprover(under.bus, 300, trust, silentLogger);
    expect(await approver.decide(request("c2"), new AbortController().signal)).toEqual({
      approved: false,
      reason: "nobody answered in time",
      by: "timeout",
    });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("keep a pending request across a restart: a new waiter finds it and gets the answer", async () => {
    const before = new AbortController();
    const abandoned = new BusApprover(under.bus, 60_000, trust, silentLogger)
      .decide(request("c3"), before.signal)
      .catch((error) => error);
    const record = await pendingRecord(under, "c3");
    before.abort();
    await abandoned;
    // The resumed agent asks again: the same record, still pending, not a new one.
    const again = new BusApprover(under.bus, 60_000, trust, silentLogger).decide(
      request("c3"),
      new AbortController().signal,
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await findApproval(under.bus, "c3")).toMatchObject({
      status: "pending",
      requestId: record.requestId,
    });
    await answerRef(under.bus, bob, { runId: "run-1", agentId: "coder", callId: "c3" }, { approved: true });
    expect(await again).toEqual({ approved: true, by: "bob" });
  });

  it("refuse forged answers, keep the request pending, and act on the next valid one", async () => {
    // An old valid answer, for an earlier request that used the same call id.
    const earlier = new BusApprover(under.bus, 60_000, trust, silentLogger).decide(
      request("c4", "ls"),
      new AbortController().signal,
    );
    await pendingRecord(under, "c4");
    await answerRef(under.bus, alice, { runId: "run-1", agentId: "coder", callId: "c4" }, { approved: true });
    await earlier;
    const oldAnswer = (await findApproval(under.bus, "c4"))?.answer;
    expect(oldAnswer).toBeDefined();

    const refused: RejectedAnswer[] = [];
    const waiting = new BusApprover(under.bus, 60_000, trust, silentLogger).decide(
      request("c4", "rm -rf build"),
      new AbortController().signal,
      (refusal) => void refused.push(refusal),
    );
    await waitFor("the new request", async () => (await findApproval(under.bus, "c4"))?.status === "pending");
    const record = (await findApproval(under.bus, "c4")) as ApprovalRecord;
    expect(record.requestId).not.toBe(oldAnswer?.content.requestId);
    const answers = await under.bus.kv("answers");
    const key = approvalKey({ runId: "run-1", agentId: "coder", callId: "c4" });
    const forged = signAnswer(alice, {
      runId: "run-1",
      callId: "c4",
      requestId: record.requestId,
      approved: true,
    });
    const attempts: Array<[string, unknown]> = [
      ["unsigned", { approved: true, by: "alice (troupe approve)" }],
      ["bad signature", { ...forged, content: { ...forged.content, reason: "changed after signing" } }],
      [
        "unknown key",
        signAnswer(mallory, { runId: "run-1", callId: "c4", requestId: record.requestId, approved: true }),
      ],
      [
        "another call",
        signAnswer(alice, { runId: "run-1", callId: "c5", requestId: record.requestId, approved: true }),
      ],
      ["replay", oldAnswer],
      [
        "a name not its key's",
        signAnswer(
          { ...bob, name: "alice" },
          { runId: "run-1", callId: "c4", requestId: record.requestId, approved: true },
        ),
      ],
    ];
    for (const [id, answer] of attempts)
      await answers.create(answerKey(key, record.requestId, id.replace(/[^a-z]/g, "-")), answer);
    await waitFor("every forged answer refused", () => refused.length === attempts.length);
    expect(refused.map((r) => r.why)).toEqual([
      "not a signed answer",
      "bad signature",
      expect.stringMatching(/not a trusted approver's/),
      "signed for another call",
      "signed for another request (an old answer?)",
      "signed as alice with bob's key",
    ]);
    expect(await findApproval(under.bus, "c4")).toMatchObject({ status: "pending" });
    const settled = await Promise.race([
      waiting.then(() => "decided"),
      new Promise((r) => setTimeout(r, 200, "pending")),
    ]);
    expect(settled).toBe("pending");

    const valid = await answerRef(
      under.bus,
      bob,
      { runId: "run-1", agentId: "coder", callId: "c4" },
      {
        approved: true,
        via: "troupe approve",
      },
    );
    expect(valid.outcome).toBe("decided");
    expect(await waiting).toEqual({ approved: true, by: "bob (troupe approve)" });
  });

  it("refuse, visibly, an answer of the run under a key of another shape or another request's digest", async () => {
    const refused: RejectedAnswer[] = [];
    const waiting = new BusApprover(under.bus, 60_000, trust, silentLogger).decide(
      request("c9"),
      new AbortController().signal,
      (refusal) => void refused.push(refusal),
    );
    const record = await pendingRecord(under, "c9");
    const answers = await under.bus.kv("answers");
    const valid = signAnswer(alice, {
      runId: "run-1",
      callId: "c9",
      requestId: record.requestId,
      approved: true,
    });
    const misplaced = [
      `run-1.c9.${record.requestId}.a1`,
      `run-1.coder.c9.a2`,
      `run-1.coder.c9.someone-elses-digest.a3`,
    ];
    for (const key of misplaced) await answers.create(key, valid);
    // Another call's answer, and a key naming no call of this wait: not this wait's to speak of.
    await answers.create(`run-1.coder.c10.${record.requestId}.a4`, valid);
    await answers.create("run-1.junk.a5", valid);
    await waitFor("every misplaced answer refused", () => refused.length === misplaced.length);
    const expected = `run-1.coder.c9.${record.requestId}.<answerId>`;
    expect(refused).toEqual([
      { answerId: "a1", why: `under run-1.c9.${record.requestId}.a1: an answer goes under ${expected}` },
      { answerId: "a2", why: `under run-1.coder.c9.a2: an answer goes under ${expected}` },
      {
        answerId: "a3",
        why: `under run-1.coder.c9.someone-elses-digest.a3: this request's answers go under ${expected}`,
      },
    ]);
    expect((await findApproval(under.bus, "c9"))?.rejected).toHaveLength(misplaced.length);
    await answers.create(answerKey(approvalKey(record.request), record.requestId, "a6"), valid);
    expect(await waiting).toEqual({ approved: true, by: "alice" });
    expect(refused).toHaveLength(misplaced.length);
  });

  it("tell an answerer whose key is not trusted that the host refused it", async () => {
    const waiting = new BusApprover(under.bus, 60_000, trust, silentLogger).decide(
      request("c6"),
      new AbortController().signal,
    );
    await pendingRecord(under, "c6");
    const outcome = await answerRef(
      under.bus,
      mallory,
      { runId: "run-1", agentId: "coder", callId: "c6" },
      { approved: true },
    );
    expect(outcome).toMatchObject({ outcome: "rejected", why: expect.stringMatching(/not a trusted/) });
    expect((await findApproval(under.bus, "c6"))?.status).toBe("pending");
    await answerRef(
      under.bus,
      alice,
      { runId: "run-1", agentId: "coder", callId: "c6" },
      { approved: false },
    );
    expect(await waiting).toMatchObject({ approved: false, by: "alice" });
  });

  it("keep apart calls that share an id across agents, or whose ids differ only where a key can't", async () => {
    const approver = new BusApprover(under.bus, 60_000, trust, silentLogger);
    const calls = [
      { ...request("call.1"), agentId: "coder" },
      { ...request("call_1"), agentId: "coder" },
      { ...request("call_1"), agentId: "reviewer" },
    ];
    const waiting = calls.map((call) => approver.decide(call, new AbortController().signal));
    await waitFor("three records", async () => (await (await under.bus.kv("approvals")).keys()).length === 3);
    const answers = await Promise.all(
      calls.map((call, i) => answerRef(under.bus, alice, call, { approved: i !== 1, reason: `#${i}` })),
    );
    expect(answers.map((a) => a.outcome)).toEqual(["decided", "decided", "decided"]);
    expect(await Promise.all(waiting)).toEqual([
      { approved: true, by: "alice", reason: "#0" },
      { approved: false, by: "alice", reason: "#1" },
      { approved: true, by: "alice", reason: "#2" },
    ]);
  });

  it("let exactly one of an answer and the timeout win when they land together, and tell the answerer which", async () => {
    for (let round = 0; round < 3; round++) {
      const callId = `late${round}`;
      const { bus, released } = holdingApprovals(under.bus);
      const waiting = new BusApprover(bus, 400, trust, silentLogger).decide(
        request(callId),
        new AbortController().signal,
      );
      await pendingRecord(under, callId);
      // The host's write of the answer is held until its own timer has denied the request: both writes
      // race for the same record, and only one may land.
      const told = await answerRef(
        under.bus,
        alice,
        { runId: "run-1", agentId: "coder", callId },
        { approved: true },
      );
      expect(await released).toBe(true);
      expect(await waiting).toMatchObject({ approved: false, by: "timeout" });
      expect(told.outcome).toBe("already-decided");
      expect(await findApproval(under.bus, callId)).toMatchObject({ status: "denied", by: "timeout" });
    }
  });

  it("let exactly one of two valid answers at once win, every time", async () => {
    for (let round = 0; round < 10; round++) {
      const callId = `race${round}`;
      const waiting = new BusApprover(under.bus, 60_000, trust, silentLogger).decide(
        request(callId),
        new AbortController().signal,
      );
      await pendingRecord(under, callId);
      const [a, b] = await Promise.all([
        answerRef(under.bus, alice, { runId: "run-1", agentId: "coder", callId: callId }, { approved: true }),
        answerRef(under.bus, bob, { runId: "run-1", agentId: "coder", callId: callId }, { approved: false }),
      ]);
      const outcomes = [a.outcome, b.outcome].sort();
      expect(outcomes).toEqual(["already-decided", "decided"]);
      const winner =
        a.outcome === "decided" ? { approved: true, by: "alice" } : { approved: false, by: "bob" };
      expect(await waiting).toEqual(winner);
      expect((await findApproval(under.bus, callId))?.by).toBe(winner.by);
    }
  });
});

/**
 * The bus as a host sees it, but a write that approves a request waits until the record says it was
 * denied (by the host's timer) first; `released` says whether it came to that.
 */
function holdingApprovals(bus: Bus): { bus: Bus; released: Promise<boolean> } {
  let release: (held: boolean) => void = () => {};
  const released = new Promise<boolean>((resolve) => {
    release = resolve;
  });
  const held = async (): Promise<KvStore> => {
    const kv = await bus.kv("approvals");
    return {
      name: kv.name,
      get: (key) => kv.get(key),
      async put(key, value, options) {
        if ((value as ApprovalRecord).status === "approved") {
          await waitFor(
            "the timeout's denial",
            async () => (await kv.get<ApprovalRecord>(key))?.value.status === "denied",
          );
          release(true);
        }
        return kv.put(key, value, options);
      },
      create: (key, value) => kv.create(key, value),
      delete: (key, options) => kv.delete(key, options),
      keys: (pattern) => kv.keys(pattern),
      values: (pattern) => kv.values(pattern),
      forget: (pattern) => kv.forget(pattern),
      watch: (options) => kv.watch(options),
    };
  };
  const host = { kv: (name: string) => (name === "approvals" ? held() : bus.kv(name)) } as unknown as Bus;
  return { bus: host, released };
}
