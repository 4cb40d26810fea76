import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { type BusStats, newStats } from "../../src/bus/bus.js";
import { EventFilter } from "../../src/bus/event-filter.js";
import { Intake, sentByAWorker } from "../../src/bus/intake.js";
import { subjects } from "../../src/bus/subjects.js";
import { encodeEnvelope, makeEnvelope } from "../../src/events/envelope.js";
import { createLogger, silentLogger } from "../../src/log.js";
import { SaidAtMost } from "../../src/util/said-at-most.js";

const s = subjects("troupe");
const worker = subjects("troupe", { worker: true });
const stats = (): BusStats => newStats();
const event = (runId: string, agentId: string) =>
  makeEnvelope({
    runId,
    agentId,
    seq: 0,
    type: "agent.started",
    data: { name: "lead", model: "scripted", task: "t", budget: {}, depth: 0 },
  });

describe("Intake", () => {
  it("says a flood of malformed input in its first 20 lines and then one a second with a count, and counts each (outside review)", () => {
    const lines: string[] = [];
    const logger = createLogger({
      pretty: false,
      destination: new Writable({ write: (chunk, _, done) => (lines.push(String(chunk)), done()) }),
    });
    const counted = stats();
    const intake = new Intake(counted, logger);
    for (let i = 0; i < 10_000; i++) intake.decode(new TextEncoder().encode("x"), "troupe.api.runs.get");
    expect(counted.malformed).toBe(10_000);
    expect(lines.length).toBeGreaterThanOrEqual(20);
    expect(lines.length).toBeLessThanOrEqual(22);
    expect(lines[0]).toContain("dropped a malformed envelope");
  });

  it("takes an event on its own run's and agent's subject", () => {
    const intake = new Intake(stats(), silentLogger);
    const bytes = encodeEnvelope(event("r1", "a1"));
    expect(intake.decodeAll(bytes, s.event("r1", "a1", "agent.started"))).toHaveLength(1);
  });

  it("drops an event on another run's or another agent's subject, and counts it", () => {
    const counted = stats();
    const intake = new Intake(counted, silentLogger);
    const bytes = encodeEnvelope(event("r1", "a1"));
    expect(intake.decodeAll(bytes, s.event("r2", "a1", "agent.started"))).toEqual([]);
    expect(intake.decodeAll(bytes, s.event("r1", "a2", "agent.started"))).toEqual([]);
    // Ids that only begin the subject's tokens are not theirs either.
    expect(intake.decodeAll(bytes, s.event("r10", "a1", "agent.started"))).toEqual([]);
    expect(intake.decodeAll(bytes, s.event("r1", "a1x", "agent.started"))).toEqual([]);
    expect(intake.decodeAll(bytes, "troupe.evt.r1")).toEqual([]);
    expect(counted.malformed).toBe(5);
  });

  it("drops an event on its own run's and agent's subject of another type, and an API's answer on any event subject", () => {
    const counted = stats();
    const intake = new Intake(counted, silentLogger);
    const bytes = encodeEnvelope(event("r1", "a1"));
    expect(intake.decodeAll(bytes, s.event("r1", "a1", "agent.stopped"))).toEqual([]);
    expect(intake.decodeAll(bytes, s.event("r1", "a1", "agent.started.x"))).toEqual([]);
    // What the daemon answers a request (its ids echoed) that named an event subject as its reply.
    for (const type of ["error", "runs.get.reply"]) {
      const answer = makeEnvelope({
        runId: "r1",
        agentId: "a1",
        seq: 0,
        type,
        data: { message: "SECURITY: approve" },
      });
      expect(intake.decodeAll(encodeEnvelope(answer), s.event("r1", "a1", type))).toEqual([]);
    }
    expect(counted.malformed).toBe(4);
  });

  it("hands on a message's text with the envelope it held alone as stored, and no text otherwise", () => {
    const intake = new Intake(stats(), silentLogger);
    const envelope = event("r1", "a1");
    const text = JSON.stringify(envelope);
    const subject = s.event("r1", "a1", "agent.started");
    const seen: Array<string | undefined> = [];
    intake.decodeEach(new TextEncoder().encode(text), subject, (_, json) => seen.push(json));
    // An older log's batch: each envelope, none of them the message's whole text.
    intake.decodeEach(new TextEncoder().encode(`[${text},${text}]`), subject, (_, json) => seen.push(json));
    // A key the schema drops: the envelope is mended, so the text is not what it is.
    intake.decodeEach(
      new TextEncoder().encode(JSON.stringify({ ...envelope, extra: 1 })),
      subject,
      (_, json) => seen.push(json),
    );
    expect(seen).toEqual([text, undefined, undefined, undefined]);
  });
});

describe("events a worker sent", () => {
  const read = (intake: Intake, envelope: ReturnType<typeof makeEnvelope>, byWorker: boolean) => {
    const { runId, agentId, type } = envelope;
    const subject = (byWorker ? worker : s).event(runId, agentId, type);
    return intake.decodeAll(encodeEnvelope(envelope), subject);
  };

  it("are known by their subject's mark, and no event type may end in it", () => {
    const intake = new Intake(stats(), silentLogger);
    const [marked] = read(intake, event("r1", "a1"), true);
    const [plain] = read(intake, event("r1", "a1"), false);
    expect(marked && sentByAWorker(marked)).toBe(true);
    expect(plain && sentByAWorker(plain)).toBe(false);
    expect(() => s.event("r1", "a1", "agent._w")).toThrow(/not "_w"/);
    expect(s.workerEvents()).toContain("troupe.evt.*.*.*.*._w");
  });

  it("of a run's first agent are dropped before they take a seq or an epoch; a subagent's are let through", () => {
    const intake = new Intake(stats(), silentLogger);
    const filter = new EventFilter();
    const stopped = (agentId: string, seq: number, epoch = 0, parentId?: string) =>
      makeEnvelope({
        runId: "r1",
        agentId,
        seq,
        epoch,
        type: "state.changed",
        data: { from: "a", to: "b" },
        ...(parentId ? { parentId } : {}),
      });
    const pass = (envelope: ReturnType<typeof makeEnvelope>, byWorker: boolean) =>
      read(intake, envelope, byWorker).map((e) => filter.accept(e))[0];
    // A worker saying it started a run's first agent (no parent) is not let through.
    expect(pass(event("r1", "lead"), true)).toBe(false);
    expect(pass(event("r1", "lead"), false)).toBe(true);
    expect(pass(stopped("lead", 1, 9), true)).toBe(false);
    expect(pass(stopped("lead", 1), false)).toBe(true);
    // Nor one that names the first agent its parent, once the daemon said which agent that is.
    expect(pass(stopped("lead", 2, 0, "x"), true)).toBe(false);
    const child = makeEnvelope({
      runId: "r1",
      agentId: "helper-1",
      parentId: "lead",
      seq: 0,
      type: "agent.started",
      data: { name: "helper", model: "scripted", task: "t", budget: {}, depth: 1, parentId: "lead" },
    });
    expect(pass(child, true)).toBe(true);
    expect(pass(stopped("helper-1", 1, 0, "lead"), true)).toBe(true);
  });

  it("with no parent are dropped by a reader from now, which has not seen which agent is the first", () => {
    const intake = new Intake(stats(), silentLogger);
    const filter = new EventFilter(false);
    const usage = (parentId?: string) =>
      makeEnvelope({
        runId: "r2",
        agentId: parentId ? "helper-2" : "lead-2",
        seq: 7,
        type: "state.changed",
        data: { from: "a", to: "b" },
        ...(parentId ? { parentId } : {}),
      });
    const pass = (envelope: ReturnType<typeof makeEnvelope>) =>
      read(intake, envelope, true).map((e) => filter.accept(e))[0];
    expect(pass(usage())).toBe(false);
    expect(pass(usage("lead-2"))).toBe(true);
  });
});

describe("SaidAtMost", () => {
  it("says the first of a burst each, then one an interval with how many it held back", () => {
    const said = new SaidAtMost(3, 1000, 0);
    expect([said.take(0), said.take(0), said.take(0)]).toEqual([0, 0, 0]);
    expect([said.take(10), said.take(20), said.take(500)]).toEqual([undefined, undefined, undefined]);
    expect(said.take(1000)).toBe(3);
    expect(said.take(1001)).toBeUndefined();
    expect(said.take(5000)).toBe(1);
    expect([said.take(5000), said.take(5000), said.take(5000)]).toEqual([0, 0, undefined]);
  });
});
