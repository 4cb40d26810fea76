import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  type Bus,
  BusError,
  KvConflictError,
  NoRespondersError,
  RemoteError,
  RequestTimeoutError,
} from "../../src/bus/bus.js";
import { type Envelope, makeEnvelope } from "../../src/events/envelope.js";
import { memoryLogger } from "../../src/log.js";
import { type BusUnderTest, bothBuses } from "../support/buses.js";
import { collect, waitFor } from "../support/wait.js";

function event(
  runId: string,
  agentId: string,
  seq: number,
  type = "test.event",
  data: unknown = { seq },
): Envelope {
  return makeEnvelope({ runId, agentId, seq, type, data });
}

describe.each(bothBuses)("bus contract: $name", ({ name, open }) => {
  let under: BusUnderTest;
  let bus: Bus;
  let logs: Array<Record<string, unknown>>;

  beforeEach(async () => {
    const memory = memoryLogger();
    logs = memory.records;
    under = await open(memory.log);
    bus = under.bus;
  });
  afterEach(async () => {
    await under.dispose();
  });

  it("routes by * and > wildcards", async () => {
    const s = bus.subjects;
    const got: Record<string, string[]> = { all: [], run1: [], agentA: [], exact: [] };
    bus.subscribe(s.events(), (_e, subject) => void got.all?.push(subject));
    bus.subscribe(s.events("r1"), (_e, subject) => void got.run1?.push(subject));
    bus.subscribe(`${s.prefix}.evt.*.a.*`, (_e, subject) => void got.agentA?.push(subject));
    bus.subscribe(s.event("r1", "a", "tick"), (_e, subject) => void got.exact?.push(subject));
    await bus.flush();

    bus.publish(s.event("r1", "a", "tick"), event("r1", "a", 0, "tick"));
    bus.publish(s.event("r1", "b", "tick"), event("r1", "b", 0, "tick"));
    bus.publish(s.event("r2", "a", "tick"), event("r2", "a", 0, "tick"));
    bus.publish(
      s.event("r2", "a", "state.changed"),
      event("r2", "a", 1, "state.changed", { from: "idle", to: "callingModel" }),
    );
    await waitFor("four events on >", () => got.all?.length === 4);
    await bus.flush();

    expect(got.run1).toEqual([s.event("r1", "a", "tick"), s.event("r1", "b", "tick")]);
    // `*` is one token: the dotted type `state.changed` is two, so it does not match.
    expect(got.agentA).toEqual([s.event("r1", "a", "tick"), s.event("r2", "a", "tick")]);
    expect(got.exact).toEqual([s.event("r1", "a", "tick")]);
  });

  it("stops delivering to a subscription once unsubscribed, and keeps delivering to others on the same pattern", async () => {
    const s = bus.subjects;
    const got = { first: 0, second: 0 };
    const first = bus.subscribe(s.events("r1"), () => void got.first++);
    bus.subscribe(s.events("r1"), () => void got.second++);
    await bus.flush();
    first.unsubscribe();
    await bus.flush();
    bus.publish(s.event("r1", "a", "tick"), event("r1", "a", 0, "tick"));
    await waitFor("the remaining subscriber", () => got.second === 1);
    await bus.flush();
    expect(got).toEqual({ first: 0, second: 1 });
  });

  it("gives each message to one member of a queue group, and to every plain subscriber", async () => {
    const subject = bus.subjects.workSpawn();
    const members = new Map<number, number>();
    let plain = 0;
    for (const member of [0, 1, 2]) {
      bus.subscribe(subject, () => void members.set(member, (members.get(member) ?? 0) + 1), {
        queue: "workers",
      });
    }
    bus.subscribe(subject, () => void plain++);
    await bus.flush();

    for (let i = 0; i < 60; i++) bus.publish(subject, event("r", "w", i));
    await waitFor("60 plain deliveries", () => plain === 60);
    const delivered = () => [...members.values()].reduce((a, b) => a + b, 0);
    await waitFor("60 queue deliveries", () => delivered() === 60);
    await bus.flush();
    expect(delivered()).toBe(60);
    expect(members.size).toBe(3);
  });

  it("answers requests, and a responder's failure reaches the requester as RemoteError", async () => {
    const subject = bus.subjects.api("runs.get");
    bus.reply(subject, (request) =>
      makeEnvelope({ ...request, seq: 0, type: "reply", data: { echo: request.data } }),
    );
    bus.reply(bus.subjects.api("runs.fail"), () => {
      throw new Error("no such run: r9");
    });
    await bus.flush();

    const answer = await bus.request(subject, event("r", "cli", 0, "runs.get", { id: 7 }));
    expect(answer.data).toEqual({ echo: { id: 7 } });
    await expect(bus.request(bus.subjects.api("runs.fail"), event("r", "cli", 0))).rejects.toMatchObject({
      name: "RemoteError",
      message: expect.stringContaining("no such run: r9"),
    });
  });

  it("answers a limited responder's requests a few at a time per lane, drops those past its queue, and keeps lanes apart", async () => {
    const prefix = bus.subjects.api("x").slice(0, -1);
    const release: Array<() => void> = [];
    let running = 0;
    let most = 0;
    bus.reply(
      `${prefix}>`,
      async (request, subject) => {
        running++;
        most = Math.max(most, running);
        if (subject.endsWith("slow")) await new Promise<void>((resolve) => release.push(resolve));
        running--;
        return makeEnvelope({ ...request, seq: 0, type: "reply", data: {} });
      },
      {
        limit: {
          inFlight: 2,
          queued: 3,
          lane: (subject) => (subject.endsWith("slow") ? "reads" : "commands"),
        },
      },
    );
    await bus.flush();
    const slow = Array.from({ length: 10 }, () =>
      bus.request(`${prefix}slow`, event("r", "cli", 0), { timeoutMs: 3000 }).then(
        () => "answered",
        () => "dropped",
      ),
    );
    await waitFor("two slow ones running", () => release.length === 2, 5000);
    // The other lane is answered while the first is full.
    await expect(bus.request(`${prefix}fast`, event("r", "cli", 0))).resolves.toMatchObject({
      type: "reply",
    });
    while (release.length > 0 || running > 0) {
      release.shift()?.();
      await new Promise((r) => setTimeout(r, 5));
    }
    const outcomes = await Promise.all(slow);
    expect(outcomes.filter((o) => o === "answered")).toHaveLength(5);
    expect(outcomes.filter((o) => o === "dropped")).toHaveLength(5);
    expect(bus.stats.dropped).toBe(5);
    expect(most).toBe(3); // two slow ones and the fast one of the other lane
  });

  it("fails a request nobody answers as NoRespondersError, at once", async () => {
    const started = Date.now();
    await expect(
      bus.request(bus.subjects.api("nobody.home"), event("r", "cli", 0), { timeoutMs: 3000 }),
    ).rejects.toBeInstanceOf(NoRespondersError);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("leaves a request to another responder when one answers nothing, and times out when all do", async () => {
    const mine = bus.subjects.control("r1", "here", "steer");
    const elsewhere = bus.subjects.control("r1", "gone", "steer");
    const heard: string[] = [];
    // As hosts do: one answers for its own agent only, the other for every agent.
    bus.reply(bus.subjects.allControls(), (request, subject) => {
      heard.push(subject);
      return subject === mine ? makeEnvelope({ ...request, seq: 0, type: "ack", data: "first" }) : undefined;
    });
    bus.reply(bus.subjects.allControls(), () => undefined);
    await bus.flush();
    expect((await bus.request(mine, event("r1", "cli", 0))).data).toBe("first");
    await expect(bus.request(elsewhere, event("r1", "cli", 0), { timeoutMs: 200 })).rejects.toBeInstanceOf(
      RequestTimeoutError,
    );
    expect(heard).toEqual([mine, elsewhere]);
  });

  it("fails a request that gets no reply in time as RequestTimeoutError", async () => {
    const subject = bus.subjects.api("runs.slow");
    bus.subscribe(subject, () => {}); // hears the request, never answers
    await bus.flush();
    await expect(bus.request(subject, event("r", "cli", 0), { timeoutMs: 200 })).rejects.toBeInstanceOf(
      RequestTimeoutError,
    );
  });

  it("replays one run in order after 10,000 events, apart from other runs", async () => {
    const total = 10_000;
    const batch = 250;
    for (let start = 0; start < total; start += batch) {
      const appends: Array<Promise<unknown>> = [];
      for (let seq = start; seq < start + batch; seq++) {
        appends.push(bus.eventLog.append(event("long", "a", seq)));
        if (seq % 100 === 0) appends.push(bus.eventLog.append(event("other", "b", seq)));
      }
      // Appends of one agent are awaited in order by their producer; a batch in flight may land in any order.
      await Promise.all(appends);
    }
    const replayed = await collect(bus.eventLog.read({ runId: "long" }));
    expect(replayed).toHaveLength(total);
    const seqs = replayed.map((e) => e.envelope.seq).sort((a, b) => a - b);
    expect(seqs).toEqual(Array.from({ length: total }, (_, i) => i));
    // A read that is not following places every event in the log.
    const logSeqs = replayed.map((e) => e.seq ?? Number.NaN);
    expect(logSeqs.every(Number.isSafeInteger)).toBe(true);
    expect(logSeqs).toEqual([...logSeqs].sort((a, b) => a - b));
    expect(new Set(replayed.map((e) => e.envelope.runId))).toEqual(new Set(["long"]));
  }, 120_000);

  it("keeps replay order equal to append order", async () => {
    for (let seq = 0; seq < 50; seq++) await bus.eventLog.append(event("ordered", "a", seq, "tick"));
    const replayed = await collect(bus.eventLog.read({ runId: "ordered" }));
    expect(replayed.map((e) => e.envelope.seq)).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });

  it("stores a retried append once", async () => {
    const envelope = event("dedup", "a", 0);
    const first = await bus.eventLog.append(envelope);
    const again = await bus.eventLog.append(envelope);
    expect(first.duplicate).toBe(false);
    expect(again).toEqual({ seq: first.seq, duplicate: true });
    await bus.eventLog.append(event("dedup", "a", 1));
    const replayed = await collect(bus.eventLog.read({ runId: "dedup" }));
    expect(replayed.map((e) => e.envelope.id)).toEqual([envelope.id, replayed[1]?.envelope.id]);
    expect(replayed).toHaveLength(2);
  });

  it("stores appendAll's events in order, each seen on its own by readers and subscribers, once when retried", async () => {
    const seen: number[] = [];
    const byType: number[] = [];
    bus.subscribe(bus.subjects.events("many"), (e) => void seen.push(e.seq));
    // Each event is on its own subject, `<p>.evt.<runId>.<agentId>.<type>`, also inside a batch.
    bus.subscribe(`${bus.subjects.prefix}.evt.*.*.model.delta`, (e) => void byType.push(e.seq));
    await bus.flush();
    await bus.eventLog.append(event("many", "a", 0));
    // Big enough to need more than one message on NATS (256 KB each), small events around it.
    const big = "x".repeat(100_000);
    const batch = Array.from({ length: 8 }, (_, i) =>
      event("many", "a", i + 1, "model.delta", { text: i === 3 || i === 4 || i === 5 ? big : `d${i}` }),
    );
    const ack = await bus.eventLog.appendAll(batch);
    expect(ack.duplicate).toBe(false);
    await bus.eventLog.appendAll([event("many", "a", 9)]);
    await waitFor("every event at the subscriber", () => seen.length >= 10 && byType.length >= 8);
    expect(seen).toEqual(Array.from({ length: 10 }, (_, i) => i));
    expect(byType).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    // Retried (a subscriber may see it again; the log keeps it once).
    const again = await bus.eventLog.appendAll(batch);
    expect(again.duplicate).toBe(true);
    const replayed = await collect(bus.eventLog.read({ runId: "many" }));
    expect(replayed.map((e) => e.envelope.seq)).toEqual(Array.from({ length: 10 }, (_, i) => i));
    expect(replayed.map((e) => e.envelope.id).slice(1, 9)).toEqual(batch.map((e) => e.id));
    expect(replayed[4]?.envelope.data).toEqual({ text: big });
  });

  it("replays, then follows live; from now sees only new events", async () => {
    await bus.eventLog.append(event("live", "a", 0));
    await bus.eventLog.append(event("live", "a", 1));
    const controller = new AbortController();
    const fromStart = collect(
      bus.eventLog.read({ runId: "live", follow: true, signal: controller.signal }),
      4,
    );
    const fromNow = collect(
      bus.eventLog.read({ runId: "live", from: "now", follow: true, signal: controller.signal }),
      2,
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    await bus.eventLog.append(event("live", "a", 2));
    await bus.eventLog.append(event("elsewhere", "a", 0));
    await bus.eventLog.append(event("live", "a", 3));

    expect((await fromStart).map((e) => e.envelope.seq)).toEqual([0, 1, 2, 3]);
    expect((await fromNow).map((e) => e.envelope.seq)).toEqual([2, 3]);
    controller.abort();
  });

  it("ends a replay of an unknown run at once, and a follow when its signal aborts", async () => {
    expect(await collect(bus.eventLog.read({ runId: "nothing-here" }))).toEqual([]);
    const controller = new AbortController();
    const following = collect(
      bus.eventLog.read({ runId: "nothing-here", follow: true, signal: controller.signal }),
    );
    setTimeout(() => controller.abort(), 100);
    expect(await following).toEqual([]);
  });

  it("delivers appended events to live subscribers too", async () => {
    const seen: number[] = [];
    bus.subscribe(bus.subjects.events("sub"), (e) => void seen.push(e.seq));
    await bus.flush();
    await bus.eventLog.append(event("sub", "a", 0));
    await waitFor("the appended event", () => seen.length === 1);
  });

  it("keeps KV state with compare-and-set", async () => {
    const kv = await bus.kv("snapshots");
    expect(await kv.get("run-1.agent-a")).toBeNull();
    const r1 = await kv.create("run-1.agent-a", { state: "idle" });
    await expect(kv.create("run-1.agent-a", { state: "other" })).rejects.toBeInstanceOf(KvConflictError);
    const r2 = await kv.put("run-1.agent-a", { state: "callingModel" }, { expectedRevision: r1 });
    expect(r2).toBeGreaterThan(r1);
    // A writer holding the old revision loses: state never goes backwards.
    await expect(kv.put("run-1.agent-a", { state: "idle" }, { expectedRevision: r1 })).rejects.toBeInstanceOf(
      KvConflictError,
    );
    expect(await kv.get("run-1.agent-a")).toEqual({
      key: "run-1.agent-a",
      value: { state: "callingModel" },
      revision: r2,
    });
    await expect(kv.delete("run-1.agent-a", { expectedRevision: r1 })).rejects.toBeInstanceOf(
      KvConflictError,
    );
    await kv.delete("run-1.agent-a", { expectedRevision: r2 });
    expect(await kv.get("run-1.agent-a")).toBeNull();
    expect(await kv.create("run-1.agent-a", { state: "idle" })).toBeGreaterThan(r2);
    expect(await kv.keys()).toEqual(["run-1.agent-a"]);
  });

  it("watches KV: current values first, then changes and deletes", async () => {
    const kv = await bus.kv("approvals");
    await kv.put("r1.c1", { pending: true });
    await kv.put("r2.c1", { pending: true });
    const controller = new AbortController();
    const changes = collect(kv.watch({ key: "r1.*", signal: controller.signal }), 3);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await kv.put("r1.c2", { pending: true });
    await kv.put("r2.c2", { pending: true });
    await kv.delete("r1.c1");
    const seen = await changes;
    controller.abort();
    expect(seen.map(({ key, op, value }) => ({ key, op, value }))).toEqual([
      { key: "r1.c1", op: "put", value: { pending: true } },
      { key: "r1.c2", op: "put", value: { pending: true } },
      { key: "r1.c1", op: "delete", value: null },
    ]);
  });

  it("lists KV keys and values by pattern, and forgets every key under a pattern", async () => {
    const kv = await bus.kv("journal");
    for (const key of ["run-a.root.c1", "run-a.root.c2", "run-a.child.c1", "run-b.root.c1", "run-a"])
      await kv.put(key, { key });
    await kv.delete("run-a.root.c2");
    expect(await kv.keys("run-a.>")).toEqual(["run-a.child.c1", "run-a.root.c1"]);
    expect(await kv.keys("*")).toEqual(["run-a"]);
    const values = await kv.values<{ key: string }>("*.root.*");
    expect(values.map(({ key, value }) => [key, value.key])).toEqual([
      ["run-a.root.c1", "run-a.root.c1"],
      ["run-b.root.c1", "run-b.root.c1"],
    ]);
    expect(values[0]?.revision).toBe((await kv.get("run-a.root.c1"))?.revision);
    expect(await kv.values("nothing.*")).toEqual([]);

    // On NATS the deleted key's marker goes too (three entries); in memory there are two.
    expect(await kv.forget("run-a.>")).toBe(name === "LocalBus" ? 2 : 3);
    expect(await kv.keys()).toEqual(["run-a", "run-b.root.c1"]);
    expect(await kv.get("run-a.root.c1")).toBeNull();
    expect(await kv.forget("run-a.>")).toBe(0);
    // A key forgotten can be made again.
    await kv.create("run-a.root.c1", { again: true });
    expect((await kv.get("run-a.root.c1"))?.value).toEqual({ again: true });
  });
  // Retried as a store that is away would be, a malformed key would take the 30 s of retries to
  // refuse (a web console's POST /api/runs/*/abort did), past this test's 10 s.
  it("refuses a wildcard or malformed KV key as a BusError, without retrying it", async () => {
    const kv = await bus.kv("keys");
    for (const key of ["*", ">", "a*b", "a b", ".a"]) {
      await expect(kv.get(key), key).rejects.toThrow(BusError);
      await expect(kv.put(key, {}), key).rejects.toThrow(BusError);
      await expect(kv.delete(key), key).rejects.toThrow(BusError);
    }
  }, 10_000);

  it("logs and counts a malformed envelope on the wire, and keeps going", async () => {
    const subject = bus.subjects.event("bad", "a", "tick");
    const seen: number[] = [];
    bus.subscribe(bus.subjects.events("bad"), (e) => void seen.push(e.seq));
    bus.reply(bus.subjects.api("echo"), (request) => request);
    await bus.flush();

    await under.sendRaw(subject, new TextEncoder().encode("{not json"));
    await under.sendRaw(subject, new TextEncoder().encode(JSON.stringify({ v: 99, id: "x" })));
    bus.publish(subject, event("bad", "a", 7, "tick"));
    await waitFor("the valid event after the bad ones", () => seen.length === 1);
    expect(seen).toEqual([7]);
    expect(bus.stats.malformed).toBe(2);
    const warnings = logs.filter((record) => record.msg === "dropped a malformed envelope");
    expect(warnings.map((record) => record.subject)).toEqual([subject, subject]);
    expect(await bus.request(bus.subjects.api("echo"), event("bad", "cli", 1))).toMatchObject({ seq: 1 });
  });

  it("counts a handler that throws, and the subscription goes on", async () => {
    const subject = bus.subjects.event("throws", "a", "test.event");
    let calls = 0;
    bus.subscribe(subject, () => {
      calls++;
      if (calls === 1) throw new Error("handler bug");
    });
    await bus.flush();
    bus.publish(subject, event("throws", "a", 0));
    bus.publish(subject, event("throws", "a", 1));
    await waitFor("both deliveries", () => calls === 2);
    expect(bus.stats.handlerErrors).toBe(1);
  });

  it("refuses tokens that would widen a subject", () => {
    expect(() => bus.subjects.event("r.1", "a", "tick")).toThrow(/run id/);
    expect(() => bus.subjects.events("*")).toThrow(/run id/);
    expect(() => bus.subjects.event("r1", "a>", "tick")).toThrow(/agent id/);
  });

  it("rejects a remote error reply as RemoteError with the responder's words", async () => {
    bus.reply(bus.subjects.api("boom"), () => Promise.reject(new TypeError("bad argument: id")));
    await bus.flush();
    const failure = await bus.request(bus.subjects.api("boom"), event("r", "cli", 0)).catch((e) => e);
    expect(failure).toBeInstanceOf(RemoteError);
    expect(failure.remoteName).toBe("TypeError");
  });
});
