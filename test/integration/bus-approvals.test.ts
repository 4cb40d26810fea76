import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/log.js";
import type { ApprovalRequest } from "../../src/safety/approver.js";
import { answerApproval, BusApprover, findApproval } from "../../src/safety/bus-approver.js";
import { type BusUnderTest, natsBus } from "../support/buses.js";
import { waitFor } from "../support/wait.js";

let under: BusUnderTest;
beforeEach(async () => {
  under = await natsBus();
});
afterEach(async () => {
  await under.dispose();
});

const request = (callId: string): ApprovalRequest => ({
  runId: "run-1",
  agentId: "coder",
  callId,
  tool: "shell",
  arguments: '{"command":"make deploy"}',
  effect: "execute",
  detail: "make deploy",
  paths: [],
});

describe("approvals on the bus", () => {
  it("wait for the first answer from anywhere; a later answer is told it came too late", async () => {
    const approver = new BusApprover(under.bus, 10_000, silentLogger);
    const waiting = approver.decide(request("c1"), new AbortController().signal);
    await waitFor("the pending record", async () => (await findApproval(under.bus, "c1")) !== undefined);
    expect((await findApproval(under.bus, "c1"))?.status).toBe("pending");
    const first = await answerApproval(under.bus, "run-1", "c1", {
      approved: false,
      reason: "not on a Friday",
      by: "alice",
    });
    const second = await answerApproval(under.bus, "run-1", "c1", { approved: true, by: "bob" });
    expect(await waiting).toEqual({ approved: false, reason: "not on a Friday", by: "alice" });
    expect(first.outcome).toBe("decided");
    expect(second).toMatchObject({ outcome: "already-decided", record: { status: "denied", by: "alice" } });
    expect(await answerApproval(under.bus, "run-1", "nope", { approved: true, by: "x" })).toEqual({
      outcome: "unknown",
    });
  });

  it("deny a request nobody answers before the timeout", async () => {
    const approver = new BusApprover(under.bus, 300, silentLogger);
    const started = Date.now();
    expect(await approver.decide(request("c2"), new AbortController().signal)).toEqual({
      approved: false,
      reason: "nobody answered in time",
      by: "timeout",
    });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("keep a pending request across a restart: a new waiter finds it and gets the answer", async () => {
    const before = new AbortController();
    const first = new BusApprover(under.bus, 60_000, silentLogger);
    const abandoned = first.decide(request("c3"), before.signal).catch((error) => error);
    await waitFor("the pending record", async () => (await findApproval(under.bus, "c3")) !== undefined);
    before.abort();
    await abandoned;
    // The resumed agent asks again: the same record, still pending, not a new one.
    const again = new BusApprover(under.bus, 60_000, silentLogger).decide(
      request("c3"),
      new AbortController().signal,
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await findApproval(under.bus, "c3"))?.status).toBe("pending");
    await answerApproval(under.bus, "run-1", "c3", { approved: true, by: "carol" });
    expect(await again).toEqual({ approved: true, by: "carol" });
  });
});
