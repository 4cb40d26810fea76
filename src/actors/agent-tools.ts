import type { AgentDefinition } from "../config/agent-schema.js";
import {
  type CompactionResult,
  type CompactionSettings,
  compactMessages,
  type Summarize,
} from "../context/compaction.js";
import type { ApprovalDecision } from "../machines/agent-types.js";
import { countToolSpecTokens, maxToolSpecTokens } from "../model/tokens.js";
import type { ChatMessage, ToolSpec } from "../model/types.js";
import { skillCatalogue, skippedLines } from "../skills/skills.js";
import { type PlannedCall, parseArguments } from "../tools/plan.js";
import type { BatchObserver } from "../tools/run-batch.js";
import type { CallPreview, ToolRegistry } from "../tools/tool.js";
import type { AgentDeps, ToolPlace } from "./agent-deps.js";
import { type ApprovalWaits, WAIT_BUDGET } from "./approval-waits.js";
import type { EventPublisher } from "./event-publisher.js";

/* What an agent host derives from its tools: the tools it has now, the skills it may see, what an
 * approval request shows, what a tool.requested event says. */

/**
 * The tools an agent has now: its list, where `server__*` stands for every tool of that MCP server,
 * against what is registered (an MCP server's tools come and go). Recomputed only when the
 * registered names change.
 */
export function toolView(list: readonly string[], registry: ToolRegistry, onlyReads = false) {
  const listed = (name: string) =>
    list.includes(name) || list.some((entry) => entry.endsWith("__*") && name.startsWith(entry.slice(0, -1)));
  // A read-only agent sees read tools, and the sandboxed ones (the shell), which run read-only for it.
  const readable = (name: string) => {
    const tool = registry.get(name);
    return tool?.effect === "read" || tool?.sandboxed === true;
  };
  const matches = (name: string) => listed(name) && (!onlyReads || readable(name));
  let key = "";
  let view = toolsOf([], []);
  return () => {
    const names = registry.names().filter(matches);
    const nextKey = names.join("\n");
    if (nextKey !== key || names.length === 0) {
      key = nextKey;
      view = toolsOf(
        names,
        names.map((name) => registry.spec(name)).filter((spec): spec is ToolSpec => spec !== undefined),
      );
    }
    return view;
  };
}

/** What the specs cost in the context: at most `maxTokens` (no tokenizing), exactly `tokens()`. */
function toolsOf(names: string[], specs: ToolSpec[]) {
  let tokens: number | undefined;
  const maxTokens = maxToolSpecTokens(specs);
  return {
    allowed: new Set(names),
    specs,
    maxTokens,
    tokens: () => {
      tokens ??= countToolSpecTokens(specs);
      return tokens;
    },
    /** The exact count once made, else a quarter of the bytes (as `estimateMessagesTokens`). */
    estimate: () => tokens ?? Math.ceil(maxTokens / 4),
  };
}

/** The catalogue of the skills this agent may load, when it has the load_skill tool. */
export function catalogueFor(
  definition: AgentDefinition,
  deps: Pick<AgentDeps, "skills" | "skippedSkills">,
): string[] {
  if (!definition.tools.includes("load_skill")) return [];
  const visible = [...deps.skills.values()].filter(
    (skill) => !definition.skills || definition.skills.includes(skill.name),
  );
  const catalogue = skillCatalogue(visible);
  return [...(catalogue ? [catalogue] : []), ...skippedLines(deps.skippedSkills ?? [])];
}

/**
 * The directories of the skills this agent may read the files of, by name, for `skill:NAME/PATH`:
 * those it may load (with load_skill), and the one it started with.
 */
export function skillDirsFor(
  definition: AgentDefinition,
  skills: AgentDeps["skills"],
  started?: string,
): Map<string, string> {
  const loads = definition.tools.includes("load_skill");
  const dirs = new Map<string, string>();
  for (const skill of skills.values()) {
    const mayLoad = loads && (!definition.skills || definition.skills.includes(skill.name));
    if (skill.dir && (mayLoad || skill.name === started)) dirs.set(skill.name, skill.dir);
  }
  return dirs;
}

/** What a preview is made with: the tools, where they work, and the log for a preview that failed. */
type PreviewDeps = Pick<AgentDeps, "tools" | "log"> & ToolPlace;

/**
 * What the person deciding sees: the tool's own preview (a diff, the command), else the arguments as
 * the tool gets them: parsed and written out again, so a key the model wrote twice (JSON keeps the
 * last) or disguised with an escape shows once, with the value the call runs with.
 */
export async function previewOf(deps: PreviewDeps, call: PlannedCall): Promise<CallPreview> {
  const tool = deps.tools.get(call.name);
  try {
    if (tool?.preview) {
      const args = parseArguments(tool.parameters, call.arguments);
      const { workspace, protectedDirs, hiddenDirs } = deps;
      return await tool.preview(args, { workspace, protectedDirs, hiddenDirs });
    }
  } catch (error) {
    deps.log.debug({ err: error, tool: call.name }, "no preview");
  }
  return { detail: asParsed(call.arguments), paths: [] };
}

function asParsed(raw: string): string {
  try {
    return JSON.stringify(raw.trim() === "" ? {} : JSON.parse(raw), null, 2);
  } catch {
    return raw;
  }
}

/**
 * Why a call cannot be put to a person, when redaction would change what they see: the question
 * would then show one thing and run another (a marker that looks like the start of a key hides all
 * that follows it). Nothing is hidden from a question; a call that holds a secret is refused instead.
 */
function unshowable(redactor: AgentDeps["redactor"], texts: readonly string[]): string | undefined {
  const changed = texts.find((text) => redactor.redact(text) !== text);
  if (changed === undefined) return undefined;
  const marker = /\[REDACTED(?::([a-z0-9-]+))?\]/.exec(redactor.redact(changed));
  return `it holds what looks like a secret (${marker?.[1] ?? "a value this process keeps secret"}), and a question about it would have to hide that part of what runs`;
}

export function requested(call: PlannedCall) {
  return {
    callId: call.id,
    name: call.name,
    arguments: call.arguments,
    effect: call.effect,
    decision: call.decision,
    ...(call.result?.error ? { error: call.result.error } : {}),
  };
}

type AskDeps = PreviewDeps & Pick<AgentDeps, "approver" | "redactor">;

/**
 * Asks the approver about each call in turn, publishing each request and its answer; once the
 * agent's time for waiting on people is used up (`waits`), the calls left are denied unasked.
 */
export async function askEach(
  deps: AskDeps,
  events: EventPublisher,
  ids: { runId: string; agentId: string },
  calls: PlannedCall[],
  signal: AbortSignal,
  waits: ApprovalWaits,
): Promise<ApprovalDecision[]> {
  const decisions: ApprovalDecision[] = [];
  for (const call of calls) {
    const spent = waits.spent();
    if (spent) {
      decisions.push({ id: call.id, approved: false, by: WAIT_BUDGET, reason: spent });
      continue;
    }
    decisions.push(await askOne(deps, events, ids, call, await previewOf(deps, call), signal, waits));
  }
  return decisions;
}

/**
 * Asks the approver about one call, shown as `preview` says, publishing the request and its answer
 * (`approval.requested`, and the approver's `approval.rejected` for each answer refused on the way).
 */
export async function askOne(
  deps: AskDeps,
  events: EventPublisher,
  ids: { runId: string; agentId: string },
  call: PlannedCall,
  preview: CallPreview,
  signal: AbortSignal,
  waits: ApprovalWaits,
): Promise<ApprovalDecision> {
  const spent = waits.spent();
  if (spent) return { id: call.id, approved: false, by: WAIT_BUDGET, reason: spent };
  const secret = unshowable(deps.redactor, [preview.detail, call.arguments, ...preview.paths]);
  if (secret)
    return {
      id: call.id,
      approved: false,
      by: "policy",
      reason: `not asked: ${secret}; write it without the secret (name an environment variable or a file instead)`,
    };
  const request = {
    ...ids,
    callId: call.id,
    tool: call.name,
    arguments: call.arguments,
    effect: call.effect,
    // A command leaving the sandbox says so, after its text: that is what the person is deciding.
    detail: call.askBecause ? `${preview.detail}\n(asked because ${call.askBecause})` : preview.detail,
    paths: preview.paths,
    // A question of its own for whoever answers: no "always" given before covers it.
    ...(call.askBecause ? { escalation: call.askBecause } : {}),
  };
  const { runId: _r, agentId: _a, tool, ...shown } = request;
  events.emit("approval.requested", { ...shown, name: tool });
  const answer = await waits.bounded(
    call.id,
    (bounded) =>
      deps.approver.decide(request, bounded, ({ why, by }) =>
        events.emit("approval.rejected", { callId: call.id, why, ...(by ? { by } : {}) }),
      ),
    signal,
    // The record is closed, so that no one answers a question the agent no longer waits on.
    async (why) => deps.approver.close?.(ids, why),
  );
  return {
    id: call.id,
    approved: answer.approved,
    by: answer.by,
    ...(answer.reason ? { reason: answer.reason } : {}),
  };
}

/** Compacts the conversation and publishes what it saved. */
export async function compactAndReport(
  messages: ChatMessage[],
  settings: CompactionSettings,
  summarize: Summarize,
  events: EventPublisher,
  signal: AbortSignal,
): Promise<CompactionResult> {
  const result = await compactMessages(messages, settings, summarize, signal);
  events.emit("context.compacted", {
    tokensBefore: result.tokensBefore,
    tokensAfter: result.tokensAfter,
    pruned: result.pruned,
    summarized: result.summarized,
    usage: result.usage,
  });
  return result;
}

/** How much of a call's output its `tool.finished` carries, for people watching (the web console). */
export const TOOL_PREVIEW_CHARS = 2000;

/** The batch's observer: reports each call's start, progress and finish on the agent's event stream. */
export function toolEventObserver(events: EventPublisher): BatchObserver {
  return {
    onStart: (call) => events.emit("tool.started", { callId: call.id, name: call.name }),
    onProgress: (call, progress) =>
      events.emit("tool.progress", { callId: call.id, name: call.name, ...progress }),
    onFinish: (call, { details, shown }, durationMs) =>
      events.emit("tool.finished", {
        callId: call.id,
        name: call.name,
        ok: details.ok,
        durationMs: Math.round(durationMs),
        ...(details.error ? { error: details.error } : {}),
        ...(details.artifacts?.length ? { artifacts: details.artifacts } : {}),
        ...(details.nextActions?.length ? { nextActions: details.nextActions } : {}),
        ...(shown ? { preview: shown.slice(0, TOOL_PREVIEW_CHARS) } : {}),
      }),
  };
}
