import { type Envelope, makeEnvelope } from "../src/events/envelope.js";

/**
 * The events of `runs` runs of one agent each, `perRun` events a run, shaped as a streaming agent's
 * are (text, a tool call, usage), the last of each its `agent.stopped`: what the flood appends as
 * fast as the log takes them, so that the observer and not the agents making events is measured.
 */
export function floodEvents(runs: number, perRun: number, runPrefix = "run-flood"): Envelope[] {
  const shapes: Array<[string, object]> = [
    ["model.delta", { text: "word word word word word word word word " }],
    ["model.delta", { text: "word word word word " }],
    ["tool.started", { callId: "call_1", name: "read_file" }],
    [
      "tool.finished",
      { callId: "call_1", name: "read_file", ok: true, durationMs: 1, preview: "1\tthe answer" },
    ],
    [
      "usage.updated",
      {
        usage: { inputTokens: 120, outputTokens: 8, cachedInputTokens: 0, costUsd: 0 },
        toolCalls: 1,
        turns: 1,
      },
    ],
  ];
  const events: Envelope[] = [];
  for (let seq = 0; seq < perRun; seq++)
    for (let run = 0; run < runs; run++) {
      const runId = `${runPrefix}${run}`;
      const last = seq === perRun - 1;
      const [type, data] = last
        ? [
            "agent.stopped",
            {
              reason: "done",
              result: "ok",
              usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, costUsd: 0 },
              turns: 1,
              toolCalls: 1,
              total: {
                usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, costUsd: 0 },
                toolCalls: 1,
              },
            },
          ]
        : (shapes[seq % shapes.length] as [string, object]);
      events.push(makeEnvelope({ runId, agentId: `flood-${run}`, seq, type, data }));
    }
  return events;
}
