import { decideCall } from "../approvals/decide-call.js";
import { callSubject, type PermissionRules } from "../approvals/permissions.js";
import type { PolicyDecision, SandboxSettings } from "../approvals/policy.js";
import type { ApprovalPolicy } from "../config/policy-schemas.js";
import type { ToolEffect } from "../config/tool-catalog.js";
import type { ToolCall } from "../model/types.js";
import type { Confinement } from "../sandbox/plan.js";
import { type ToolRegistry, type ToolResult, toolError } from "./tool.js";
import { parseArgs, ToolArgumentsError, type ToolSchema, unknownKeys } from "./tool-schema.js";

/** One call of a batch, checked before anything runs. */
export interface PlannedCall {
  id: string;
  name: string;
  /** The raw arguments string, as the model sent it. */
  arguments: string;
  /** Unknown tools count as `execute`. */
  effect: ToolEffect;
  /** The tool's calls leave this process (`Tool.remote`): journaled even when they only read. */
  remote?: boolean;
  decision: PolicyDecision;
  /** Set when the call will not run: unknown tool, invalid arguments, or denied. */
  result?: ToolResult;
  /** For a tool that runs in the sandbox: how this call runs. */
  sandbox?: Confinement;
  /**
   * Set when the call leaves the sandbox (the network, no sandbox, the sandbox off or missing): why.
   * The person is asked about it on its own: no earlier "always" covers it.
   */
  askBecause?: string;
}

export interface PlanOptions {
  /** Default: the process's working directory. */
  workspace?: string;
  /** Set when only read tools may run: why ("read-only", "in plan mode"). Sandboxed tools run read-only. */
  readOnlyBecause?: string | undefined;
  /** What this machine's sandbox can do and what is configured; default: available, no network. */
  sandbox?: Omit<SandboxSettings, "readOnly">;
  /** Set when no tool may be called at all (the final answer a used-up budget asks for): why. */
  noToolsBecause?: string | undefined;
  /**
   * The skill whose `allowed-tools` pre-approved this tool, if one did: a call the policy would ask
   * about runs without asking. Only an ask: a denial stays one, and a command leaving the sandbox, or
   * a call that could not be understood, is still asked about.
   */
  preApproved?: (tool: string) => string | undefined;
  /** The user's allow and deny rules (troupe.yaml's `permissions`). */
  permissions?: PermissionRules | undefined;
}

/**
 * Checks each call: the tool exists and is allowed to this agent (checked here, at invoke time, not
 * only when the tool list was built), the arguments parse and fit the schema, and the policy's
 * decision, with the sandbox a sandboxed tool's call will run in. Nothing runs here.
 */
export function planCalls(
  calls: readonly ToolCall[],
  registry: ToolRegistry,
  allowed: ReadonlySet<string>,
  policy: ApprovalPolicy,
  options: PlanOptions = {},
): PlannedCall[] {
  const { workspace = process.cwd(), readOnlyBecause } = options;
  const sandbox: SandboxSettings = {
    network: false,
    ...options.sandbox,
    readOnly: readOnlyBecause !== undefined,
  };
  return calls.map((call) => {
    const name = call.function.name;
    const base = { id: call.id, name, arguments: call.function.arguments };
    // Refused for what it does even when it is not this agent's: the reason is the clearer answer.
    const registered = registry.get(name);
    if (readOnlyBecause && registered && registered.effect !== "read" && !registered.sandboxed) {
      return {
        ...base,
        effect: registered.effect,
        decision: "deny",
        result: toolError(
          `${name} ${registered.effect === "write" ? "writes" : "executes"}, and this agent is ${readOnlyBecause}`,
          "use a read tool, or report back what should be done",
        ),
      };
    }
    if (options.noToolsBecause)
      return {
        ...base,
        effect: registered?.effect ?? "execute",
        decision: "deny",
        result: toolError(`no tool calls now: ${options.noToolsBecause}`, "answer with what you have"),
      };
    const tool = allowed.has(name) ? registered : undefined;
    // A tool of a server that is not running (this agent's, or one it never saw listed) says why.
    const unavailable = !registered || tool ? registry.unavailable(name) : undefined;
    if (unavailable)
      return {
        ...base,
        effect: tool?.effect ?? "execute",
        decision: "deny",
        result: toolError(unavailable, "try again after that, or do without this tool"),
      };
    if (!tool) {
      const available = [...allowed].filter((n) => registry.get(n)).sort();
      return {
        ...base,
        effect: "execute",
        decision: "deny",
        result: toolError(
          `unknown tool "${name}"`,
          `call one of the tools available: ${available.join(", ") || "(none)"}`,
        ),
      };
    }
    const shown = registry.spec(name)?.parameters ?? {};
    const problem = checkArguments(name, tool.parameters, shown, call.function.arguments);
    if (problem) {
      const shape = JSON.stringify(shown);
      return {
        ...base,
        effect: tool.effect,
        decision: "deny",
        result: toolError(
          `invalid arguments for ${name}: ${problem}`,
          `call it again with arguments of this shape: ${shape}`,
        ),
      };
    }
    const args = parseArguments(tool.parameters, call.function.arguments);
    const judgement = tool.judge?.(args, workspace);
    const subject = options.permissions ? callSubject(name, args, workspace) : undefined;
    const {
      decision,
      reason,
      next,
      sandbox: confinement,
    } = decideCall(
      { tool: name, effect: tool.effect, sandboxed: tool.sandboxed === true, judgement, subject },
      {
        policy,
        sandbox,
        autoApproved: (name) => registry.get(name)?.autoApproved,
        permissions: options.permissions,
        ...(options.preApproved ? { skillAllowed: options.preApproved } : {}),
      },
    );
    const planned: PlannedCall = {
      ...base,
      effect: tool.effect,
      ...(tool.remote ? { remote: true } : {}),
      decision,
      ...(confinement ? { sandbox: confinement } : {}),
      ...(decision === "ask" && reason ? { askBecause: reason } : {}),
    };
    if (decision === "deny") {
      planned.result = toolError(
        reason ?? `${name} is not allowed under the "${policy}" approval policy`,
        next ?? "do without this call, or ask the user to change the approval policy",
      );
    }
    return planned;
  });
}

/**
 * What is wrong with a call's arguments: not JSON, keys the schema the model was shown does not take
 * (refused, not dropped: the model learns the keys there are), or what the tool's schema says.
 */
function checkArguments(
  name: string,
  schema: ToolSchema,
  shown: Record<string, unknown>,
  raw: string,
): string | undefined {
  let args: unknown;
  try {
    args = raw.trim() === "" ? {} : JSON.parse(raw);
  } catch {
    return "the arguments are not valid JSON";
  }
  const unknown = unknownKeys(shown, args);
  if (unknown.length > 0) return unknown.join("; ");
  try {
    parseArgs(schema, args, name);
    return undefined;
  } catch (error) {
    if (error instanceof ToolArgumentsError) return error.message;
    throw error;
  }
}

/** Parses arguments that `planCalls` accepted; throws `ToolArgumentsError` for others (changed by a hook). */
export function parseArguments(schema: ToolSchema, raw: string): unknown {
  return parseArgs(schema, raw.trim() === "" ? {} : JSON.parse(raw));
}
