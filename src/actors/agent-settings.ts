import type { SandboxSettings } from "../approvals/policy.js";
import type { AgentDefinition } from "../config/agent-schema.js";
import { effectiveBudget } from "../config/budget.js";
import type { Budget } from "../config/budget-schema.js";
import type { ApprovalPolicy } from "../config/policy-schemas.js";
import type { TroupeConfig } from "../config/schema.js";
import type { CompactionSettings } from "../context/compaction.js";
import type { ResolvedModel } from "../model/model-router.js";
import type { SandboxMode } from "../sandbox/plan.js";
import type { StartAgentOptions } from "./agent-deps.js";

/** How one agent runs, worked out from its definition, the run's options and troupe.yaml. */
export interface ResolvedAgentSettings {
  /** The agent's own `approval`, else the run's, else troupe.yaml's. */
  policy: ApprovalPolicy;
  /** The model, then its fallbacks. */
  chain: string[];
  model: ResolvedModel;
  compaction: CompactionSettings;
  /** Tokens kept free for the reply when checking whether to compact. */
  reply: number;
  /** 0 for the agent a run starts with; a subagent is one deeper than its parent. */
  depth: number;
  mode: "act" | "plan";
  budget: Budget;
  /** Why it may only read ("read-only", "in plan mode"); undefined when it may change things. */
  readOnlyBecause: string | undefined;
  sandboxMode: SandboxMode | undefined;
  /** What its sandboxed calls start from. */
  sandbox: Omit<SandboxSettings, "readOnly">;
}

/**
 * The settings of an agent about to start (or be resumed): a pure function of what it is given.
 * `resolveModel` says what a model's name stands for (its provider and window); `sandboxUnavailable`
 * why this process has no sandbox, when it has none.
 */
export function resolveAgentSettings(
  config: TroupeConfig,
  options: Pick<
    StartAgentOptions,
    "definition" | "approval" | "depth" | "budget" | "mode" | "sandbox" | "restore"
  >,
  resolveModel: (id: string) => ResolvedModel,
  sandboxUnavailable: string | undefined,
): ResolvedAgentSettings {
  const { definition } = options;
  const chain = [definition.model ?? config.defaultModel, ...definition.fallbackModels];
  const model = resolveModel(chain[0] as string);
  const depth = options.depth ?? 0;
  const mode = options.mode ?? definition.mode ?? "act";
  const planning = mode === "plan";
  const given =
    options.restore?.budget ?? options.budget ?? effectiveBudget(definition.budget, config.defaults.budget);
  const budget = planning
    ? { ...given, maxTurns: Math.min(given.maxTurns ?? Number.POSITIVE_INFINITY, config.plan.maxTurns) }
    : given;
  const sandboxMode = options.sandbox ?? definition.sandbox ?? config.sandbox.mode;
  return {
    policy: definition.approval ?? options.approval ?? config.approval.policy,
    chain,
    model,
    compaction: { contextWindow: model.contextWindow },
    reply: Math.min(4096, Math.floor(model.contextWindow * 0.1)),
    depth,
    mode,
    budget,
    readOnlyBecause: readOnlyBecause(definition, depth, planning),
    sandboxMode,
    sandbox: { unavailable: sandboxUnavailable, mode: sandboxMode, network: config.sandbox.network },
  };
}

/** Every subagent is read-only, whatever its YAML says; so is an agent marked readOnly, and one planning. */
function readOnlyBecause(definition: AgentDefinition, depth: number, planning: boolean): string | undefined {
  if (planning) return "in plan mode";
  return depth > 0 || definition.readOnly ? "read-only" : undefined;
}
