/**
 * Troupe as a library: `import { createRuntime, defineTool } from "troupe"`. What a program needs to
 * run agents (a runtime, its runs, tools, hooks, the events and the errors), and nothing of how they
 * are run (the bus, the MCP manager, the registry), which may change. The CLI is built on the same
 * runtime; the scripted model server for tests is in `troupe/testing`.
 */

export type { AgentHandle } from "./actors/agent-deps.js";
export type { AgentHooks, BeforeToolDecision, HookContext, NextTurn } from "./actors/agent-hooks.js";
export { buildRunTree, type TreeNode } from "./actors/run-tree.js";
// The errors a caller can receive: every one is a TroupeError; a UserError is the caller's to mend.
export { UnknownAgentError, UnknownSkillError, WorkspaceError } from "./actors/runtime-errors.js";
export type { RunOptions } from "./actors/runtime-options.js";
export type { ApprovalAnswer, ApprovalRequest, Approver } from "./approvals/approver.js";
export {
  BusClosedError,
  BusError,
  KvConflictError,
  RequestRefusedError,
  RequestTimeoutError,
} from "./bus/bus.js";
export type { NatsBusOptions } from "./bus/nats-bus.js";
export { BusUnavailableError } from "./bus/nats-connect.js";
export type { AgentDefinition, AgentSettings } from "./config/agent-schema.js";
export type { Budget } from "./config/budget-schema.js";
export { ConfigError, type ConfigProblem } from "./config/problems.js";
export type { TroupeConfig, TroupeSettings } from "./config/schema.js";
export { UntrustedConfigError } from "./config/trusted-configs.js";
export { TroupeError, UnreachableError, UserError } from "./errors.js";
export type { AgentEvent, AgentEventMap, AgentEventType } from "./events/agent-events.js";
export {
  type CreateRuntimeOptions,
  createRuntime,
  type LibraryAgent,
  type ResumeOptions,
  type TroupeRuntime,
} from "./library.js";
export type { AgentOutput, StopReason } from "./machines/agent-types.js";
export {
  CircuitOpenError,
  ContextLengthExceededError,
  ModelError,
  ModelNotConfiguredError,
} from "./model/errors.js";
export type { ChatMessage, ToolChoice, Usage } from "./model/types.js";
export { McpToolCollisionError } from "./tools/mcp/mcp-connection.js";
export { defineTool, type Tool, type ToolContext, type ToolResult } from "./tools/tool.js";
export { ToolModuleError } from "./tools/tool-modules.js";
export type { ToolSchema } from "./tools/tool-schema.js";
export { ToolArgumentsError, ToolSchemaError } from "./tools/tool-schema.js";
