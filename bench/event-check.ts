/**
 * What checking an event's `data` against its schema costs a reader (src/bus/intake.ts): 100,000
 * envelopes of one type, as bytes, decoded the way a reader decodes them without the check (JSON,
 * then the envelope's own check) and with it (Intake.decodeEach), and the check alone; µs per event,
 * the best of five rounds. Run alone: `npm run bench:events`. Not part of `npm run bench`.
 */

import { type BusStats, newStats } from "../src/bus/bus.js";
import { Intake } from "../src/bus/intake.js";
import { subjects } from "../src/bus/subjects.js";
import { checkEventData } from "../src/events/agent-events.js";
import { encodeEnvelope, makeEnvelope, parseEnvelope } from "../src/events/envelope.js";
import { silentLogger } from "../src/log.js";

const COUNT = 100_000;
const ROUNDS = 5;

const payloads = {
  "model.delta": { text: "Hello, " },
  "tool.requested": {
    callId: "call_0123456789",
    name: "read_file",
    arguments: '{"path":"src/index.ts"}',
    effect: "read",
    decision: "allow",
  },
  "agent.stopped": {
    reason: "done",
    result: "The notes say hello.",
    usage: { inputTokens: 1200, outputTokens: 80, cachedInputTokens: 0, costUsd: 0.0012 },
    turns: 2,
    toolCalls: 1,
    total: {
      usage: { inputTokens: 1200, outputTokens: 80, cachedInputTokens: 0, costUsd: 0.0012 },
      toolCalls: 1,
    },
  },
} as const;

const decoder = new TextDecoder();

function microsPerEvent(run: () => void): number {
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < ROUNDS; round++) {
    const start = process.hrtime.bigint();
    run();
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1000 / COUNT);
  }
  return best;
}

const stats: BusStats = newStats();
const intake = new Intake(stats, silentLogger);
const s = subjects("bench");
for (const [type, data] of Object.entries(payloads)) {
  const subject = s.event("run-1", "lead", type);
  const messages = Array.from({ length: COUNT }, (_, seq) =>
    encodeEnvelope(makeEnvelope({ runId: "run-1", agentId: "lead", seq, type, data })),
  );
  const envelopes = messages.map((bytes) => parseEnvelope(JSON.parse(decoder.decode(bytes))));
  let kept = 0;
  const unchecked = microsPerEvent(() => {
    for (const bytes of messages) if (parseEnvelope(JSON.parse(decoder.decode(bytes)))) kept++;
  });
  const checked = microsPerEvent(() => {
    for (const bytes of messages) intake.decodeEach(bytes, subject, () => kept++);
  });
  const check = microsPerEvent(() => {
    for (const envelope of envelopes) if (checkEventData(envelope.type, envelope.data) === undefined) kept++;
  });
  if (stats.malformed > 0) throw new Error(`${type}: ${stats.malformed} dropped`);
  console.log(
    `${type.padEnd(15)} JSON + envelope ${unchecked.toFixed(2)} µs · Intake.decodeEach ${checked.toFixed(2)} µs · the data's check alone ${check.toFixed(3)} µs (${kept} read)`,
  );
}
