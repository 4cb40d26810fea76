import type { z } from "zod";
import type { ApprovalPolicy } from "../config/schema.js";
import type { ToolCall } from "../model/types.js";
import { decide, type PolicyDecision } from "../safety/policy.js";
import type { ToolEffect } from "./catalog.js";
import { type ToolRegistry, type ToolResult, toolError } from "./tool.js";

/** One call of a batch, checked before anything runs. */
export interface PlannedCall {
  id: string;
  name: string;
  /** The raw arguments string, as the model sent it. */
  arguments: string;
  /** Unknown tools count as `execute`. */
  effect: ToolEffect;
  decision: PolicyDecision;
  /** Set when the call will not run: unknown tool, invalid arguments, or denied. */
  result?: ToolResult;
}

/**
 * Checks each call: the tool exists and is allowed to this agent (checked here, at invoke time, not
 * only when the tool list was built), the arguments parse and fit the schema, and the policy's
 * decision. Nothing runs here.
 */
export function planCalls(
  calls: readonly ToolCall[],
  registry: ToolRegistry,
  allowed: ReadonlySet<string>,
  policy: ApprovalPolicy,
  workspace = process.cwd(),
  /** Set when only read tools may run: why ("read-only", "in plan mode"). */
  readOnlyBecause?: string,
): PlannedCall[] {
  return calls.map((call) => {
    const name = call.function.name;
    const base = { id: call.id, name, arguments: call.function.arguments };
    // Refused for what it does even when it is not this agent's: the reason is the clearer answer.
    const registered = registry.get(name);
    if (readOnlyBecause && registered && registered.effect !== "read") {
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
    const tool = allowed.has(name) ? registered : undefined;
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
    const problem = checkArguments(tool.parameters, call.function.arguments);
    if (problem) {
      const shape = JSON.stringify(registry.spec(name)?.parameters ?? {});
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
    const judgement = tool.judge?.(parseArguments(tool.parameters, call.function.arguments), workspace);
    const { decision, reason } = decide(policy, tool.effect, judgement);
    const planned: PlannedCall = { ...base, effect: tool.effect, decision };
    if (decision === "deny") {
      planned.result = toolError(
        reason ?? `${name} is not allowed under the "${policy}" approval policy`,
        "do without this call, or ask the user to change the approval policy",
      );
    }
    return planned;
  });
}

function checkArguments(schema: z.ZodType, raw: string): string | undefined {
  let args: unknown;
  try {
    args = raw.trim() === "" ? {} : JSON.parse(raw);
  } catch {
    return "the arguments are not valid JSON";
  }
  const parsed = schema.safeParse(args);
  if (parsed.success) return undefined;
  return parsed.error.issues
    .map((issue) => {
      const where = issue.path.length ? issue.path.join(".") : "arguments";
      return `${where}: ${issue.message}`;
    })
    .join("; ");
}

/** Parses arguments that `planCalls` accepted. */
export function parseArguments(schema: z.ZodType, raw: string): unknown {
  return schema.parse(raw.trim() === "" ? {} : JSON.parse(raw));
}
