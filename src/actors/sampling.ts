import type { Decision } from "../approvals/policy.js";
import type { ApprovalDecision } from "../machines/agent-types.js";
import type { ChatMessage, Usage } from "../model/types.js";
import type { PlannedCall } from "../tools/plan.js";
import { type Sampler, SamplingRefusedError, type SamplingRequest } from "../tools/tool.js";
import type { AgentDeps } from "./agent-deps.js";
import type { EventPublisher } from "./event-publisher.js";

/** What an agent answers an MCP server's sampling requests with. */
export interface SamplingSetup {
  models: AgentDeps["models"];
  /** The agent's model and its fallbacks: a server's hints of a model are not followed. */
  chain: string[];
  events: EventPublisher;
  /** The policy's word on a call of `tool` (`SERVER__sampling`), allowed ahead by the operator when `autoApproved` says where. */
  decide(tool: string, autoApproved: string | undefined): Decision;
  /** Asks a person about the request, as a call of its own. */
  ask(call: PlannedCall, signal: AbortSignal): Promise<ApprovalDecision>;
  /** Charges what a completion cost to the agent, as its own turns are. */
  charge(usage: Usage): void;
  /** What the agent's budget leaves of tokens (undefined: no limit), or what it has spent when nothing is left. */
  left(): { tokens: number | undefined } | { spent: string };
}

/**
 * How one tool call's agent answers its server's sampling requests: each decided as a call of
 * `SERVER__sampling` (`autoApprove: [sampling]` of the server allows it, `permissions` may allow or
 * deny it, the policy asks under `ask` and `auto-edit`, denies under `never-ask`), then made with the
 * agent's model, at most as long as its budget allows, charged to it and told in `sampling.finished`.
 */
export function samplerFor(setup: SamplingSetup, call: Pick<PlannedCall, "id">): Sampler {
  let requests = 0;
  return async (request, signal) => {
    const tool = `${request.server}__sampling`;
    const finished = (data: Record<string, unknown>) =>
      setup.events.emit("sampling.finished", { callId: call.id, server: request.server, ...data });
    try {
      const left = setup.left();
      if ("spent" in left) throw new SamplingRefusedError(`the agent's budget is spent (${left.spent})`);
      await cleared(setup, request, { id: `${call.id}-sampling-${++requests}`, tool }, signal);
      const maxTokens =
        left.tokens === undefined ? request.maxTokens : Math.min(request.maxTokens, left.tokens);
      const response = await setup.models.call(setup.chain, {
        messages: messagesOf(request),
        maxTokens: Math.max(1, maxTokens),
        signal,
      });
      setup.charge(response.usage);
      const stopReason = response.finishReason === "length" ? "maxTokens" : "endTurn";
      finished({ model: response.model, usage: response.usage, stopReason });
      return { text: response.message.content ?? "", model: response.model, stopReason };
    } catch (error) {
      if (error instanceof SamplingRefusedError) finished({ refused: error.message });
      throw error;
    }
  };
}

/** Returns once the request may be made; throws `SamplingRefusedError` saying why when it may not. */
async function cleared(
  setup: SamplingSetup,
  request: SamplingRequest,
  ids: { id: string; tool: string },
  signal: AbortSignal,
): Promise<void> {
  const decided = setup.decide(ids.tool, request.autoApproved);
  if (decided.decision === "deny")
    throw new SamplingRefusedError(decided.reason ?? `${ids.tool} is not allowed by the approval policy`);
  if (decided.decision !== "ask") return;
  const shown = {
    ...(request.systemPrompt ? { systemPrompt: request.systemPrompt } : {}),
    messages: request.messages,
    maxTokens: request.maxTokens,
  };
  const answer = await setup.ask(
    { id: ids.id, name: ids.tool, arguments: JSON.stringify(shown), effect: "execute", decision: "ask" },
    signal,
  );
  if (!answer.approved)
    throw new SamplingRefusedError(`not allowed (${answer.by})${answer.reason ? `: ${answer.reason}` : ""}`);
}

/** The server's conversation as the agent's model is asked it: its system prompt first, when it gave one. */
function messagesOf(request: SamplingRequest): ChatMessage[] {
  return [
    ...(request.systemPrompt ? [{ role: "system" as const, content: request.systemPrompt }] : []),
    ...request.messages.map((message) => ({ role: message.role, content: message.text })),
  ];
}
