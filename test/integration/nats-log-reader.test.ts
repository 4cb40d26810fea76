import { jetstreamManager } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import type { Bus } from "../../src/bus/bus.js";
import type { NatsBus } from "../../src/bus/nats-bus.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { busPerTest, natsBus } from "../support/buses.js";
import { waitFor } from "../support/wait.js";

const event = (runId: string, seq: number) =>
  makeEnvelope({ runId, agentId: "a", seq, type: "model.delta", data: { text: `d${seq}` } });

async function appendRange(bus: Bus, runId: string, from: number, to: number): Promise<void> {
  const events = Array.from({ length: to - from }, (_, i) => event(runId, from + i));
  for (let at = 0; at < events.length; at += 512) await bus.eventLog.appendAll(events.slice(at, at + 512));
}

describe("the event log read on NATS", () => {
  const under = busPerTest(() => natsBus());

  it("goes on from the last event read when its consumer is deleted under it", async () => {
    const bus = under().bus as NatsBus;
    await appendRange(bus, "gone", 0, 3);
    const seen: number[] = [];
    const controller = new AbortController();
    const reading = (async () => {
      for await (const { envelope } of bus.eventLog.read({
        runId: "gone",
        follow: true,
        signal: controller.signal,
      }))
        seen.push(envelope.seq);
    })();
    await waitFor("the first events", () => seen.length === 3);
    const jsm = await jetstreamManager(bus.connection);
    const stream = bus.subjects.eventStream;
    const names: string[] = [];
    for await (const info of jsm.consumers.list(stream)) names.push(info.name);
    expect(names).toHaveLength(1);
    for (const name of names) await jsm.consumers.delete(stream, name);
    await appendRange(bus, "gone", 3, 6);
    await waitFor("the events after the delete", () => seen.length >= 6, 10_000);
    controller.abort();
    await reading;
    expect(seen).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it("holds the server while the reader is far behind, loses nothing, and leaves no consumer behind", async () => {
    const bus = under().bus as NatsBus;
    const count = 30_000;
    await appendRange(bus, "slow", 0, count);
    const jsm = await jetstreamManager(bus.connection);
    const delivered = async () => {
      for await (const info of jsm.consumers.list(bus.subjects.eventStream)) return info.delivered.stream_seq;
      return 0;
    };
    let expected = 0;
    let heldAt = 0;
    for await (const { envelope } of bus.eventLog.read({ runId: "slow" })) {
      expect(envelope.seq).toBe(expected++);
      if (expected === 1) {
        // The reader takes nothing for a while: the server is held at a flow-control check.
        await new Promise((resolve) => setTimeout(resolve, 1000));
        heldAt = await delivered();
      }
      if (expected % 1000 === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // Held part way (without the hold, all of it is delivered and the consumer gone: 0).
    expect(heldAt).toBeGreaterThan(0);
    expect(heldAt).toBeLessThan(count);
    expect(expected).toBe(count);
    await waitFor("its consumer gone", async () => {
      for await (const _ of jsm.consumers.list(bus.subjects.eventStream)) return false;
      return true;
    });
  });
});
