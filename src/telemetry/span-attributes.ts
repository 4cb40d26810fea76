import type { Attributes } from "@opentelemetry/api";
import type { AgentEvent, AgentEventMap } from "../events/agent-events.js";

/**
 * The attribute names of the OpenTelemetry GenAI semantic conventions that Troupe's spans and metrics
 * carry (written out: the conventions are still marked experimental, and their package asks that
 * such names be copied rather than imported). Troupe's own are under `troupe.`; docs/telemetry.md
 * lists every one.
 */
export const ATTR = {
  operation: "gen_ai.operation.name",
  provider: "gen_ai.provider.name",
  agentName: "gen_ai.agent.name",
  agentId: "gen_ai.agent.id",
  conversationId: "gen_ai.conversation.id",
  workflowName: "gen_ai.workflow.name",
  requestModel: "gen_ai.request.model",
  responseModel: "gen_ai.response.model",
  finishReasons: "gen_ai.response.finish_reasons",
  inputTokens: "gen_ai.usage.input_tokens",
  outputTokens: "gen_ai.usage.output_tokens",
  cachedInputTokens: "gen_ai.usage.cache_read.input_tokens",
  tokenType: "gen_ai.token.type",
  inputMessages: "gen_ai.input.messages",
  outputMessages: "gen_ai.output.messages",
  toolName: "gen_ai.tool.name",
  toolCallId: "gen_ai.tool.call.id",
  toolType: "gen_ai.tool.type",
  toolArguments: "gen_ai.tool.call.arguments",
  toolResult: "gen_ai.tool.call.result",
  runId: "troupe.run.id",
  costUsd: "troupe.cost_usd",
} as const;

/** An `invoke_agent` span's attributes, from the agent's first event. */
export function agentAttributes(event: AgentEvent<"agent.started">): Attributes {
  const { data } = event;
  return {
    [ATTR.operation]: "invoke_agent",
    [ATTR.agentName]: data.name,
    [ATTR.agentId]: event.agentId,
    [ATTR.conversationId]: event.runId,
    [ATTR.requestModel]: data.model,
    [ATTR.runId]: event.runId,
    "troupe.agent.depth": data.depth,
    ...(data.parentId ? { "troupe.agent.parent_id": data.parentId } : {}),
    ...(data.sandbox ? { "troupe.sandbox.mode": data.sandbox } : {}),
  };
}

/** A `chat` span's attributes, from its `model.completed`. */
export function chatAttributes(data: AgentEventMap["model.completed"], requested: string): Attributes {
  return {
    [ATTR.requestModel]: requested,
    [ATTR.responseModel]: data.model,
    [ATTR.inputTokens]: data.usage.inputTokens,
    [ATTR.outputTokens]: data.usage.outputTokens,
    [ATTR.cachedInputTokens]: data.usage.cachedInputTokens,
    [ATTR.finishReasons]: [data.finishReason],
    [ATTR.costUsd]: data.usage.costUsd,
    "troupe.tool_calls": data.toolCalls,
  };
}

/** What an agent's stop adds to its `invoke_agent` (and a lead's `invoke_workflow`) span. */
export function stopAttributes(output: AgentEventMap["agent.stopped"]): Attributes {
  return {
    "troupe.stop.reason": output.reason,
    [ATTR.inputTokens]: output.usage.inputTokens,
    [ATTR.outputTokens]: output.usage.outputTokens,
    [ATTR.cachedInputTokens]: output.usage.cachedInputTokens,
    [ATTR.costUsd]: output.usage.costUsd,
    "troupe.turns": output.turns,
    "troupe.tool_calls": output.toolCalls,
    "troupe.total.input_tokens": output.total.usage.inputTokens,
    "troupe.total.output_tokens": output.total.usage.outputTokens,
    "troupe.total.cost_usd": output.total.usage.costUsd,
    ...(output.limit ? { "troupe.stop.limit": output.limit } : {}),
  };
}

/** An `execute_tool` span's attributes, from its `tool.requested`; `content`: with its arguments. */
export function toolAttributes(
  data: AgentEventMap["tool.requested"],
  sandbox: string | undefined,
  content: boolean,
): Attributes {
  const { callId, name, effect, decision } = data;
  return {
    [ATTR.operation]: "execute_tool",
    [ATTR.toolName]: name,
    [ATTR.toolCallId]: callId,
    // An MCP server's tools are named `server__tool`: the conventions call them extensions.
    [ATTR.toolType]: name.includes("__") ? "extension" : "function",
    "troupe.tool.effect": effect,
    "troupe.tool.decision": decision,
    ...(sandbox !== undefined ? { "troupe.sandbox.mode": sandbox } : {}),
    ...(content ? { [ATTR.toolArguments]: data.arguments } : {}),
  };
}

/**
 * What an event of a running call (its progress, an MCP server's sampling or question) says, as the
 * attributes of an event on the call's span: its words and numbers under `troupe.`, a sampling's tokens.
 */
export function noteAttributes(
  data: AgentEventMap["tool.progress" | "sampling.finished" | "elicitation.finished"],
): Attributes {
  const attributes: Attributes = {};
  for (const [key, value] of Object.entries(data))
    if (key !== "callId" && (typeof value === "string" || typeof value === "number"))
      attributes[`troupe.${key}`] = value;
  if ("usage" in data && data.usage) {
    attributes[ATTR.inputTokens] = data.usage.inputTokens;
    attributes[ATTR.outputTokens] = data.usage.outputTokens;
  }
  return attributes;
}
