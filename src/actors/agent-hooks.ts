import type { AssistantMessage, ChatMessage, ToolChoice } from "../model/types.js";
import type { CommandHooks } from "../tools/command-hooks.js";
import type { PlannedCall } from "../tools/plan.js";
import { type ToolResult, toolError } from "../tools/tool.js";

/** Who a hook is called for. */
export interface HookContext {
  runId: string;
  agentId: string;
  /** The agent's name in config. */
  agent: string;
}

/**
 * Hooks as functions, for programs that embed Troupe (the library API). Each is optional and may be
 * async; what it returns changes the run, as documented on each.
 */
export interface AgentHooks {
  /** Return `{block: reason}` to refuse the call (the model reads the reason), or `{args}` to change its arguments. */
  beforeToolCall?(
    context: HookContext & { tool: string; args: unknown },
  ): BeforeToolDecision | undefined | Promise<BeforeToolDecision | undefined>;
  /** Return a result to use in place of the tool's. */
  afterToolCall?(
    context: HookContext & { tool: string; args: unknown; result: ToolResult },
  ): ToolResult | undefined | Promise<ToolResult | undefined>;
  /** Return true to stop after this model turn (its tool calls, if any, are not run). */
  shouldStopAfterTurn?(
    context: HookContext & { turn: number; message: AssistantMessage },
  ): boolean | Promise<boolean>;
  /**
   * Return a model to use for the next call, the messages to send (to trim the context), or how the
   * model may use its tools on that call (`toolChoice`, in place of the agent's), or any of these.
   */
  prepareNextTurn?(
    context: HookContext & { model: string; messages: ChatMessage[] },
  ): NextTurn | undefined | Promise<NextTurn | undefined>;
}

export type BeforeToolDecision = { block: string } | { args: Record<string, unknown> };

export interface NextTurn {
  model?: string;
  messages?: ChatMessage[];
  /** `auto`, `required`, `none` or a tool's name; sent only on a turn that offers tools. */
  toolChoice?: ToolChoice;
}

/** The batch gate of one agent: troupe.yaml's command hooks first, then the function hooks. */
export function toolGate(
  commands: CommandHooks | undefined,
  functions: AgentHooks | undefined,
  context: HookContext,
) {
  if ((!commands || commands.empty) && !functions?.beforeToolCall && !functions?.afterToolCall)
    return undefined;
  const argsOf = (call: PlannedCall) => {
    try {
      return JSON.parse(call.arguments || "{}") as unknown;
    } catch {
      return call.arguments;
    }
  };
  return {
    async before(call: PlannedCall): Promise<{ blocked?: ToolResult; call?: PlannedCall } | undefined> {
      const blocked = commands && !commands.empty ? await commands.beforeTool(call, context) : undefined;
      if (blocked) return { blocked };
      const decision = await functions?.beforeToolCall?.({ ...context, tool: call.name, args: argsOf(call) });
      if (!decision) return undefined;
      if ("block" in decision)
        return { blocked: toolError(decision.block, "do not retry this call as it is; find another way") };
      return { call: { ...call, arguments: JSON.stringify(decision.args) } };
    },
    async after(call: PlannedCall, result: ToolResult): Promise<ToolResult> {
      const fromCommands =
        commands && !commands.empty ? await commands.afterTool(call, result, context) : result;
      return (
        (await functions?.afterToolCall?.({
          ...context,
          tool: call.name,
          args: argsOf(call),
          result: fromCommands,
        })) ?? fromCommands
      );
    },
  };
}
