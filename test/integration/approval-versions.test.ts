import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { listApprovals, readApproval } from "../../src/approvals/answer-approval.js";
import { APPROVAL_RECORD_VERSION } from "../../src/approvals/approval-migrations.js";
import { type ApprovalRecord, approvalOf } from "../../src/approvals/approval-record.js";
import { BusApprover } from "../../src/approvals/bus-approver.js";
import { silentLogger } from "../../src/log.js";
import { ApproverTrust } from "../../src/trust/approvers.js";
import { versionOf } from "../../src/util/record-versions.js";
import { answerRef, newIdentity, trusting } from "../support/approvers.js";
import { type BusUnderTest, natsBus } from "../support/buses.js";

/*
 * Every earlier version of an approval record, as a host wrote it in the bucket `approvals`
 * (test/fixtures/approvals/, with the public keys of who answered): each is read as an approver
 * reads it and decided by a host that finds it again, as after a restart and an upgrade.
 */
const FIXTURES = join(import.meta.dirname, "../fixtures/approvals");
const fixtures = readdirSync(FIXTURES).filter((file) => file.endsWith(".json"));

interface StoredApproval {
  key: string;
  value: Omit<ApprovalRecord, "v"> & { v?: number };
  approvers: Record<string, string>;
}
const stored = (file: string): StoredApproval => JSON.parse(readFileSync(join(FIXTURES, file), "utf8"));

let under: BusUnderTest;
beforeEach(async () => {
  under = await natsBus();
});
afterEach(async () => {
  vi.useRealTimers();
  await under.dispose();
});

/** Puts the fixture back, and the clock at `at` of it; gives its request and what the bucket holds under its key. */
async function putBack(file: string, at: (record: StoredApproval["value"]) => number) {
  const { key, value, approvers } = stored(file);
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(at(value));
  const kv = await under.bus.kv("approvals");
  await kv.put(key, value);
  const now = async () => approvalOf((await kv.get(key))?.value);
  return { value, approvers, request: value.request, now };
}

describe("approval records of earlier versions", () => {
  it("has a fixture of every version before the one this build writes, and of one without v", () => {
    const values = fixtures.map((file) => stored(file).value);
    for (let v = 1; v < APPROVAL_RECORD_VERSION; v++)
      expect(values.map(versionOf), `a record of v${v}`).toContain(v);
    expect(values.some((value) => value.v === undefined)).toBe(true);
  });

  it("a pending one is shown to approvers, answered, and decided by its host as its own request", async () => {
    const { value, request, now } = await putBack("v1-pending.json", (record) => record.createdAt + 60_000);
    const shown = await readApproval(under.bus, request);
    expect(shown).toMatchObject({
      v: APPROVAL_RECORD_VERSION,
      requestId: value.requestId,
      status: "pending",
    });
    expect((await listApprovals(under.bus, request.runId)).map((r) => r.requestId)).toEqual([
      value.requestId,
    ]);

    const bob = newIdentity("bob");
    const deciding = new BusApprover(under.bus, 60_000, trusting(bob), silentLogger).decide(
      request,
      new AbortController().signal,
    );
    expect((await answerRef(under.bus, bob, request, { approved: true })).outcome).toBe("decided");
    expect(await deciding).toEqual({ approved: true, by: "bob" });
    expect(await now()).toMatchObject({
      v: APPROVAL_RECORD_VERSION,
      requestId: value.requestId,
      status: "approved",
      by: "bob",
    });
  });

  it("a pending one past its deadline is denied by timeout, as its host's own", async () => {
    const { value, request, now } = await putBack("v1-pending.json", (record) => record.expiresAt + 1000);
    const answer = await new BusApprover(under.bus, 60_000, trusting(), silentLogger).decide(
      request,
      new AbortController().signal,
    );
    expect(answer).toMatchObject({ approved: false, by: "timeout" });
    expect(await now()).toMatchObject({
      v: APPROVAL_RECORD_VERSION,
      requestId: value.requestId,
      status: "denied",
      by: "timeout",
    });
  });

  it("an approved one is taken by its host on its signed answer, without asking again", async () => {
    const { value, approvers, request } = await putBack(
      "v1-approved.json",
      (record) => record.createdAt + 60_000,
    );
    const trust = new ApproverTrust(approvers, undefined);
    const answer = await new BusApprover(under.bus, 60_000, trust, silentLogger).decide(
      request,
      new AbortController().signal,
    );
    expect(answer).toEqual({ approved: true, by: value.by, reason: value.reason });
  });

  it("a record of a version this build does not read is none: approvers are not shown it, and its host asks again", async () => {
    const { value, request, now } = await putBack("v1-pending.json", (record) => record.createdAt + 60_000);
    const kv = await under.bus.kv("approvals");
    const { key } = stored("v1-pending.json");
    await kv.put(key, { ...value, v: 99 });
    expect(await readApproval(under.bus, request)).toBeUndefined();
    const waiting = new AbortController();
    const deciding = new BusApprover(under.bus, 60_000, trusting(), silentLogger)
      .decide(request, waiting.signal)
      .catch(() => undefined);
    await vi.waitFor(async () => expect((await now())?.requestId).toBeDefined(), { timeout: 5000 });
    expect((await now())?.requestId).not.toBe(value.requestId);
    waiting.abort();
    await deciding;
  });
});
