import type { Bus } from "../bus/bus.js";
import { type AgentEventMap, isEvent } from "../events/agent-events.js";
import type { Logger } from "../log.js";
import { AGENT_MACHINE_VERSION } from "../machines/agent-machine.js";
import type { RebuiltHistory } from "../machines/agent-reopen.js";
import { type ChatMessage, type Usage, ZERO_USAGE } from "../model/types.js";
import {
  AGENT_RECORD_VERSION,
  type AgentRecord,
  type AgentStore,
  IncompatibleRecordError,
  type ToolJournal,
} from "./agent-store.js";
import { finishedChildAnswers } from "./finished-children.js";
import type { JournalEntry } from "./journal-entry.js";
import { SUBAGENT_TOOL_PREFIX } from "./subagents.js";

/** What an agent's events tell of it: enough to go on from where they end. */
export interface LogHistory {
  started: AgentEventMap["agent.started"];
  /** The conversation after the system prompt: the task, each turn's answer and its calls' results. */
  messages: ChatMessage[];
  usage: Usage;
  turns: number;
  toolCalls: number;
  /** From its start to its last event, less the time it waited for people. */
  elapsedMs: number;
  /** The time it spent in `awaitingApproval`, waiting for people (to its last event, if it still waited). */
  waitedMs: number;
  /** The last event's seq. */
  lastSeq: number;
  /** Its last event is an `agent.stopped`: it finished (and was not resumed since). */
  stopped: boolean;
}

/** The first 2,000 characters of an output are in `tool.finished`; the rest only in the snapshot. */
const PREVIEW_CHARS = 2000;
export const CUT_NOTE =
  "\n[Troupe: only the start of this output is in the event log; run the call again if you need the rest]";
export const COMPACTED_NOTE =
  "[Troupe: the turns before this point were compacted, and their summary was lost with the agent's snapshot. Look again at what you need from them.]";

/**
 * An agent's conversation as its events in the log tell it, for an agent whose snapshot cannot be
 * read (the log is the record of what happened; a snapshot is a cache of it). Each turn's text and
 * the calls it made, in order; a call's result from its journal entry (the whole output of what
 * writes or executes), a subagent's from its `agent.stopped`, any other from the start its
 * `tool.finished` kept; no result (a call cut short, or never run) is left for the machine's repair
 * to call unknown. What events do not hold is not rebuilt: steering, and what a compaction
 * summarized (said in a note in its place). Undefined when the log has no `agent.started` of it.
 */
export async function historyFromLog(
  bus: Bus,
  journal: ToolJournal,
  runId: string,
  agentId: string,
): Promise<LogHistory | undefined> {
  let started: LogHistory["started"] | undefined;
  let startedAt = 0;
  let lastAt = 0;
  let lastSeq = -1;
  let stopped = false;
  let waitedMs = 0;
  let waitingSince: number | undefined;
  let text = "";
  let turn: { message: Extract<ChatMessage, { role: "assistant" }>; calls: number } | undefined;
  let messages: ChatMessage[] = [];
  const previews = new Map<string, string>();
  const counts = { usage: { ...ZERO_USAGE }, turns: 0, toolCalls: 0 };
  for await (const { envelope } of bus.eventLog.read({ runId })) {
    if (envelope.agentId !== agentId) continue;
    lastAt = envelope.ts;
    lastSeq = Math.max(lastSeq, envelope.seq);
    stopped = envelope.type === "agent.stopped";
    if (isEvent(envelope, "agent.started")) {
      started = envelope.data;
      startedAt = envelope.ts;
      messages = [{ role: "user", content: envelope.data.task }];
    } else if (isEvent(envelope, "state.changed")) {
      if (waitingSince !== undefined) waitedMs += envelope.ts - waitingSince;
      waitingSince = envelope.data.to === "awaitingApproval" ? envelope.ts : undefined;
    } else if (isEvent(envelope, "model.delta")) {
      text += envelope.data.text;
    } else if (isEvent(envelope, "model.completed")) {
      turn = { message: { role: "assistant", content: text || null }, calls: envelope.data.toolCalls };
      messages.push(turn.message);
      text = "";
    } else if (isEvent(envelope, "tool.requested")) {
      if (!turn || (turn.message.tool_calls?.length ?? 0) >= turn.calls) continue;
      const { callId, name, arguments: args } = envelope.data;
      turn.message.tool_calls = [
        ...(turn.message.tool_calls ?? []),
        { id: callId, type: "function", function: { name, arguments: args } },
      ];
    } else if (isEvent(envelope, "tool.finished")) {
      const { callId, preview, error } = envelope.data;
      const shown = preview ?? error ?? "";
      previews.set(callId, shown.length >= PREVIEW_CHARS ? `${shown}${CUT_NOTE}` : shown);
    } else if (isEvent(envelope, "context.compacted")) {
      messages = [...messages.slice(0, 1), { role: "user", content: COMPACTED_NOTE }];
      turn = undefined;
    } else if (isEvent(envelope, "usage.updated")) {
      Object.assign(counts, {
        usage: envelope.data.usage,
        turns: envelope.data.turns,
        toolCalls: envelope.data.toolCalls,
      });
    }
  }
  if (!started) return undefined;
  if (waitingSince !== undefined) waitedMs += lastAt - waitingSince;
  const withResults = await resultsOf(messages, previews, (callId) => journal.get(runId, agentId, callId));
  const children = await finishedChildAnswers(bus, runId, agentId, withResults);
  return {
    started,
    messages: placeAnswers(withResults, children),
    ...counts,
    elapsedMs: Math.max(0, lastAt - startedAt - waitedMs),
    waitedMs,
    lastSeq,
    stopped,
  };
}

/** Each call's result after its turn: the journal's whole output, else the log's start of it. */
async function resultsOf(
  messages: readonly ChatMessage[],
  previews: ReadonlyMap<string, string>,
  entry: (callId: string) => Promise<JournalEntry | undefined>,
): Promise<ChatMessage[]> {
  const out: ChatMessage[] = [];
  for (const message of messages) {
    out.push(message);
    if (message.role !== "assistant") continue;
    for (const call of message.tool_calls ?? []) {
      // A subagent's answer is taken whole from its own events (below).
      if (call.function.name.startsWith(SUBAGENT_TOOL_PREFIX)) continue;
      const journaled = await entry(call.id);
      const content =
        journaled?.status === "finished" && journaled.outcome
          ? journaled.outcome.content
          : journaled
            ? undefined // started and cut short: its outcome is unknown
            : previews.get(call.id);
      if (content !== undefined) out.push({ role: "tool", tool_call_id: call.id, content });
    }
  }
  return out;
}

/** Subagents' answers put with the results of the turn that called them. */
function placeAnswers(messages: ChatMessage[], answers: ReadonlyMap<string, ChatMessage>): ChatMessage[] {
  if (answers.size === 0) return messages;
  const out: ChatMessage[] = [];
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i] as ChatMessage;
    out.push(message);
    if (message.role !== "assistant") continue;
    let next = i + 1;
    for (; messages[next]?.role === "tool"; next++) out.push(messages[next] as ChatMessage);
    for (const call of message.tool_calls ?? []) {
      const answer = answers.get(call.id);
      if (answer) out.push(answer);
    }
    i = next - 1;
  }
  return out;
}

/** What an agent rebuilt from the log is told before it goes on (the START of its machine's idle). */
export const REBUILT_NOTE =
  "[Troupe: this agent's saved state could not be read, so its conversation was rebuilt from the run's event log. Steering it was given and long tool outputs may be missing or cut; a call whose outcome is unknown says so. Go on with the task from where it was.]";

/**
 * The record an agent whose snapshot cannot be read is resumed with, and the history it goes on
 * from (`StartAgentOptions.rebuilt`); undefined when its events do not say it started.
 */
export async function recordFromLog(
  bus: Bus,
  journal: ToolJournal,
  runId: string,
  agentId: string,
  only: { unfinished?: boolean } = {},
): Promise<{ record: AgentRecord; rebuilt: RebuiltHistory } | undefined> {
  const history = await historyFromLog(bus, journal, runId, agentId);
  if (!history || (only.unfinished && history.stopped)) return undefined;
  const { started, messages, usage, turns, toolCalls, waitedMs } = history;
  const record: AgentRecord = {
    v: AGENT_RECORD_VERSION,
    machineVersion: AGENT_MACHINE_VERSION,
    runId,
    agentId,
    ...(started.parentId ? { parentId: started.parentId } : {}),
    name: started.name,
    depth: started.depth,
    task: started.task,
    budget: started.budget,
    nextSeq: history.lastSeq + 1,
    elapsedMs: history.elapsedMs,
    // The machine's snapshot is made from `rebuilt` by the agent's host, with the system prompt.
    snapshot: { context: { turns, waitedMs } },
    done: false,
  };
  return { record, rebuilt: { messages, usage, turns, toolCalls, waitedMs } };
}

/**
 * An agent's stored record (taken over, with an `epoch`); when it cannot be read (not a record of
 * it, or of another version), one rebuilt from the agent's events, which the log holds whatever
 * became of the snapshot. So too when there is none and the log says the agent started and has not
 * stopped: its host died before its first snapshot was stored (the client may already have seen it
 * calling the model). Undefined when there is neither.
 */
export async function loadOrRebuild(
  persistence: { agents: AgentStore; journal: ToolJournal },
  bus: Bus,
  log: Logger,
  which: { runId: string; agentId: string; epoch?: number | undefined },
): Promise<{ record: AgentRecord; rebuilt?: RebuiltHistory } | undefined> {
  const { runId, agentId, epoch } = which;
  let record: AgentRecord | undefined;
  try {
    record = await (epoch
      ? persistence.agents.takeOver(runId, agentId)
      : persistence.agents.load(runId, agentId));
  } catch (error) {
    if (!(error instanceof IncompatibleRecordError)) throw error;
    const fromLog = await recordFromLog(bus, persistence.journal, runId, agentId);
    if (!fromLog) throw error;
    log.warn(
      { runId, agentId, err: error.message },
      "rebuilt from the event log: its snapshot cannot be read",
    );
    return fromLog;
  }
  if (record) return { record };
  if (epoch) return undefined;
  const fromLog = await recordFromLog(bus, persistence.journal, runId, agentId, { unfinished: true });
  if (fromLog) log.warn({ runId, agentId }, "rebuilt from the event log: it has no snapshot yet");
  return fromLog;
}
