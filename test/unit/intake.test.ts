import { describe, expect, it } from "vitest";
import { type BusStats, newStats } from "../../src/bus/bus.js";
import { Intake } from "../../src/bus/intake.js";
import { subjects } from "../../src/bus/subjects.js";
import { encodeEnvelope, makeEnvelope } from "../../src/events/envelope.js";
import { silentLogger } from "../../src/log.js";

const s = subjects("troupe");
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
