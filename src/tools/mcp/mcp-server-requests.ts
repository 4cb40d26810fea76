import type {
  CreateMessageRequest,
  CreateMessageResult,
  ElicitRequest,
  ElicitResult,
} from "@modelcontextprotocol/sdk/types.js";
import { formFromSchema } from "../../approvals/question-form.js";
import type { McpServerConfig } from "../../config/mcp-server-schema.js";
import type { Logger } from "../../log.js";
import { type Elicitor, type Sampler, SamplingRefusedError } from "../tool.js";
import {
  answeringCall,
  isRefusal,
  type RunningCall,
  SAMPLING_REJECTED,
  samplingRequestOf,
  samplingResultOf,
} from "./mcp-sampling.js";
import { loadSdk } from "./mcp-transport.js";

/**
 * What an MCP server asks of the client while its tools run: a model's answer (sampling) or the
 * user's (a question). Each is answered for the agent one of whose calls of this server runs
 * (`answeringCall`); the connection tells it which calls run.
 */
export class McpServerRequests {
  /** The calls of this server that run now, for whom its requests are answered. */
  readonly #running = new Set<RunningCall>();

  constructor(
    private readonly server: string,
    private readonly config: McpServerConfig,
    private readonly log: Logger,
  ) {}

  /** Runs `run`, the server's call made for `call`, with the server's requests meanwhile answered for it. */
  async during<T>(call: RunningCall, run: () => Promise<T>): Promise<T> {
    this.#running.add(call);
    try {
      return await run();
    } finally {
      this.#running.delete(call);
    }
  }

  /**
   * A sampling request of the server: refused as a user's rejection when it may not be made, and as
   * an error when the model call failed.
   */
  async sample(params: CreateMessageRequest["params"], signal: AbortSignal): Promise<CreateMessageResult> {
    const [, , , , { McpError, ErrorCode }] = await loadSdk();
    const call = answeringCall(this.#running);
    const request = samplingRequestOf(this.server, this.config, params);
    try {
      if ("refused" in call) throw new SamplingRefusedError(call.refused);
      return samplingResultOf(await (call.sample as Sampler)(request, signal));
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.log.info({ refused: isRefusal(error) }, `sampling request not answered: ${message}`);
      if (isRefusal(error)) throw new McpError(SAMPLING_REJECTED, message);
      throw new McpError(ErrorCode.InternalError, `sampling failed: ${message}`);
    }
  }

  /**
   * A question of the server for the user, put wherever approvals are asked. A form troupe cannot
   * show, or no agent to ask for, is cancelled (nobody was asked), and the log says why.
   */
  async elicit(params: ElicitRequest["params"], signal: AbortSignal): Promise<ElicitResult> {
    const call = answeringCall(this.#running, "elicit");
    const mode = (params as { mode?: string }).mode ?? "form";
    const form =
      mode === "form"
        ? formFromSchema(params.message, (params as { requestedSchema?: unknown }).requestedSchema)
        : { problem: `troupe asks only form questions, not ${mode}` };
    if ("refused" in call || "problem" in form) {
      const why = "refused" in call ? call.refused : "problem" in form ? form.problem : "";
      this.log.info(`question for the user not asked: ${why}`);
      return { action: "cancel" };
    }
    const answer = await (call.elicit as Elicitor)({ server: this.server, form }, signal);
    return { action: answer.action, ...(answer.content ? { content: answer.content } : {}) };
  }
}
