import { ulid } from "ulid";
import { createActor, fromPromise } from "xstate";
import type { Bus } from "../bus/bus.js";
import { makeEnvelope } from "../bus/envelope.js";
import type { AgentDefinition, ApprovalPolicy, Budget, TroupeConfig } from "../config/schema.js";
import { type CompactionSettings, compactMessages, overThreshold } from "../context/compaction.js";
import { buildSystemPrompt } from "../context/system-prompt.js";
import { countToolSpecTokens } from "../context/tokens.js";
import type { Logger } from "../log.js";
import { agentMachine, totalSpend } from "../machines/agent-machine.js";
import type { AgentOutput, CompactionInput, ModelTurn, ModelTurnInput } from "../machines/agent-types.js";
import type { ModelRouter } from "../model/model-router.js";
import type { ToolSpec } from "../model/types.js";
import type { Approver } from "../safety/approver.js";
import type { Redactor } from "../safety/redact.js";
import { UNTRUSTED_NOTE } from "../safety/untrusted.js";
import { type Skill, skillCatalogue } from "../skills/skills.js";
import { type PlannedCall, parseArguments, planCalls } from "../tools/plan.js";
import { runBatch } from "../tools/run-batch.js";
import type { CallPreview, ToolRegistry } from "../tools/tool.js";
import { EventPublisher } from "./event-publisher.js";
import { type SubagentLimits, subagentTools } from "./subagents.js";
import { summarizer } from "./summarizer.js";

/** What every agent of a process shares. */
export interface AgentDeps {
  bus: Bus;
  models: ModelRouter;
  tools: ToolRegistry;
  config: TroupeConfig;
  approver: Approver;
  workspace: string;
  log: Logger;
  /** Secrets out of events, tool results and approval requests. */
  redactor: Redactor;
  /** Directories in the workspace no tool may change (the config dir). */
  protectedDirs: string[];
  /** Every skill there is; an agent's `skills:` picks from them. */
  skills: ReadonlyMap<string, Skill>;
  /** Every agent definition, for the subagents an agent lists. */
  agents: ReadonlyMap<string, AgentDefinition>;
  limits: SubagentLimits;
}

export interface StartAgentOptions {
  definition: AgentDefinition;
  task: string;
  runId: string;
  agentId?: string;
  parentId?: string;
  /** The run's policy; the agent's own `approval` overrides it. */
  approval?: ApprovalPolicy;
  /** 0 for the agent a run starts with; a subagent is one deeper than its parent. */
  depth?: number;
  /** The budget carved out for a subagent; the definition's otherwise. */
  budget?: Budget;
}

/** A running agent: its id, its result when it stops, and the commands it takes. */
export interface AgentHandle {
  readonly runId: string;
  readonly agentId: string;
  readonly done: Promise<AgentOutput>;
  steer(text: string): void;
  followUp(text: string): void;
  abort(reason?: string): void;
  /** The machine's persisted snapshot: everything the agent is, as JSON. */
  snapshot(): unknown;
}

/**
 * Hosts one agent machine: provides its actors (model call, approval wait, tool batch, compaction),
 * publishes its events, and resolves `done` with its output once every event is in the log.
 */
export function startAgent(deps: AgentDeps, options: StartAgentOptions): AgentHandle {
  const { definition, runId } = options;
  const agentId = options.agentId ?? `${definition.name}-${ulid().slice(-8).toLowerCase()}`;
  const log = deps.log.child({ component: "agent", runId, agentId });
  const events = new EventPublisher(deps.bus, runId, agentId, options.parentId, log, deps.redactor);
  const policy = definition.approval ?? options.approval ?? deps.config.approval.policy;
  const chain = [definition.model ?? deps.config.defaultModel, ...definition.fallbackModels];
  const primary = deps.models.resolve(chain[0] as string);
  const compaction: CompactionSettings = { contextWindow: primary.contextWindow };
  const reply = Math.min(4096, Math.floor(primary.contextWindow * 0.1));
  const depth = options.depth ?? 0;
  const budget = options.budget ?? definition.budget;
  // Every subagent is read-only, whatever its YAML says; so is an agent marked readOnly.
  const readOnly = depth > 0 || definition.readOnly;
  const startedAt = Date.now();
  const children = subagentTools(
    definition.subagents
      .map((name) => deps.agents.get(name))
      .filter((child): child is AgentDefinition => child !== undefined),
    {
      bus: deps.bus,
      runId,
      agentId,
      depth,
      budget,
      limits: deps.limits,
      events,
      startedAt,
      spent: () => totalSpend(actor.getSnapshot().context),
      charge: (delta) => actor.send({ type: "CHILD_SPENT", ...delta }),
      spawn: (child) =>
        startAgent(deps, {
          definition: child.definition,
          task: child.task,
          runId,
          agentId: child.childId,
          parentId: child.parentId,
          depth: child.depth,
          budget: child.budget,
        }),
    },
  );
  const registry = children.tools.length > 0 ? deps.tools.with(children.tools) : deps.tools;
  const tools = toolView([...definition.tools, ...children.tools.map((tool) => tool.name)], registry);

  const machine = agentMachine.provide({
    actors: {
      callModel: fromPromise<ModelTurn, ModelTurnInput>(async ({ input, signal }) => {
        const response = await deps.models.call(chain, {
          messages: input.messages,
          ...(input.withTools ? { tools: tools().specs } : {}),
          signal,
          onDelta: (text) => events.emit("model.delta", { text }),
        });
        const toolCalls = response.message.tool_calls ?? [];
        events.emit("model.completed", {
          model: response.model,
          usage: response.usage,
          finishReason: response.finishReason,
          toolCalls: toolCalls.length,
        });
        const plan = planCalls(
          toolCalls,
          registry,
          input.withTools ? tools().allowed : new Set(),
          policy,
          deps.workspace,
          readOnly,
        );
        for (const call of plan) events.emit("tool.requested", requested(call));
        return { ...response, plan };
      }),
      awaitApproval: fromPromise(
        async ({ input, signal }: { input: { calls: PlannedCall[] }; signal: AbortSignal }) => {
          const decisions = [];
          for (const call of input.calls) {
            const preview = await previewOf(deps, call);
            const request = {
              runId,
              agentId,
              callId: call.id,
              tool: call.name,
              arguments: deps.redactor.redact(call.arguments),
              effect: call.effect,
              detail: deps.redactor.redact(preview.detail),
              paths: preview.paths,
            };
            const { runId: _r, agentId: _a, tool, ...shown } = request;
            events.emit("approval.requested", { ...shown, name: tool });
            const answer = await deps.approver.decide(request, signal);
            events.emit("approval.decided", { callId: call.id, ...answer });
            decisions.push({
              id: call.id,
              approved: answer.approved,
              ...(answer.reason ? { reason: answer.reason } : {}),
            });
          }
          return decisions;
        },
      ),
      runTools: fromPromise(
        async ({ input, signal }: { input: { calls: PlannedCall[] }; signal: AbortSignal }) => {
          children.beginBatch(input.calls.filter((call) => call.name.startsWith("subagent_")).length);
          return runBatch(input.calls, {
            registry,
            context: {
              runId,
              agentId,
              workspace: deps.workspace,
              protectedDirs: deps.protectedDirs,
              ...(definition.skills ? { skills: definition.skills } : {}),
            },
            signal,
            redactor: deps.redactor,
            hooks: {
              onStart: (call) => events.emit("tool.started", { callId: call.id, name: call.name }),
              onFinish: (call, result, durationMs) =>
                events.emit("tool.finished", {
                  callId: call.id,
                  name: call.name,
                  ok: result.ok,
                  durationMs: Math.round(durationMs),
                  ...(result.error ? { error: result.error } : {}),
                }),
            },
          });
        },
      ),
      compact: fromPromise(async ({ input, signal }: { input: CompactionInput; signal: AbortSignal }) => {
        const result = await compactMessages(
          input.messages,
          compaction,
          summarizer(deps.models, chain),
          signal,
        );
        events.emit("context.compacted", {
          tokensBefore: result.tokensBefore,
          tokensAfter: result.tokensAfter,
          pruned: result.pruned,
          summarized: result.summarized,
        });
        return { messages: result.messages, usage: result.usage };
      }),
    },
    guards: {
      needsCompaction: ({ context }) => overThreshold(context.messages, tools().tokens + reply, compaction),
    },
  });

  const actor = createActor(machine, {
    input: {
      runId,
      agentId,
      name: definition.name,
      systemPrompt: buildSystemPrompt(definition, deps.workspace, [
        UNTRUSTED_NOTE,
        ...catalogueFor(definition, deps),
      ]),
      budget,
    },
  });
  events.emit("agent.started", {
    name: definition.name,
    model: primary.id,
    task: options.task,
    budget,
    depth,
    ...(options.parentId ? { parentId: options.parentId } : {}),
  });

  // Commands reach an agent on its control subjects, from its parent or any client (acked by reply).
  const control = deps.bus.reply(deps.bus.subjects.controls(runId, agentId), (request, subject) => {
    const command = subject.slice(subject.lastIndexOf(".") + 1);
    const text = String((request.data as { text?: unknown; reason?: unknown } | null)?.text ?? "");
    if (command === "abort")
      actor.send({ type: "ABORT", reason: String((request.data as { reason?: unknown })?.reason ?? "") });
    else if (command === "steer") actor.send({ type: "STEER", text });
    else if (command === "follow_up") actor.send({ type: "FOLLOW_UP", text });
    else throw new Error(`unknown command "${command}"`);
    return makeEnvelope({ runId, agentId, seq: 0, type: "ack", data: { command } });
  });

  let state = "idle";
  let reported = JSON.stringify(totalSpend(actor.getSnapshot().context));
  const done = new Promise<AgentOutput>((resolve) => {
    actor.subscribe({
      next: (snapshot) => {
        const next = String(snapshot.value);
        if (next !== state) {
          events.emit("state.changed", { from: state, to: next });
          state = next;
        }
        const spend = totalSpend(snapshot.context);
        const key = JSON.stringify(spend);
        if (key !== reported) {
          reported = key;
          events.emit("usage.updated", {
            usage: spend.usage,
            toolCalls: spend.toolCalls,
            turns: snapshot.context.turns,
          });
        }
        if (snapshot.status === "done" && snapshot.output) {
          const output = snapshot.output;
          control.unsubscribe();
          events.emit("agent.stopped", { ...output });
          log.debug({ reason: output.reason, turns: output.turns }, "agent stopped");
          void events.flushed().then(() => resolve(output));
        }
      },
      error: (error) => {
        log.error({ err: error }, "the agent machine failed");
        control.unsubscribe();
        const context = actor.getSnapshot().context;
        const output: AgentOutput = {
          reason: "failed",
          result: "",
          usage: context.usage,
          turns: context.turns,
          toolCalls: context.toolCalls,
          total: totalSpend(context),
          error: error instanceof Error ? error.message : String(error),
        };
        events.emit("agent.stopped", output);
        void events.flushed().then(() => resolve(output));
      },
    });
  });
  actor.start();
  actor.send({ type: "START", task: options.task });

  return {
    runId,
    agentId,
    done,
    steer: (text) => actor.send({ type: "STEER", text }),
    followUp: (text) => actor.send({ type: "FOLLOW_UP", text }),
    abort: (reason) => actor.send({ type: "ABORT", ...(reason ? { reason } : {}) }),
    // What is stored is redacted like everything else that leaves the process.
    snapshot: () => deps.redactor.redactDeep(actor.getPersistedSnapshot()),
  };
}

/**
 * The tools an agent has now: its list, where `server__*` stands for every tool of that MCP server,
 * against what is registered (an MCP server's tools come and go). Recomputed only when the
 * registered names change.
 */
function toolView(list: readonly string[], registry: ToolRegistry) {
  const matches = (name: string) =>
    list.includes(name) || list.some((entry) => entry.endsWith("__*") && name.startsWith(entry.slice(0, -1)));
  let key = "";
  let view = { allowed: new Set<string>(), specs: [] as ToolSpec[], tokens: 0 };
  return () => {
    const names = registry.names().filter(matches);
    const nextKey = names.join("\n");
    if (nextKey !== key || names.length === 0) {
      key = nextKey;
      const specs = names
        .map((name) => registry.spec(name))
        .filter((spec): spec is ToolSpec => spec !== undefined);
      view = { allowed: new Set(names), specs, tokens: countToolSpecTokens(specs) };
    }
    return view;
  };
}

/** The catalogue of the skills this agent may load, when it has the load_skill tool. */
function catalogueFor(definition: AgentDefinition, deps: AgentDeps): string[] {
  if (!definition.tools.includes("load_skill")) return [];
  const visible = [...deps.skills.values()].filter(
    (skill) => !definition.skills || definition.skills.includes(skill.name),
  );
  const catalogue = skillCatalogue(visible);
  return catalogue ? [catalogue] : [];
}

/** What the person deciding sees: the tool's own preview (a diff, the command), else the arguments. */
async function previewOf(deps: AgentDeps, call: PlannedCall): Promise<CallPreview> {
  const tool = deps.tools.get(call.name);
  try {
    if (tool?.preview) {
      const args = parseArguments(tool.parameters, call.arguments);
      return await tool.preview(args, { workspace: deps.workspace, protectedDirs: deps.protectedDirs });
    }
  } catch (error) {
    deps.log.debug({ err: error, tool: call.name }, "no preview");
  }
  return { detail: call.arguments, paths: [] };
}

function requested(call: PlannedCall) {
  return {
    callId: call.id,
    name: call.name,
    arguments: call.arguments,
    effect: call.effect,
    decision: call.decision,
    ...(call.result?.error ? { error: call.result.error } : {}),
  };
}
