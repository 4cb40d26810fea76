import type { AgentDefinition } from "../config/agent-schema.js";
import { checkOutput } from "../config/output-schema.js";
import { type CompactionSettings, overThreshold } from "../context/compaction.js";
import { ContextLevels, contextPercent } from "../context/context-levels.js";
import type {
  ApprovalDecision,
  CompactionInput,
  CompactionOutput,
  ModelTurn,
  ModelTurnInput,
  ToolBatchOutput,
} from "../machines/agent-types.js";
import { estimateMessagesTokens } from "../model/tokens.js";
import { addUsage, type CallImages, type ChatMessage, type ToolImage } from "../model/types.js";
import type { Confinement } from "../sandbox/plan.js";
import type { ActiveSkills } from "../skills/active-skills.js";
import { plainOutcome } from "../tools/call-outcome.js";
import type { PlannedCall } from "../tools/plan.js";
import { type BatchOptions, runBatch } from "../tools/run-batch.js";
import type { ToolRegistry } from "../tools/tool.js";
import type { AgentDeps, CompactionReport, ToolPlace } from "./agent-deps.js";
import { compactAndReport, requested, toolEventObserver, type toolView } from "./agent-tools.js";
import { withOwnCallIds } from "./call-ids.js";
import type { Clearance } from "./clearance.js";
import type { EventPublisher } from "./event-publisher.js";
import type { HostedActors } from "./hosted-machine.js";
import { summarizer } from "./summarizer.js";

/** How many tool calls' images an agent holds for a model that takes images. */
const KEPT_IMAGES = 8;

/** What one agent's actors work with: made once by its host (`AgentHost`). */
export interface AgentActorsSetup {
  models: AgentDeps["models"];
  /** Hooks as functions (the library API). */
  hooks?: AgentDeps["agentHooks"];
  redactor: AgentDeps["redactor"];
  /** Where its tools work. */
  place: ToolPlace & { readHardLinks: boolean };
  definition: AgentDefinition;
  runId: string;
  agentId: string;
  events: EventPublisher;
  /** The model and its fallbacks. */
  chain: string[];
  compaction: CompactionSettings;
  /** Tokens kept free for the reply when checking whether to compact. */
  reply: number;
  /** Every tool the agent may call by name (its subagents' and modules' too). */
  registry: ToolRegistry;
  /** The tools it has now. */
  tools: ReturnType<typeof toolView>;
  clearance: Clearance;
  /** The directories of the skills whose files it may read (`skill:NAME/PATH`). */
  skillDirs: Map<string, string>;
  /** The skills it has loaded, told of each load. */
  skills: Pick<ActiveSkills, "loaded">;
  journal?: BatchOptions["journal"];
  gate?: BatchOptions["gate"];
  /** A read-only agent's: the most any of its commands may be given, checked where each starts. */
  sandboxLimit?: Confinement;
  /** Model calls already made (a resumed agent's). */
  turns: number;
  /** Restored from a snapshot: its first batch says at its end what was cut short. */
  resumed: boolean;
  /** Its tools run only once this settles, and none if it rejects (`RunOptions.toolsAfter`). */
  toolsAfter?: Promise<unknown>;
  /** How it answers the sampling requests of a call's MCP server, by call. */
  sampler?: BatchOptions["sampler"];
  /** How it puts the questions of a call's MCP server to the user, by call. */
  elicitor?: BatchOptions["elicitor"];
}

/**
 * The actors one agent's machine invokes, one method each (model call, approval wait, tool batch,
 * compaction, the answer cut off at the wall), with what they keep between calls.
 */
export class AgentActors implements HostedActors {
  #turns: number;
  #firstAfterResume: boolean;
  /** The model call in flight and what it has streamed: kept when the call is cut off (its text is the answer). */
  #streaming: { text: string } | undefined;
  #levels = new ContextLevels();

  /**
   * The images tool calls returned, by call, newest last: held in memory only (never in a snapshot or
   * the log), at most `KEPT_IMAGES` calls' worth, and shown to a model that takes images while the
   * results they came with are in the conversation.
   */
  #images: Map<string, ToolImage[]> | undefined;

  #keepImages(callId: string, images: ToolImage[]): void {
    this.#images ??= new Map();
    this.#images.set(callId, images);
    for (const oldest of this.#images.keys()) {
      if (this.#images.size <= KEPT_IMAGES) break;
      this.#images.delete(oldest);
    }
  }

  /** The images of the calls whose results `messages` hold (a compaction may have summarised others away). */
  #imagesFor(messages: ChatMessage[]): { images?: CallImages[] } {
    if (!this.#images) return {};
    const results = new Set(messages.flatMap((m) => (m.role === "tool" ? [m.tool_call_id] : [])));
    const images = [...this.#images]
      .filter(([callId]) => results.has(callId))
      .map(([callId, list]) => ({ callId, images: list }));
    return images.length ? { images } : {};
  }

  constructor(private readonly setup: AgentActorsSetup) {
    this.#turns = setup.turns;
    this.#firstAfterResume = setup.resumed;
  }

  async callModel(input: ModelTurnInput, signal: AbortSignal): Promise<ModelTurn> {
    const { models, hooks, definition, runId, agentId, events, chain, clearance } = this.setup;
    const hookContext = { runId, agentId, agent: definition.name };
    const next = await hooks?.prepareNextTurn?.({
      ...hookContext,
      model: chain[0] as string,
      messages: input.messages,
    });
    const messages = next?.messages ?? input.messages;
    const view = input.withTools ? this.setup.tools() : undefined;
    this.#reportContext(messages, view);
    const current = { text: "" };
    this.#streaming = current;
    const response = await models
      .call(next?.model ? [next.model, ...chain.slice(1)] : chain, {
        messages,
        ...(view ? { tools: view.specs } : {}),
        toolChoice: next?.toolChoice ?? definition.toolChoice,
        ...(definition.output ? { responseSchema: definition.output } : {}),
        ...this.#imagesFor(messages),
        signal,
        onDelta: (text) => {
          // Past a cut, nothing more is said: the answer is what had streamed when it came.
          if (signal.aborted) return;
          current.text += text;
          events.emit("model.delta", { text });
        },
        onReasoning: (text) => events.emit("model.reasoning", { text }),
        onRetry: (retry) => events.emit("model.retrying", retry),
      })
      .finally(() => {
        // A call cut off (aborted) keeps its text for partialAnswer; any other end leaves none.
        if (!signal.aborted && this.#streaming === current) this.#streaming = undefined;
      });
    this.#turns++;
    const journal = this.setup.journal;
    response.message = await withOwnCallIds(
      response.message,
      input.messages,
      async (id) => (await journal?.get(id)) !== undefined,
    );
    if (
      await hooks?.shouldStopAfterTurn?.({
        ...hookContext,
        turn: this.#turns,
        message: response.message,
      })
    ) {
      // Stopping here: the turn's tool calls are not run, so they leave the history too.
      const { tool_calls: _dropped, ...message } = response.message;
      response.message = message;
    }
    const toolCalls = response.message.tool_calls ?? [];
    events.emit("model.completed", {
      model: response.model,
      usage: response.usage,
      finishReason: response.finishReason,
      toolCalls: toolCalls.length,
      ...(response.truncatedToolCalls ? { truncatedToolCalls: true as const } : {}),
    });
    const plan = clearance.planBatch(toolCalls, input.withTools);
    for (const call of plan) events.emit("tool.requested", requested(call));
    const turn = { ...response, plan };
    return definition.output && plan.length === 0
      ? this.#withOutput(turn, definition.output, messages, input.withTools, signal)
      : turn;
  }

  /**
   * A final answer checked against the agent's `output` schema. One that does not fit is asked for
   * again once, with what is wrong and no tools (not for a budget's or loop's last answer, which has
   * no turn to spare): the second answer is the turn's, its cost added to the first's.
   */
  async #withOutput(
    turn: ModelTurn,
    schema: Record<string, unknown>,
    messages: ChatMessage[],
    again: boolean,
    signal: AbortSignal,
  ): Promise<ModelTurn> {
    const { models, chain, events } = this.setup;
    const first = checkOutput(schema, turn.message.content ?? "");
    const whole = !turn.message.refusal && turn.finishReason !== "error" && turn.finishReason !== "length";
    if ("value" in first || !again || !whole) return { ...turn, output: first };
    events.emit("output.retried", { problem: first.problem });
    const retry = await models.call(chain, {
      messages: [
        ...messages,
        turn.message,
        {
          role: "user",
          content: `Your answer does not fit the JSON Schema it must: ${first.problem}. Answer again with only the JSON.`,
        },
      ],
      responseSchema: schema,
      signal,
      onDelta: (text) => {
        if (!signal.aborted) events.emit("model.delta", { text });
      },
    });
    events.emit("model.completed", {
      model: retry.model,
      usage: retry.usage,
      finishReason: retry.finishReason,
      toolCalls: 0,
    });
    const { tool_calls: _none, ...message } = retry.message;
    return {
      ...turn,
      message,
      finishReason: retry.finishReason,
      usage: addUsage(turn.usage, retry.usage),
      output: checkOutput(schema, message.content ?? ""),
    };
  }

  awaitApproval(input: { calls: PlannedCall[] }, signal: AbortSignal): Promise<ApprovalDecision[]> {
    return this.setup.clearance.approve(input.calls, signal);
  }

  async runTools(input: { calls: PlannedCall[] }, signal: AbortSignal): Promise<ToolBatchOutput> {
    if (this.setup.toolsAfter) await this.setup.toolsAfter;
    const { place, redactor, definition, runId, agentId, events, registry, journal, gate } = this.setup;
    const { sampler, elicitor } = this.setup;
    const { run, refused } = await this.setup.clearance.clear(input.calls, signal);
    const ran = await runBatch(run, {
      registry,
      context: {
        runId,
        agentId,
        ...place,
        ...(definition.skills ? { skills: definition.skills } : {}),
        skillDirs: this.setup.skillDirs,
        skillLoaded: (skill) => this.setup.skills.loaded(skill),
        ...(this.setup.sandboxLimit ? { sandboxLimit: this.setup.sandboxLimit } : {}),
      },
      signal,
      redactor,
      ...(journal ? { journal } : {}),
      ...(gate ? { gate } : {}),
      ...(sampler ? { sampler } : {}),
      ...(elicitor ? { elicitor } : {}),
      observer: {
        ...toolEventObserver(events),
        onImages: (call, images) => this.#keepImages(call.id, images),
      },
    });
    // The first batch after a resume may say at its very end what the model is told of calls cut
    // short (tool.finished, outcome unknown): out before the state change to the model call, so
    // that change's events still leave ahead of the model request (stateReported).
    if (this.#firstAfterResume) {
      this.#firstAfterResume = false;
      await events.flushed();
    }
    const told = Object.entries(refused).map(([id, result]) => [id, plainOutcome(result)] as const);
    return { results: { ...Object.fromEntries(told), ...ran }, refused: Object.keys(refused) };
  }

  async compact(input: CompactionInput, signal: AbortSignal): Promise<CompactionOutput> {
    const { models, chain, compaction, events } = this.setup;
    if (input.reason !== "requested")
      return compactAndReport(input.messages, compaction, summarizer(models, chain), events, signal);
    // Asked for: everything but the last turn is summarised, however much room there is.
    const asked = { ...compaction, target: 0, keepRecent: 0 };
    try {
      const result = await compactAndReport(input.messages, asked, summarizer(models, chain), events, signal);
      const { tokensBefore, tokensAfter, summarized, pruned } = result;
      this.#compaction = { tokensBefore, tokensAfter, summarized, pruned };
      return result;
    } catch (error) {
      this.#compaction = { error: error instanceof Error ? error.message : String(error) };
      throw error;
    }
  }

  #compaction: CompactionReport | undefined;

  /** What the last compaction a person asked for did, once it ended. */
  compaction(): CompactionReport | undefined {
    return this.#compaction;
  }

  partialAnswer(): string {
    return this.#streaming?.text ?? "";
  }

  sendEvents(): void {
    this.setup.events.sendNow();
  }

  needsCompaction(messages: readonly ChatMessage[]): boolean {
    const { reply, compaction } = this.setup;
    const view = this.setup.tools();
    const overhead = { atMost: view.maxTokens + reply, exactly: () => view.tokens() + reply };
    return overThreshold(messages, overhead, compaction);
  }

  /** What the request fills of the window: an estimate from counts already made (no tokenizing here). */
  #reportContext(messages: readonly ChatMessage[], view: ReturnType<AgentActorsSetup["tools"]> | undefined) {
    const { events, compaction } = this.setup;
    const tokens = estimateMessagesTokens(messages) + (view ? view.estimate() : 0);
    const { contextWindow } = compaction;
    const percent = contextPercent(tokens, contextWindow);
    events.emit("context.usage", { tokens, contextWindow, percent });
    const level = this.#levels.next(percent);
    if (level) events.emit("context.warning", { level, tokens, contextWindow, percent });
  }
}
