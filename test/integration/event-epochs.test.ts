import { describe, expect, it } from "vitest";
import type { Bus } from "../../src/bus/bus.js";
import { followRun } from "../../src/bus/follow-run.js";
import { type Envelope, makeEnvelope } from "../../src/events/envelope.js";
import { bothBuses, busPerTest } from "../support/buses.js";
import { collect } from "../support/wait.js";

const event = (agentId: string, seq: number, epoch: number, type = "test.event") =>
  makeEnvelope({ runId: "run-e", agentId, seq, epoch, type, data: { state: "callingModel" } });
const order = (envelopes: Envelope[]) => envelopes.map((e) => `${e.agentId}:${e.seq}@${e.epoch ?? 0}`);

/*
 * A worker (epoch 7) hosts the child; another takes it over (epoch 9) and says so first. What the
 * first still had to send lands after that when its link comes back: its events of seqs the new host
 * also uses, and one beyond them. A retried append lands twice.
 */
async function takeOverLog(bus: Bus): Promise<void> {
  await bus.eventLog.appendAll([event("child", 0, 7), event("child", 1, 7)]);
  await bus.eventLog.append(event("root", 0, 0));
  await bus.eventLog.append(event("child", 2, 9, "agent.resumed"));
  await bus.eventLog.appendAll([event("child", 2, 7), event("child", 3, 7), event("child", 4, 7)]);
  await bus.eventLog.append(event("child", 3, 9));
  await bus.eventLog.append(event("child", 1, 7)); // the same seq again (a retry past the duplicate window)
  await bus.eventLog.append(event("root", 0, 0)); // and one of the same epoch
  await bus.eventLog.append(event("root", 1, 0));
}
const KEPT = ["child:0@7", "child:1@7", "root:0@0", "child:2@9", "child:3@9", "root:1@0"];

describe.each(bothBuses)("reading the log of a run whose child moved, on $name", ({ open }) => {
  const under = busPerTest(() => open());

  it("drops an agent's events of an older epoch than one read, and seqs read already", async () => {
    const { bus } = under();
    await takeOverLog(bus);
    const read = await collect(bus.eventLog.read({ runId: "run-e" }));
    expect(order(read.map((e) => e.envelope))).toEqual(KEPT);
  });

  it("drops them as they come when it follows the log", async () => {
    const { bus } = under();
    const seen: Envelope[] = [];
    const following = (async () => {
      for await (const { envelope } of bus.eventLog.read({ runId: "run-e", follow: true })) {
        seen.push(envelope);
        if (envelope.agentId === "root" && envelope.seq === 1) return;
      }
    })();
    await takeOverLog(bus);
    await following;
    expect(order(seen)).toEqual(KEPT);
  });

  it("drops them in followRun's live events too, and from a reader that joins later", async () => {
    const { bus } = under();
    const seen: Envelope[] = [];
    const following = (async () => {
      for await (const envelope of followRun(bus, "run-e")) {
        seen.push(envelope);
        if (envelope.agentId === "root" && envelope.seq === 1) return;
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 50));
    await takeOverLog(bus);
    await following;
    expect(order(seen)).toEqual(KEPT);
    const late: Envelope[] = [];
    const joined = (async () => {
      for await (const { envelope } of bus.eventLog.read({ runId: "run-e", from: "now", follow: true })) {
        late.push(envelope);
        if (envelope.agentId === "root") return;
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 200));
    await bus.eventLog.appendAll([event("child", 4, 9), event("child", 5, 7), event("child", 5, 9)]);
    await bus.eventLog.append(event("root", 2, 0));
    await joined;
    expect(order(late)).toEqual(["child:4@9", "child:5@9", "root:2@0"]);
  });
});
