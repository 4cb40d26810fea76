import type { CallJudgement } from "../approvals/policy.js";
import type { Answers, QuestionForm } from "../approvals/question-form.js";
import type { ToolEffect } from "../config/tool-catalog.js";
import { UserError } from "../errors.js";
import type { ToolImage, ToolSpec } from "../model/types.js";
import type { Confinement } from "../sandbox/plan.js";
import type { LoadedSkill } from "../skills/skill-types.js";
import { type ArgsOf, argsJsonSchema, closedSchema, type ToolSchema } from "./tool-schema.js";

/**
 * What every tool returns. An error is data the model can act on: `error` says what went wrong and
 * `recoveryHint` what to do next. The pipeline (`runBatch`) reads it and never writes into it: what
 * the model reads of the call is apart, in its `CallOutcome` (src/tools/call-outcome.ts).
 */
export interface ToolResult {
  ok: boolean;
  /** What the tool printed. */
  output: string;
  error?: string;
  summary?: string;
  /** What the call made or changed (for files: workspace-relative paths). The model reads them after the output. */
  artifacts?: string[];
  /** Concrete calls the model may make next (a narrower search). The model reads them after the output. */
  nextActions?: string[];
  recoveryHint?: string;
  /** When every result of a batch says so, the agent stops without another model call. */
  terminate?: boolean;
  /**
   * Images it returned (an MCP tool's): shown to a model that takes images, after the result, for as
   * long as this process holds the agent; the output says in a line what each is.
   */
  images?: ToolImage[];
}

export interface ToolContext {
  signal: AbortSignal;
  callId: string;
  runId: string;
  agentId: string;
  workspace: string;
  /**
   * Read tools may open a file that has other hard links (troupe.yaml `sandbox.readHardLinks`). Off by
   * default: the other names of a hard-linked file may be outside the workspace, and nothing says where.
   */
  readHardLinks?: boolean;
  /** Directories inside the workspace that tools may not change (the config dir). */
  protectedDirs?: string[];
  /** Directories no tool may read, list or change (troupe's data dir, when it is in the workspace). */
  hiddenDirs?: string[];
  /** The skills this agent may load; all when absent. */
  skills?: string[];
  /** The directories of the skills this agent may load, by name, real paths as found: where `skill:NAME/PATH` reads are confined. */
  skillDirs?: ReadonlyMap<string, string>;
  /** Told of each skill load_skill loads (the host publishes `skill.loaded` and grants its `allowed-tools`). */
  skillLoaded?: (skill: LoadedSkill) => void;
  /** How this call's command is confined, for a tool that runs in the sandbox; absent: the strictest. */
  sandbox?: Confinement;
  /**
   * The most any call of this agent may be given (a read-only agent's: the read-only sandbox, and
   * the network only when troupe.yaml turns it on): a sandboxed tool refuses a call confined beyond
   * it, whatever its plan or approval said.
   */
  sandboxLimit?: Confinement;
  /** The calls that run in this call's batch, this one among them, in the order the model made them. */
  batch?: readonly { id: string; name: string }[];
  /**
   * Told how far a long call has come (an MCP server's progress notifications): people watching see
   * it, and it restarts the call's timeout when the tool has a `maxTotalTimeoutMs`.
   */
  progress?: (update: ToolProgress) => void;
  /**
   * Answers a request for a completion this call's program made of the agent (an MCP server's
   * sampling): asked or refused as a call of `SERVER__sampling` is, then made with the agent's model
   * and charged to its budget. Throws `SamplingRefusedError` saying why when it is not made.
   */
  sample?: Sampler;
  /**
   * Puts a question of this call's program to the user (an MCP server's elicitation): asked wherever
   * approvals are, as a request of `SERVER__elicitation`; the first answer wins.
   */
  elicit?: Elicitor;
}

/** A program's question for the user, and how it was answered: accepted with answers, declined, or cancelled (why). */
export interface ElicitationAnswer {
  action: "accept" | "decline" | "cancel";
  content?: Answers;
  why?: string;
}

export type Elicitor = (
  request: { server: string; form: QuestionForm },
  signal: AbortSignal,
) => Promise<ElicitationAnswer>;

/** A program's request for a completion: the conversation it gives, and the most the answer may be. */
export interface SamplingRequest {
  /** The MCP server that asks. */
  server: string;
  /** Set when the operator let this server sample without asking (`autoApprove: [sampling]`): where. */
  autoApproved?: string | undefined;
  messages: { role: "user" | "assistant"; text: string }[];
  systemPrompt?: string | undefined;
  maxTokens: number;
}

export interface SamplingAnswer {
  text: string;
  model: string;
  stopReason: "endTurn" | "maxTokens";
}

export type Sampler = (request: SamplingRequest, signal: AbortSignal) => Promise<SamplingAnswer>;

/** A sampling request that was not made: `message` says why, for the program that asked. */
export class SamplingRefusedError extends Error {
  override name = "SamplingRefusedError";
}

/** How far a running call has come, as its tool says: `progress` of `total` (when known), and a few words. */
export interface ToolProgress {
  progress: number;
  total?: number | undefined;
  message?: string | undefined;
}

/** What a person deciding on a call sees: the exact change or command, and the paths it touches. */
export interface CallPreview {
  /** The exact command, or a unified diff of the change. */
  detail: string;
  paths: string[];
}

export interface Tool<Args = unknown> {
  name: string;
  description: string;
  effect: ToolEffect;
  /**
   * The same call run twice leaves the world as once (write_file: the whole content, to one path).
   * A call of such a tool cut short by a crash is run again when its run resumes; one of any other
   * tool that writes or executes is reported to the model as of unknown outcome instead, and never
   * run twice. Reads are always run again, but for a remote tool's.
   */
  idempotent?: boolean;
  /**
   * Its calls are carried out by another program (an MCP server), which may count, bill or log each
   * one even when it only reads. Such calls are journaled whatever their effect: one that finished is
   * never made again when its agent resumes on another host, and one cut short is reported as of
   * unknown outcome (unless `idempotent`): at most once, as a write is.
   */
  remote?: boolean;
  /** A zod schema (zod 4, or zod 3.25 and later; the program's own zod or Troupe's). */
  parameters: ToolSchema<Args>;
  /** Default 120000. */
  timeoutMs?: number;
  /**
   * Progress it reports (`context.progress`) restarts its timeout, up to this much time in all; without
   * it, progress does not extend the timeout.
   */
  maxTotalTimeoutMs?: number;
  /** What the model is told to do when the output was cut, e.g. "read on with offset". */
  readMore?: string;
  /** Where the output comes from, as the model is told; default the tool's name (MCP: `mcp:server`). */
  source?: string;
  /**
   * Runs its work inside the operating system's sandbox, as `context.sandbox` says (the shell): its
   * calls are confined rather than judged, and a read-only agent may have it, confined read-only.
   */
  sandboxed?: boolean;
  /**
   * The operator allowed its calls in advance, under every policy (an MCP server's `autoApprove` in
   * troupe.yaml): where. Not for a sandboxed tool, whose calls are decided by where they run.
   */
  autoApproved?: string;
  /** The arguments' JSON Schema as the model sees it, when it does not come from `parameters` (MCP tools). */
  jsonSchema?: Record<string, unknown>;
  /** What this call would do, for the approval policy (the shell tool parses its command). */
  judge?(args: Args, workspace: string): CallJudgement;
  /** For approval requests; default: the arguments. */
  preview?(
    args: Args,
    context: Pick<ToolContext, "workspace" | "protectedDirs" | "hiddenDirs">,
  ): Promise<CallPreview> | CallPreview;
  execute(args: Args, context: ToolContext): Promise<ToolResult> | ToolResult;
}

/**
 * Declares a tool whose arguments are typed by its zod schema (zod 4, or zod 3.25 and later). The tool
 * keeps the schema's own type, so `tool.parameters.parse(args)` is typed where arguments are not (hooks).
 */
export function defineTool<S extends ToolSchema>(tool: {
  name: string;
  description: string;
  effect: ToolEffect;
  idempotent?: boolean;
  remote?: boolean;
  parameters: S;
  timeoutMs?: number;
  maxTotalTimeoutMs?: number;
  readMore?: string;
  source?: string;
  sandboxed?: boolean;
  preview?(
    args: ArgsOf<S>,
    context: Pick<ToolContext, "workspace" | "protectedDirs" | "hiddenDirs">,
  ): Promise<CallPreview> | CallPreview;
  judge?(args: ArgsOf<S>, workspace: string): CallJudgement;
  execute(args: ArgsOf<S>, context: ToolContext): Promise<ToolResult> | ToolResult;
}): Tool<ArgsOf<S>> & { parameters: S } {
  return tool as Tool<ArgsOf<S>> & { parameters: S };
}

export function toolError(error: string, recoveryHint: string): ToolResult {
  return { ok: false, output: "", error, recoveryHint };
}

/**
 * The lines after a result's output that say what it made and what to do next, as the model reads
 * them inside the wrapped text of its call's outcome: `artifacts: a.ts, b.ts`, then one `next: …`
 * per action.
 */
export function resultExtras(result: Pick<ToolResult, "artifacts" | "nextActions">): string[] {
  const lines: string[] = [];
  if (result.artifacts?.length) lines.push(`artifacts: ${result.artifacts.join(", ")}`);
  for (const action of result.nextActions ?? []) lines.push(`next: ${action}`);
  return lines;
}

/** Tools by name; gives the model JSON Schemas of their parameters. */
export class ToolRegistry {
  #tools = new Map<string, Tool>();
  #specs = new Map<string, ToolSpec>();
  #unavailable = new Map<string, (name: string) => string | undefined>();
  readonly #base: ToolRegistry | undefined;

  constructor(tools: Iterable<Tool> = [], base?: ToolRegistry) {
    this.#base = base;
    for (const tool of tools) this.register(tool);
  }

  /** A registry with these tools on top of this one (an agent's subagent tools over the shared ones). */
  with(tools: Iterable<Tool>): ToolRegistry {
    return new ToolRegistry(tools, this);
  }

  register(tool: Tool): this {
    if (this.#tools.has(tool.name) || this.#base?.get(tool.name))
      throw new UserError(`tool "${tool.name}" is registered twice: give one of them another name`);
    this.#tools.set(tool.name, tool);
    return this;
  }

  /** Puts a tool in place of one of the same name (an MCP server's refreshed list). */
  replace(tool: Tool): void {
    this.#tools.set(tool.name, tool);
    this.#specs.delete(tool.name);
  }

  unregister(name: string): void {
    this.#tools.delete(name);
    this.#specs.delete(name);
  }

  get(name: string): Tool | undefined {
    return this.#tools.get(name) ?? this.#base?.get(name);
  }

  names(): string[] {
    const own = [...this.#tools.keys()];
    return this.#base ? [...new Set([...this.#base.names(), ...own])] : own;
  }

  /**
   * A source whose tools are named `prefix…` (an MCP server's `server__`) says why its tools cannot be
   * called now, registered or not: a call is told that at once, not asked about nor "unknown tool".
   */
  explainUnavailable(prefix: string, why: (name: string) => string | undefined): void {
    this.#unavailable.set(prefix, why);
  }

  /** Why this tool cannot be called now, when its source says so; undefined otherwise. */
  unavailable(name: string): string | undefined {
    for (const [prefix, why] of this.#unavailable) if (name.startsWith(prefix)) return why(name);
    return this.#base?.unavailable(name);
  }

  spec(name: string): ToolSpec | undefined {
    if (!this.#tools.has(name)) return this.#base?.spec(name);
    const tool = this.#tools.get(name);
    if (!tool) return undefined;
    let spec = this.#specs.get(name);
    if (!spec) {
      const schema = tool.jsonSchema ?? argsJsonSchema(name, tool.parameters);
      const { $schema: _, ...parameters } = schema as Record<string, unknown>;
      spec = { name, description: tool.description, parameters: closedSchema(parameters) };
      this.#specs.set(name, spec);
    }
    return spec;
  }
}

/**
 * What the model is told of a call that was not approved, saying who decided: a person, the policy
 * (nobody could be asked), or nobody in time.
 */
export function deniedResult(
  tool: string,
  decision: { reason?: string | undefined; by?: string | undefined } | undefined,
): ToolResult {
  const reason = decision?.reason ?? "no decision was made";
  const who =
    decision?.by === "policy"
      ? `denied by policy: ${reason}`
      : decision?.by === "timeout"
        ? `nobody answered the approval for ${tool} in time`
        : `the user denied ${tool}: ${reason}`;
  return toolError(who, "do not retry this call; find another way or ask the user");
}
