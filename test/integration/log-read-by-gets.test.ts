import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { LoggedEvent } from "../../src/bus/bus.js";
import { NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { inWindow } from "../../src/bus/log-read-by-gets.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { type BusUnderTest, natsBus } from "../support/buses.js";
import { follow, untilLive } from "../support/follow-log.js";
import { collect, waitFor } from "../support/wait.js";

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

describe("following by gets at the log's end", () => {
  it("takes events as they are published, every one once and in order, none placed by a get", async () => {
    const { hosts, observer } = await pair();
    for (let seq = 0; seq < 50; seq++) await hosts.eventLog.append(event("r", seq));
    const follower = follow(observer, "r");
    await untilLive(hosts, "r", follower.got);
    for (let seq = 50; seq < 2050; seq += 50)
      await Promise.all(Array.from({ length: 50 }, (_, i) => hosts.eventLog.append(event("r", seq + i))));
    await waitFor("2,050 events", () => follower.of("a1").length >= 2050, 20_000);
    await follower.stop();
    const own = follower.of("a1");
    expect(own.map((e) => e.envelope.seq)).toEqual(Array.from({ length: 2050 }, (_, i) => i));
    // The first 50 were read from the log; the rest were heard, not asked for.
    expect(own.slice(0, 50).every((e) => e.seq !== undefined)).toBe(true);
    expect(own.slice(50).filter((e) => e.seq !== undefined)).toEqual([]);
  }, 30_000);

  it("reads the log again when an event heard does not follow its agent's last", async () => {
    const { hosts, observer } = await pair();
    for (let seq = 0; seq < 5; seq++) await hosts.eventLog.append(event("r", seq));
    const follower = follow(observer, "r");
    await untilLive(hosts, "r", follower.got);
    // 5 is never stored: 6 and 7 are read from the log (which has nothing before them), 8 heard again.
    await hosts.eventLog.append(event("r", 6));
    await hosts.eventLog.append(event("r", 7));
    await waitFor("6 and 7", () => follower.of("a1").length >= 7);
    await untilLive(hosts, "r", follower.got, "probe-again");
    await hosts.eventLog.append(event("r", 8));
    await waitFor("8", () => follower.of("a1").length >= 8);
    await follower.stop();
    const own = follower.of("a1");
    expect(own.map((e) => e.envelope.seq)).toEqual([0, 1, 2, 3, 4, 6, 7, 8]);
    expect(own.map((e) => e.seq !== undefined)).toEqual([true, true, true, true, true, true, true, false]);
  }, 30_000);

  it("lets go of what it heard while its reader took nothing, and reads it from the log", async () => {
    const { hosts, observer } = await pair();
    const controller = new AbortController();
    const events = observer.eventLog.read({ runId: "r", follow: true, signal: controller.signal });
    const reading = events[Symbol.asyncIterator]();
    const got: LoggedEvent[] = [];
    // Taken as they come until the follower is live.
    const taking = (async () => {
      for (;;) {
        const next = await reading.next();
        if (next.done) return;
        got.push(next.value);
        if (next.value.envelope.agentId === "probe" && next.value.seq === undefined) return;
      }
    })();
    await untilLive(hosts, "r", got);
    await taking;
    // Nothing taken while 60,000 events are appended: more than a follower holds for its reader (50,000).
    for (let seq = 0; seq < 60_000; seq += 200)
      await Promise.all(Array.from({ length: 200 }, (_, i) => hosts.eventLog.append(event("r", seq + i))));
    const own: LoggedEvent[] = [];
    while (own.length < 60_000) {
      const next = await reading.next();
      if (next.done) break;
      if (next.value.envelope.agentId === "a1") own.push(next.value);
    }
    controller.abort();
    await reading.return?.();
    expect(own.map((e) => e.envelope.seq)).toEqual(Array.from({ length: 60_000 }, (_, i) => i));
    // What it let go was read from the log.
    expect(own.filter((e) => e.seq !== undefined).length).toBeGreaterThan(5000);
  }, 60_000);
});

describe("following by gets where the server refuses a subscription to events", () => {
  let dir: string;
  let server: NatsServerProcess;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "troupe-deaf-"));
    // The reader may ask the JetStream API and hear its answers, and subscribe to nothing else.
    writeFileSync(
      join(dir, "auth.conf"),
      `authorization { users = [
        { user: "hosts", password: "hosts-pass" },
        { user: "reader", password: "reader-pass",
          permissions: { publish: { allow: ["$JS.API.>", "_INBOX.>"] }, subscribe: { allow: ["_INBOX.>"] } } }
      ] }\n`,
    );
    server = await NatsServerProcess.start({
      storeDir: join(dir, "store"),
      args: ["-c", join(dir, "auth.conf")],
    });
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("reads every event from the log, a second at a time, and takes none as heard", async () => {
    const prefix = uniquePrefix();
    const hosts = await NatsBus.connect({ url: server.url, prefix, user: "hosts", password: "hosts-pass" });
    const reader = await NatsBus.connect({
      url: server.url,
      prefix,
      user: "reader",
      password: "reader-pass",
      role: "observer",
    });
    try {
      await hosts.eventLog.append(event("r", 0));
      const follower = follow(reader, "r");
      await waitFor("the first event", () => follower.of("a1").length === 1);
      // Well past the second after which a follower that hears takes what it hears.
      for (let seq = 1; seq < 6; seq++) {
        await new Promise((resolve) => setTimeout(resolve, 400));
        await hosts.eventLog.append(event("r", seq));
      }
      await waitFor("six events", () => follower.of("a1").length === 6, 5000);
      await follower.stop();
      expect(follower.of("a1").map((e) => e.envelope.seq)).toEqual([0, 1, 2, 3, 4, 5]);
      expect(follower.of("a1").every((e) => e.seq !== undefined)).toBe(true);
    } finally {
      await reader.close();
      await hosts.close();
    }
  }, 30_000);
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
