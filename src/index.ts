/**
 * Troupe as a library: `import { createRuntime, defineTool } from "troupe"`. The CLI is built on the
 * same Runtime.
 */

import type { AgentHooks } from "./actors/agent-hooks.js";
import { Runtime, type RuntimeOptions } from "./actors/runtime.js";
import { LocalBus } from "./bus/local-bus.js";
import { NatsBus, type NatsBusOptions } from "./bus/nats-bus.js";
import { loadConfig } from "./config/load.js";
import type { AgentSettings, TroupeSettings } from "./config/schema.js";
import type { Logger } from "./log.js";
import type { Approver } from "./safety/approver.js";
import type { Tool } from "./tools/tool.js";

export type { AgentHandle } from "./actors/agent-deps.js";
export type { AgentEventMap, AgentEventType } from "./actors/agent-events.js";
export type { AgentHooks, BeforeToolDecision, HookContext, NextTurn } from "./actors/agent-hooks.js";
export type { AgentEvent } from "./actors/agent-stream.js";
export { buildRunTree, type TreeNode } from "./actors/run-tree.js";
// The errors a caller can receive: every one is a TroupeError; a UserError is the caller's to mend.
export {
  type RunOptions,
  Runtime,
  UnknownAgentError,
  UnknownSkillError,
  WorkspaceError,
} from "./actors/runtime.js";
export type { Bus } from "./bus/bus.js";
export {
  BusClosedError,
  BusError,
  KvConflictError,
  RequestRefusedError,
  RequestTimeoutError,
} from "./bus/bus.js";
export { LocalBus } from "./bus/local-bus.js";
export { NatsBus } from "./bus/nats-bus.js";
export { BusUnavailableError } from "./bus/nats-connect.js";
export { ConfigError, type ConfigProblem } from "./config/problems.js";
export type {
  AgentDefinition,
  AgentSettings,
  Budget,
  TroupeConfig,
  TroupeSettings,
} from "./config/schema.js";
export { TroupeError, UnreachableError, UserError } from "./errors.js";
export type { AgentOutput, StopReason } from "./machines/agent-types.js";
export {
  CircuitOpenError,
  ContextLengthExceededError,
  ModelError,
  ModelNotConfiguredError,
} from "./model/errors.js";
export type { ChatMessage, Usage } from "./model/types.js";
export type { ApprovalAnswer, ApprovalRequest, Approver } from "./safety/approver.js";
export { McpToolCollisionError } from "./tools/mcp/mcp-connection.js";
export { defineTool, type Tool, type ToolContext, type ToolResult } from "./tools/tool.js";
export { ToolModuleError } from "./tools/tool-modules.js";
export type { ToolSchema } from "./tools/tool-schema.js";
export { ToolArgumentsError, ToolSchemaError } from "./tools/tool-schema.js";

export interface CreateRuntimeOptions {
  /** A config directory (or troupe.yaml); default: as the CLI finds it. Ignored when `agents` is given. */
  config?: string;
  /** Settings as in troupe.yaml, over the defaults: with `agents`, instead of a config directory. */
  settings?: TroupeSettings;
  /** Agent definitions as in agents/*.yaml. */
  agents?: AgentSettings[];
  /** A NATS URL (or options) to run on; the in-process bus when absent. */
  nats?: string | NatsBusOptions;
  workspace?: string;
  tools?: Tool[];
  hooks?: AgentHooks;
  approver?: Approver;
  /** Where the environment's variables are read (see docs/library.md); default: `process.env`. */
  env?: NodeJS.ProcessEnv;
  log?: Logger;
}

/** A runtime ready to start agents: config loaded, bus connected, MCP servers and tool modules up. */
export async function createRuntime(options: CreateRuntimeOptions = {}): Promise<Runtime> {
  if (options.settings && !options.agents)
    throw new TypeError("createRuntime: settings go with agents; without agents, give a config directory");
  const config = loadConfig({
    ...(options.agents
      ? { inline: { settings: options.settings ?? {}, agents: options.agents } }
      : { config: options.config }),
    ...(options.env ? { env: options.env } : {}),
  });
  const bus =
    options.nats === undefined
      ? new LocalBus({ prefix: config.troupe.nats.prefix, ...(options.log ? { log: options.log } : {}) })
      : await NatsBus.connect(
          typeof options.nats === "string"
            ? {
                url: options.nats,
                prefix: config.troupe.nats.prefix,
                storage: { stream: config.troupe.nats.stream, kv: config.troupe.nats.kv },
              }
            : options.nats,
        );
  const runtimeOptions: RuntimeOptions = { config, bus };
  for (const key of ["workspace", "tools", "hooks", "approver", "env", "log"] as const) {
    if (options[key] !== undefined) Object.assign(runtimeOptions, { [key]: options[key] });
  }
  const runtime = await new Runtime(runtimeOptions).open();
  const close = runtime.close.bind(runtime);
  runtime.close = async () => {
    await close();
    await bus.close();
  };
  return runtime;
}
