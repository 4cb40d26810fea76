import { z } from "zod";
import { MAX_REPLY_CHARS } from "../limits.js";
import { APPROVAL_POLICIES, SANDBOX_MODES } from "./policies.js";
import { ROLES } from "./roles.js";
import { DURATION_UNITS, durationSchema, millisecondsSchema, sizeSchema } from "./units.js";

/** Names users type and the model sees in tool names (`subagent_<name>`): lowercase words. */
const AGENT_NAME = /^[a-z][a-z0-9_-]{0,63}$/;
const PROVIDER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;

export { APPROVAL_POLICIES };
export const approvalPolicySchema = z.enum(APPROVAL_POLICIES);
export type ApprovalPolicy = z.infer<typeof approvalPolicySchema>;
export const sandboxModeSchema = z.enum(SANDBOX_MODES);

const positiveInt = z.number().int().positive();

export const budgetSchema = z.strictObject({
  /** Model calls this agent may make. */
  maxTurns: positiveInt.optional(),
  /** Prompt + completion tokens, over all its model calls. */
  maxTokens: positiveInt.optional(),
  maxToolCalls: positiveInt.optional(),
  /** Wall-clock time from start to stop: milliseconds, or a duration (`5m`, `90s`). */
  maxWallMs: millisecondsSchema.optional(),
  /**
   * Time spent waiting for people to answer approval requests, in all (not counted in maxWallMs):
   * milliseconds or a duration. When it is used up, each call still waiting is denied, saying so.
   */
  maxWaitMs: millisecondsSchema.optional(),
  /** Spend from the price table, in US dollars. */
  maxCostUsd: z.number().positive().optional(),
});
export type Budget = z.infer<typeof budgetSchema>;

/** The budget of an agent whose YAML leaves a key out: no agent runs without a turn and time limit. */
export const DEFAULT_BUDGET = { maxTurns: 50, maxWallMs: 30 * 60_000 } as const;

/**
 * `defaults.budget` of troupe.yaml: each key is given to every agent whose own budget leaves it out
 * (key by key). `null` gives none; a key left out here keeps its built-in default (`DEFAULT_BUDGET`).
 */
export const budgetDefaultsSchema = z.strictObject({
  maxTurns: positiveInt.nullable().default(DEFAULT_BUDGET.maxTurns),
  maxTokens: positiveInt.nullable().default(null),
  maxToolCalls: positiveInt.nullable().default(null),
  maxWallMs: millisecondsSchema.nullable().default(DEFAULT_BUDGET.maxWallMs),
  maxWaitMs: millisecondsSchema.nullable().default(null),
  maxCostUsd: z.number().positive().nullable().default(null),
});
export type BudgetDefaults = z.infer<typeof budgetDefaultsSchema>;

/** One agent per YAML file under the agents dir. The key names are a public contract. */
export const agentSchema = z.strictObject({
  name: z.string().regex(AGENT_NAME, 'must be lowercase letters, digits, "_" or "-", starting with a letter'),
  /** One line: what the agent is for. A parent's model sees it as the subagent tool's description. */
  description: z.string().min(1, "must not be empty"),
  /** `model`, or `provider/model`; the config's `defaultModel` when absent. */
  model: z.string().min(1).optional(),
  /** Tried in order when `model` fails or its circuit is open. */
  fallbackModels: z.array(z.string().min(1)).default([]),
  systemPrompt: z.string().optional(),
  /** Built-in tool names, and MCP tools as `server__tool` or `server__*`. */
  tools: z.array(z.string().min(1)).default([]),
  /** Agents this one may delegate to; each becomes a `subagent_<name>` tool. */
  subagents: z.array(z.string().min(1)).default([]),
  /** Skill names this agent may load; all when absent. */
  skills: z.array(z.string().min(1)).optional(),
  budget: budgetSchema.default({}),
  /** Overrides the config's approval policy for this agent. */
  approval: approvalPolicySchema.optional(),
  /** A read-only agent may list read tools only. Every subagent is read-only. */
  readOnly: z.boolean().default(false),
  /** JavaScript modules (relative to the config dir) whose exported tools this agent also gets. */
  toolModules: z.array(z.string().min(1)).default([]),
  /** `stop`: the first tool error ends the run as failed; `continue` (default): the model sees it and corrects. */
  onToolError: z.enum(["continue", "stop"]).default("continue"),
  /** `plan`: only read tools, a capped number of turns, and a prompt that asks for a plan. */
  mode: z.enum(["act", "plan"]).optional(),
  /** Where this agent's commands run; overrides troupe.yaml's `sandbox.mode`. A read-only agent's run read-only. */
  sandbox: sandboxModeSchema.optional(),
});
export type AgentDefinition = z.infer<typeof agentSchema>;
/** An agent as written in agents/*.yaml, or given to `createRuntime`: its defaults not yet filled in. */
export type AgentSettings = z.input<typeof agentSchema>;

export const modelInfoSchema = z.strictObject({
  contextWindow: positiveInt.optional(),
  /** US dollars per million input tokens. */
  inputPerMTok: z.number().nonnegative().default(0),
  outputPerMTok: z.number().nonnegative().default(0),
  cachedInputPerMTok: z.number().nonnegative().optional(),
});
export type ModelInfo = z.infer<typeof modelInfoSchema>;

export const providerSchema = z.strictObject({
  /** Any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, Ollama, LM Studio, llama.cpp). */
  baseURL: z.url().optional(),
  /** The environment variable that holds the API key. */
  apiKeyEnv: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name")
    .default("OPENAI_API_KEY"),
  /** Context window of models this provider serves that are not listed under `models`. */
  contextWindow: positiveInt.default(128_000),
  models: z.record(z.string().min(1), modelInfoSchema).default({}),
  /** `false` for a server that cannot stream (found on its own too, when it answers a stream with one completion). */
  stream: z.boolean().default(true),
  /** `false` for a server that refuses `stream_options` (found on its own too, from its 400). */
  streamUsage: z.boolean().default(true),
  /**
   * The most characters one reply may stream (text, reasoning and tool calls' arguments together);
   * past it the call is stopped and the turn fails.
   */
  maxReplyChars: positiveInt.default(MAX_REPLY_CHARS),
});
export type ProviderConfig = z.infer<typeof providerSchema>;

/** The `server` of `server__tool`: no "__" inside, so a tool name says which server it is of. */
export const mcpServerNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$/, 'must be letters, digits, "-" or single "_"');

/**
 * One MCP server, in the shape Claude Desktop, Cursor, Claude Code (`.mcp.json`), VS Code, Cline and
 * Windsurf write it, so an entry can be pasted in: each client's own keys mean what they mean there.
 */
export const mcpServerSchema = z
  .strictObject({
    /**
     * How to reach it (Claude Code, VS Code, Cline): `stdio` is `command`; `http`, `streamable-http`
     * and `streamableHttp` are Streamable HTTP at `url` (falling back to SSE, as VS Code does); `sse`
     * is the legacy HTTP+SSE transport. Absent: `command` or `url` says.
     */
    type: z.enum(["stdio", "http", "streamable-http", "streamableHttp", "sse"]).optional(),
    command: z.string().min(1).optional(),
    args: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).default({}),
    cwd: z.string().optional(),
    /** A server over HTTP, instead of `command`. */
    url: z.url().optional(),
    /** Windsurf's name for `url`. */
    serverUrl: z.url().optional(),
    headers: z.record(z.string(), z.string()).default({}),
    /** Cline: the server is not started, and its tools are absent. */
    disabled: z.boolean().default(false),
    /** Cline: these tools (as the server names them) run without asking, under every approval policy. */
    autoApprove: z.array(z.string().min(1)).default([]),
    /** Every tool of this server only reads. */
    readOnly: z.boolean().default(false),
    timeoutMs: positiveInt.optional(),
    /** Cline's call timeout, in seconds. */
    timeout: positiveInt.optional(),
    /** Run this (stdio) server in the sandbox too, as its commands would be. */
    sandbox: z.enum(["read-only", "workspace-write"]).optional(),
  })
  .refine((server) => server.url === undefined || server.serverUrl === undefined, {
    message: '"serverUrl" is Windsurf\'s name for "url": keep one of them',
    path: ["serverUrl"],
  })
  .refine((server) => server.timeout === undefined || server.timeoutMs === undefined, {
    message: '"timeout" is Cline\'s "timeoutMs" in seconds: keep one of them',
    path: ["timeout"],
  })
  .refine(
    (server) =>
      (server.command === undefined) !== (server.url === undefined && server.serverUrl === undefined),
    {
      message: 'needs exactly one of "command" (a local process) or "url" (a server over HTTP)',
    },
  )
  .refine((server) => server.type !== "stdio" || server.command !== undefined, {
    message: '"type: stdio" is a local process: it needs "command", not "url"',
    path: ["type"],
  })
  .refine((server) => server.type === undefined || server.type === "stdio" || server.command === undefined, {
    message: 'this "type" is a server over HTTP: it needs "url", not "command"',
    path: ["type"],
  })
  .refine((server) => server.sandbox === undefined || server.command !== undefined, {
    message: '"sandbox" applies to a local process ("command"), not to a server at a "url"',
  })
  .transform(({ type, serverUrl, timeout, timeoutMs, ...server }) => ({
    ...server,
    url: server.url ?? serverUrl,
    /** `http`: Streamable HTTP, falling back to the legacy SSE transport; `sse`: only that one. */
    transport: (type === "sse" ? "sse" : server.command === undefined ? "http" : "stdio") as
      | "stdio"
      | "http"
      | "sse",
    timeoutMs: timeoutMs ?? (timeout === undefined ? 60_000 : timeout * 1000),
  }));
export type McpServerConfig = z.infer<typeof mcpServerSchema> & {
  /** The directory of the file that defined it (troupe.yaml's, or an `mcpServersFrom` file's), set by the loader: where it starts. */
  dir?: string;
};

export const natsConfigSchema = z.strictObject({
  /** One URL or several, comma-separated: the first is used while it answers, the next when it does not. */
  url: z.string().min(1).default("nats://127.0.0.1:4222"),
  /** Prefix of every subject, stream and bucket; lets several Troupes share one server. */
  prefix: z
    .string()
    .regex(/^[A-Za-z][A-Za-z0-9_-]{0,31}$/, 'must be a letter then up to 31 letters, digits, "_" or "-"')
    .default("troupe"),
  user: z.string().optional(),
  /** Prefer `passwordEnv` to keeping a secret in the file. */
  password: z.string().optional(),
  passwordEnv: z.string().optional(),
  token: z.string().optional(),
  tokenEnv: z.string().optional(),
  nkeySeedFile: z.string().optional(),
  credsFile: z.string().optional(),
  /**
   * The role the credentials above are of (`troupe credentials ROLE` prints one's seed): replies
   * come to that role's inbox, the only one it may read. Default: the command's own.
   */
  role: z.enum(ROLES).optional(),
  tls: z
    .strictObject({
      caFile: z.string().optional(),
      certFile: z.string().optional(),
      keyFile: z.string().optional(),
    })
    .optional(),
  /** When nothing answers at `url` and nats-server is on PATH, start one as a child. */
  embedded: z.boolean().default(true),
  /**
   * The event stream (`<PREFIX>_EVENTS`), as the daemon makes it, or changes it to when it exists
   * (a setting left out leaves the stream's own). Absent: at most 10,000,000 events (the oldest go),
   * no age limit, one replica, on file.
   */
  stream: z
    .strictObject({
      /** Events older than this are removed; `0`: kept. */
      maxAge: durationSchema.optional(),
      /** The oldest events are removed past this size. */
      maxBytes: sizeSchema.optional(),
      /** The oldest events are removed past this many (default `EVENT_STREAM_ENTRIES`). */
      maxEntries: z.number().int().min(1000).optional(),
      /** Copies kept on a NATS cluster (1 to 5). */
      replicas: z.number().int().min(1).max(5).optional(),
      storage: z.enum(["file", "memory"]).optional(),
    })
    .optional(),
  /** Every KV bucket (`<prefix>_*`), as the daemon makes or changes them. */
  kv: z
    .strictObject({
      replicas: z.number().int().min(1).max(5).optional(),
      /** The most keys a bucket holds (each has its default: docs/nats-permissions.md); past it, a new key is refused. */
      maxEntries: z.number().int().min(100).optional(),
      /** How long a finished run's record stays in `<prefix>_runs`; absent or `0`: for good. */
      ttl: durationSchema.optional(),
    })
    .optional(),
});
export type NatsConfig = z.infer<typeof natsConfigSchema>;
export type StreamSettings = NonNullable<NatsConfig["stream"]>;
export type KvSettings = NonNullable<NatsConfig["kv"]>;

/** One hook: a shell command run on an event, for the tools (or agents) whose name matches `match`. */
export const hookSchema = z.strictObject({
  /** A name glob: `*` for any run of characters. Default `*`. */
  match: z.string().min(1).default("*"),
  command: z.string().min(1),
  timeoutMs: positiveInt.default(10_000),
  /** When the hook crashes or times out, block the call instead of going on. */
  failClosed: z.boolean().default(false),
  /**
   * Where it runs: in the command sandbox with the workspace writable (default) or read-only, or
   * `none`, as the user, from the config dir (for what the sandbox cannot do, e.g. a desktop notice).
   */
  sandbox: z.enum(["workspace-write", "read-only", "none"]).default("workspace-write"),
});
export type HookConfig = z.infer<typeof hookSchema>;

export const HOOK_EVENTS = ["beforeTool", "afterTool", "subagentStart", "subagentStop", "agentStop"] as const;
export type HookEvent = (typeof HOOK_EVENTS)[number];

/** YAML 1.2 reads `on` and `off` as words: both they and booleans say whether something is on. */
const onOff = z.preprocess(
  (value) => (value === "on" ? true : value === "off" ? false : value),
  z.boolean({ error: "must be on or off" }),
);

const sandboxObjectSchema = z.strictObject({
  /** Where commands run; absent: the approval policy's own (never-ask read-only, auto-edit and ask workspace-write, yolo off). */
  mode: sandboxModeSchema.optional(),
  /** Commands reach the network without asking. */
  network: onOff.default(false),
  /** More paths mounted read-only in the sandbox (a toolchain outside /usr and /opt); relative to this file. */
  readPaths: z.array(z.string().min(1)).default([]),
  /** The file tools read a file that has other hard links (one may be outside the workspace). */
  readHardLinks: z.boolean().default(false),
});

/** `sandbox: read-only` is short for `sandbox: { mode: read-only }`. */
export const sandboxConfigSchema = z.preprocess(
  (value) => (typeof value === "string" ? { mode: value } : value),
  sandboxObjectSchema,
);
export type SandboxConfig = z.infer<typeof sandboxConfigSchema>;

export const troupeConfigSchema = z.strictObject({
  nats: natsConfigSchema.default(natsConfigSchema.parse({})),
  /** Snapshots, local run logs and the embedded NATS store; the platform's data dir when absent. */
  dataDir: z.string().optional(),
  /** The directory agents work in; relative to where troupe runs. */
  workspace: z.string().default("."),
  /** Relative to this file. */
  agentsDir: z.string().default("agents"),
  skillsDir: z.string().default("skills"),
  skills: z
    .strictObject({
      /** Load the skill whose description best matches the task, when the match is good enough. */
      autoMatch: z.boolean().default(false),
      /** Share of a skill description's words the task must contain. */
      threshold: z.number().min(0).max(1).default(0.3),
    })
    .default({ autoMatch: false, threshold: 0.3 }),
  /** What every agent gets of a setting its YAML leaves out. */
  defaults: z
    .strictObject({ budget: budgetDefaultsSchema.default(budgetDefaultsSchema.parse({})) })
    .default({ budget: budgetDefaultsSchema.parse({}) }),
  /** The agent `troupe run` uses without `--agent`. */
  defaultAgent: z.string().optional(),
  defaultModel: z.string().min(1).default("gpt-4o-mini"),
  providers: z
    .record(z.string().regex(PROVIDER_NAME, 'must be letters, digits, "_" or "-"'), providerSchema)
    .default({ openai: providerSchema.parse({}) }),
  approval: z
    .strictObject({
      policy: approvalPolicySchema.default("ask"),
      /** With nobody answering, a request is denied after this long. */
      timeoutMs: positiveInt.default(300_000),
    })
    .default({ policy: "ask", timeoutMs: 300_000 }),
  mcpServers: z.record(mcpServerNameSchema, mcpServerSchema).default({}),
  /**
   * JSON files of other clients whose servers are added (Claude Code's `.mcp.json`, VS Code's
   * `.vscode/mcp.json`): their `mcpServers` (or VS Code's `servers`); relative to this file. An entry
   * of `mcpServers` here wins over one of the same name there.
   */
  mcpServersFrom: z
    .preprocess((value) => (typeof value === "string" ? [value] : value), z.array(z.string().min(1)))
    .default([]),
  plan: z
    .strictObject({
      /** The turn budget of an agent in plan mode (the smaller of this and its own). */
      maxTurns: positiveInt.default(8),
    })
    .default({ maxTurns: 8 }),
  /** People whose signed answers to approvals are acted on, besides the keys in the data dir: name → public key. */
  approvers: z
    .record(
      z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be letters, digits, ".", "_" or "-"'),
      z
        .string()
        .regex(
          /^U[A-Z2-7]{55}$/,
          "must be a public key as troupe keys create prints it (U and 55 characters)",
        ),
    )
    .default({}),
  daemon: z
    .strictObject({
      /** The most a client may ask of the daemon: runs.start with a looser policy (or sandbox off) is refused. */
      maxApproval: approvalPolicySchema.default("auto-edit"),
      /**
       * The directories a run's workspace may be in (`troupe run -w DIR`), relative to this file;
       * empty: the directory the daemon was started in.
       */
      workspaces: z.array(z.string().min(1)).default([]),
      /**
       * The most workspaces besides the daemon's own that have runs at once: each has a runtime, with
       * its own MCP servers, from its first run's start to its last run's end. A run in one more is refused.
       */
      maxWorkspaces: z.number().int().min(1).default(8),
      /**
       * How long a finished run's snapshots and tool journal are kept (for `troupe resume` of a
       * failed or aborted run); then only its record and events remain. `0`: removed at once.
       */
      keepFinished: durationSchema.default(7 * DURATION_UNITS.d),
    })
    .default({
      maxApproval: "auto-edit",
      workspaces: [],
      maxWorkspaces: 8,
      keepFinished: 7 * DURATION_UNITS.d,
    }),
  /**
   * The web console `troupe daemon` serves (also with `--web`): where it listens, `HOST:PORT`
   * (port 0: a free one). Every page needs the login `troupe web` prints.
   */
  web: z
    .strictObject({
      listen: z
        .string()
        .regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, "must be HOST:PORT, e.g. 127.0.0.1:7480")
        .default("127.0.0.1:0"),
    })
    .optional(),
  /**
   * What redaction keeps: values (regular expressions, each matching a whole value) that look like
   * secrets but are not, e.g. a test fixture's key. The environment's secrets are hidden all the same.
   */
  redaction: z
    .strictObject({
      allow: z
        .array(
          z.string().min(1).refine(compiles, {
            error: "must be a regular expression (JavaScript syntax), e.g. sk-test-[a-z0-9]+",
          }),
        )
        .default([]),
    })
    .default({ allow: [] }),
  /** Commands run on events, in the spirit of Claude Code's hooks. */
  hooks: z
    .strictObject(
      Object.fromEntries(HOOK_EVENTS.map((event) => [event, z.array(hookSchema).default([])])) as Record<
        HookEvent,
        z.ZodDefault<z.ZodArray<typeof hookSchema>>
      >,
    )
    .default({ beforeTool: [], afterTool: [], subagentStart: [], subagentStop: [], agentStop: [] }),
  sandbox: sandboxConfigSchema.default(sandboxConfigSchema.parse({})),
  shell: z
    .strictObject({
      /** Environment variables passed to commands besides the safe defaults (PATH, HOME, LANG…). */
      env: z
        .array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"))
        .default([]),
    })
    .default({ env: [] }),
  subagents: z
    .strictObject({
      /** How deep subagents may nest under a top-level agent. */
      maxDepth: positiveInt.default(2),
      /** Children of one parent running at once. */
      maxConcurrent: positiveInt.default(4),
    })
    .default({ maxDepth: 2, maxConcurrent: 4 }),
});
export type TroupeConfig = z.infer<typeof troupeConfigSchema>;

function compiles(pattern: string): boolean {
  try {
    new RegExp(pattern, "u");
    return true;
  } catch {
    return false;
  }
}
/** troupe.yaml's settings as written, or given to `createRuntime`: every key optional. */
export type TroupeSettings = z.input<typeof troupeConfigSchema>;
