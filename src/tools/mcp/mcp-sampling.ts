import type { CreateMessageRequest, CreateMessageResult } from "@modelcontextprotocol/sdk/types.js";
import type { McpServerConfig } from "../../config/mcp-server-schema.js";
import { type Elicitor, type Sampler, SamplingRefusedError, type SamplingRequest } from "../tool.js";

/*
 * MCP's sampling, as Troupe answers it: a server asks for a completion while one of its tools runs
 * for an agent, and that agent answers it (asked or refused as a call of `SERVER__sampling` is, made
 * with its own model, charged to its budget). A request with no call of that server running, or with
 * calls of several agents running, has no agent to answer it and is refused.
 */

/** JSON-RPC's error for "the user rejected the sampling request", as MCP's spec names it. */
export const SAMPLING_REJECTED = -1;

/** A tool call of a server that is running: who may answer its sampling requests and questions. */
export interface RunningCall {
  agentId: string;
  sample?: Sampler | undefined;
  elicit?: Elicitor | undefined;
}

/**
 * The call whose agent answers a server's request now (`sample`: a sampling request, `elicit`: a
 * question), or why none does.
 */
export function answeringCall(
  running: Iterable<RunningCall>,
  what: "sample" | "elicit" = "sample",
): RunningCall | { refused: string } {
  const calls = [...running];
  const agents = new Set(calls.map((call) => call.agentId));
  const requests = what === "sample" ? "sampling requests" : "questions for the user";
  if (calls.length === 0)
    return { refused: `troupe answers ${requests} only while one of this server's tools runs` };
  if (agents.size > 1)
    return {
      refused: `tools of this server run for ${agents.size} agents at once: troupe cannot tell which one asks`,
    };
  const call = calls.find((c) => c[what] !== undefined);
  return call ?? { refused: `the agent whose tool runs does not answer ${requests}` };
}

type Params = CreateMessageRequest["params"];
type Content = Params["messages"][number]["content"];

/** The request as the agent's host takes it: each message as text (what is not text, described). */
export function samplingRequestOf(server: string, config: McpServerConfig, params: Params): SamplingRequest {
  const messages = params.messages.map((message) => ({
    role: message.role,
    text: textOf(message.content),
  }));
  return {
    server,
    ...(config.autoApprove.includes("sampling")
      ? { autoApproved: `autoApprove of the MCP server "${server}" names sampling` }
      : {}),
    messages,
    ...(params.systemPrompt ? { systemPrompt: params.systemPrompt } : {}),
    maxTokens: params.maxTokens,
  };
}

function textOf(content: Content): string {
  const parts = Array.isArray(content) ? content : [content];
  return parts
    .map((part) => {
      if (part.type === "text") return part.text;
      if (part.type === "image" || part.type === "audio")
        return `[${part.type} ${part.mimeType}, ${Math.floor((part.data.length * 3) / 4)} bytes, not shown to the model]`;
      return `[${part.type}]`;
    })
    .join("\n");
}

/** The answer as MCP's result: the assistant's text, the model that wrote it, and why it ended. */
export function samplingResultOf(answer: Awaited<ReturnType<Sampler>>): CreateMessageResult {
  return {
    role: "assistant",
    content: { type: "text", text: answer.text },
    model: answer.model,
    stopReason: answer.stopReason,
  };
}

/** Whether an error is a refusal to sample (said to the server as a rejection), not a failure. */
export function isRefusal(error: unknown): error is SamplingRefusedError {
  return error instanceof SamplingRefusedError;
}
