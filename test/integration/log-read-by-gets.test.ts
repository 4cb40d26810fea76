import { afterEach, describe, expect, it } from "vitest";
import type { LoggedEvent } from "../../src/bus/bus.js";
import { inWindow } from "../../src/bus/log-read-by-gets.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { type BusUnderTest, natsBus } from "../support/buses.js";
import { collect } from "../support/wait.js";

/*
 * A person's or worker's reader takes the event log by the stream's gets, many in flight at once:
 * every event of what it asks for, in the log's order, whether its run's events lie close together
 * or thin among many others', and, following, those appended while it reads.
 */
const opened: BusUnderTest[] = [];
afterEach(async () => {
  for (const bus of opened.splice(0)) await bus.dispose();
});

const event = (runId: string, seq: number) =>
  makeEnvelope({ runId, agentId: "a1", seq, type: "tick", data: { seq } });

async function pair() {
  const hosts = await natsBus();
  opened.push(hosts);
  const observer = await natsBus({ prefix: hosts.bus.subjects.prefix, role: "observer" });
  opened.push({ ...observer, dispose: () => observer.bus.close() });
  return { hosts: hosts.bus, observer: observer.bus };
}

const seqsOf = (events: LoggedEvent[]) => events.map((e) => `${e.envelope.runId}:${e.envelope.seq}`);

describe("reading the event log by gets", () => {
  it("reads a whole log from its start, every event once and in order", async () => {
    const { hosts, observer } = await pair();
    // Appended 64 at a time: the log's order is the server's, read back by the hosts' consumer.
    for (let seq = 0; seq < 1536; seq += 64)
      await Promise.all(
        Array.from({ length: 64 }, (_, i) => hosts.eventLog.append(event(`r${(seq + i) % 3}`, seq + i))),
      );
    const stored = seqsOf(await collect(hosts.eventLog.read({})));
    expect(stored).toHaveLength(1536);
    expect(seqsOf(await collect(observer.eventLog.read({})))).toEqual(stored);
  });

  it("reads one run's events spread thin among another's", async () => {
    const { hosts, observer } = await pair();
    for (let seq = 0; seq < 600; seq++) {
      await hosts.eventLog.append(event(seq % 50 === 7 ? "thin" : "thick", seq));
    }
    const got = seqsOf(await collect(observer.eventLog.read({ runId: "thin" })));
    expect(got).toEqual(Array.from({ length: 12 }, (_, i) => `thin:${i * 50 + 7}`));
  });

  it("following, takes what is appended while it reads, to the last", async () => {
    const { hosts, observer } = await pair();
    for (let seq = 0; seq < 300; seq++) await hosts.eventLog.append(event("r", seq));
    const controller = new AbortController();
    const seen: number[] = [];
    const reading = (async () => {
      for await (const { envelope } of observer.eventLog.read({
        runId: "r",
        follow: true,
        signal: controller.signal,
      })) {
        seen.push(envelope.seq);
        if (envelope.seq === 999) controller.abort();
      }
    })();
    for (let seq = 300; seq < 1000; seq++) {
      void hosts.eventLog.append(event("r", seq));
      if (seq % 100 === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await reading;
    expect(seen).toEqual(Array.from({ length: 1000 }, (_, i) => i));
  });
});

describe("a window of gets", () => {
  const msg = (seq: number) => ({ seq }) as never;
  it("keeps each message once, in order, and goes on after the last", () => {
    const read = inWindow([msg(4), msg(5), msg(9), msg(9), msg(9), msg(12)], 4);
    expect(read.messages.map((m: { seq: number }) => m.seq)).toEqual([4, 5, 9, 12]);
    expect(read.next).toBe(13);
  });
  it("asks again from the first get that found nothing, keeping only what came before it", () => {
    // Stored at 11 after the get at 7 found nothing and before the get at 6 was answered.
    const read = inWindow([msg(5), msg(11), null, msg(11)], 5);
    expect(read.messages.map((m: { seq: number }) => m.seq)).toEqual([5]);
    expect(read.next).toBe(7);
    expect(inWindow([null, null], 3)).toEqual({ messages: [], next: 3, found: 0 });
  });
});
