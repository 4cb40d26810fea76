import { z } from "zod";
import type { McpServerConfig } from "../../config/mcp-server-schema.js";
import { MCP_SEPARATOR, type ToolEffect } from "../../config/tool-catalog.js";
import { type Elicitor, type Sampler, type Tool, type ToolProgress, toolError } from "../tool.js";
import { checkPathArguments } from "./mcp-paths.js";
import { type McpCallResult, mcpResult } from "./mcp-result.js";
import { McpServerDownError } from "./mcp-transport.js";

/** The SDK's `ErrorCode.RequestTimeout`, named here so the SDK is loaded only when a server is configured. */
const MCP_REQUEST_TIMEOUT = -32001;

/** What an MCP server says of one tool (the parts Troupe uses). */
export interface McpToolInfo {
  name: string;
  description?: string | undefined;
  inputSchema: Record<string, unknown>;
  annotations?: { readOnlyHint?: boolean | undefined; idempotentHint?: boolean | undefined } | undefined;
  /** How it may be run: `taskSupport` says whether as a task (MCP's tasks, experimental). */
  execution?: { taskSupport?: string | undefined } | undefined;
}

/**
 * Why Troupe cannot call this tool, which is then not offered: it requires task-based execution
 * (`execution.taskSupport: required`, the SDK refuses a plain call of it), which Troupe does not do.
 */
export function mcpToolUnusable(info: McpToolInfo): string | undefined {
  if (info.execution?.taskSupport === "required")
    return "it requires task-based execution, which troupe does not support";
  return undefined;
}

/** What a tool call needs of its server's connection. */
export interface McpCaller {
  readonly server: string;
  readonly config: McpServerConfig;
  /**
   * Throws `McpServerDownError` (saying why, and when it is tried again) when the server is not
   * running. The server is sent a progress token: each report it makes goes to `onProgress` and
   * starts the call's timeout again, up to `maxTotalTimeoutMs`.
   */
  call(name: string, args: Record<string, unknown>, options: McpCallOptions): Promise<McpCallResult>;
}

export interface McpCallOptions {
  signal: AbortSignal;
  onProgress?: ((progress: ToolProgress) => void) | undefined;
  /** The agent the call is for, and how it answers the server's sampling requests while the call runs. */
  agentId: string;
  sample?: Sampler | undefined;
  /** How it puts the server's questions to the user while the call runs. */
  elicit?: Elicitor | undefined;
}

/** `server__tool`, with anything a model API would refuse in a tool name made `_`. */
export function mcpToolName(server: string, tool: string): string {
  return `${server}${MCP_SEPARATOR}${tool.replace(/[^A-Za-z0-9_-]/g, "_")}`.slice(0, 64);
}

/** `read` when its server is marked `readOnly` or the tool says `readOnlyHint`; `execute` otherwise. */
export function mcpToolEffect(
  config: Pick<McpServerConfig, "readOnly">,
  info: Pick<McpToolInfo, "annotations">,
): ToolEffect {
  return config.readOnly || info.annotations?.readOnlyHint === true ? "read" : "execute";
}

/**
 * One MCP tool as a Troupe tool. It counts as `execute` unless its server is marked `readOnly` or the
 * tool says `readOnlyHint`; it is run again after a crash cut it short only when it says `idempotentHint`. Every argument that names a path, at any depth, is held to the workspace
 * (and, unless the tool only reads, kept out of `.git`, `.troupe` and the config dir), whatever the
 * server allows, and sent as the absolute path Troupe resolved it to.
 */
export function mcpTool(caller: McpCaller, info: McpToolInfo, workspace: string): Tool {
  const effect = mcpToolEffect(caller.config, info);
  const readOnly = effect === "read";
  return {
    name: mcpToolName(caller.server, info.name),
    description: info.description ?? `${info.name} from the ${caller.server} MCP server`,
    effect,
    // Another program's call: at most once, even a read (the server may count or bill it).
    remote: true,
    // The server's word, as for readOnlyHint: the operator chose the server.
    ...(info.annotations?.idempotentHint === true ? { idempotent: true } : {}),
    // Cline's `autoApprove`: the operator allowed these calls in advance, applied where the policy decides.
    ...(caller.config.autoApprove.includes(info.name)
      ? { autoApproved: `autoApprove of the MCP server "${caller.server}"` }
      : {}),
    parameters: z.record(z.string(), z.unknown()),
    jsonSchema: { type: "object", ...info.inputSchema },
    source: `mcp:${caller.server}`,
    // The server's own call timeouts apply first; these are a backstop.
    timeoutMs: caller.config.timeoutMs + 5000,
    maxTotalTimeoutMs: caller.config.maxTotalTimeoutMs + 5000,
    async execute(args, { signal, protectedDirs, hiddenDirs, progress, agentId, sample, elicit }) {
      const checked = checkPathArguments(args as Record<string, unknown>, workspace, {
        readOnly,
        protectedDirs,
        hiddenDirs,
      });
      if ("refused" in checked) return checked.refused;
      try {
        const options = { signal, onProgress: progress, agentId, sample, elicit };
        return mcpResult(await caller.call(info.name, checked.args, options));
      } catch (error) {
        if ((error as { code?: unknown }).code === MCP_REQUEST_TIMEOUT) {
          const { timeoutMs, maxTotalTimeoutMs } = caller.config;
          const total = /maximum total timeout/i.test((error as Error).message);
          return toolError(
            `${caller.server}: ${info.name} timed out after ${total ? `${maxTotalTimeoutMs} ms in all` : `${timeoutMs} ms`}`,
            "try a smaller request, or do without it",
          );
        }
        if (error instanceof McpServerDownError)
          return toolError(error.message, "try again after that, or do without this tool");
        return toolError(
          `${caller.server}: ${info.name} failed: ${(error as Error).message}`,
          "try again shortly, or do without this tool",
        );
      }
    },
  };
}
