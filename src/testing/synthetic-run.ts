import type { Bus } from "../bus/bus.js";
import type { AgentEventMap } from "../events/agent-events.js";
import { type Envelope, makeEnvelope } from "../events/envelope.js";

const usage = { inputTokens: 100, outputTokens: 20, cachedInputTokens: 0, costUsd: 0.0001 };

/**
 * The events of a run of `agents` agents (a lead and its subagents) each streaming `deltas` pieces of
 * text in one turn, the lead making a tool call after each piece, written straight to the event log
 * as agents would: for loading what reads the log (the web console, observers) without running a
 * model. `pace` is called between rounds (a piece of every agent), to spread the events over time;
 * `stamp` is each round's text.
 */
export async function writeSyntheticRun(
  bus: Bus,
  options: {
    runId: string;
    agents: number;
    deltas: number;
    pace?: (round: number) => Promise<void>;
    stamp?: () => string;
  },
): Promise<number> {
  const { runId } = options;
  const ids = Array.from({ length: options.agents }, (_, i) => (i === 0 ? "lead" : `scout-${i}`));
  const seqs = new Map(ids.map((id) => [id, 0]));
  let written = 0;
  const write = async (events: Array<{ agentId: string; type: keyof AgentEventMap; data: unknown }>) => {
    const byAgent = new Map<string, Envelope[]>();
    for (const { agentId, type, data } of events) {
      const seq = seqs.get(agentId) ?? 0;
      seqs.set(agentId, seq + 1);
      const envelope = makeEnvelope({
        runId,
        agentId,
        ...(agentId === "lead" ? {} : { parentId: "lead" }),
        seq,
        type,
        data,
      });
      byAgent.set(agentId, [...(byAgent.get(agentId) ?? []), envelope]);
    }
    await Promise.all([...byAgent.values()].map((envelopes) => bus.eventLog.appendAll(envelopes)));
    written += events.length;
  };
  await write(
    ids.map((agentId, i) => ({
      agentId,
      type: "agent.started",
      data: {
        name: i === 0 ? "lead" : "scout",
        model: "scripted",
        task: i === 0 ? "Lead many" : `Scout ${i}`,
        budget: { maxTurns: 10, maxTokens: 100_000 },
        depth: i === 0 ? 0 : 1,
        ...(i === 0 ? {} : { parentId: "lead" }),
      } satisfies AgentEventMap["agent.started"],
    })),
  );
  await write(
    ids.map((agentId) => ({ agentId, type: "state.changed", data: { from: "idle", to: "callingModel" } })),
  );
  for (let round = 0; round < options.deltas; round++) {
    await options.pace?.(round);
    const text = options.stamp?.() ?? `piece ${round} `;
    await write(ids.map((agentId) => ({ agentId, type: "model.delta", data: { text } })));
    const callId = `call_${round}`;
    await write([
      {
        agentId: "lead",
        type: "tool.requested",
        data: {
          callId,
          name: "read_file",
          arguments: `{"path":"${round}.txt"}`,
          effect: "read",
          decision: "allow",
        },
      },
      { agentId: "lead", type: "tool.started", data: { callId, name: "read_file" } },
      {
        agentId: "lead",
        type: "tool.finished",
        data: { callId, name: "read_file", ok: true, durationMs: 1, preview: `line ${round}` },
      },
    ]);
  }
  const stopped: AgentEventMap["agent.stopped"] = {
    reason: "done",
    result: "done",
    usage,
    turns: 1,
    toolCalls: 0,
    total: { usage, toolCalls: 0 },
  };
  await write(
    ids.map((agentId) => ({
      agentId,
      type: "model.completed",
      data: { model: "scripted", usage, finishReason: "stop", toolCalls: 0 },
    })),
  );
  await write(
    ids.map((agentId) => ({ agentId, type: "state.changed", data: { from: "callingModel", to: "stopped" } })),
  );
  await write([...ids].reverse().map((agentId) => ({ agentId, type: "agent.stopped", data: stopped })));
  return written;
}
