/* troupe.yaml as a whole: its settings, each part's schema in a file of its own. */
import { z } from "zod";
import { budgetDefaultsSchema } from "./budget-schema.js";
import { HOOK_EVENTS, type HookEvent, hookSchema } from "./hook-schema.js";
import { mcpServerNameSchema, mcpServerSchema } from "./mcp-server-schema.js";
import { natsConfigSchema } from "./nats-schema.js";
import { patternProblem } from "./permission-pattern.js";
import { approvalPolicySchema } from "./policy-schemas.js";
import { providerSchema } from "./provider-schema.js";
import { sandboxConfigSchema } from "./sandbox-schema.js";
import { telemetryConfigSchema } from "./telemetry-schema.js";
import { DURATION_UNITS, durationSchema, positiveInt } from "./units.js";

const PROVIDER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;

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
  /**
   * Calls the user allows or denies in this project, by pattern over tool and argument
   * (permission-pattern.ts): a deny rule denies under every policy; an allow rule turns a question
   * into an allow, never one about leaving the sandbox. The terminal's `A` adds allow rules here.
   */
  permissions: z
    .strictObject({
      allow: z.array(permissionPatternSchema()).default([]),
      deny: z.array(permissionPatternSchema()).default([]),
    })
    .default({ allow: [], deny: [] }),
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
  telemetry: telemetryConfigSchema.default(telemetryConfigSchema.parse({})),
});
export type TroupeConfig = z.infer<typeof troupeConfigSchema>;

function permissionPatternSchema() {
  return z.string().superRefine((text, context) => {
    const problem = patternProblem(text);
    if (problem) context.addIssue({ code: "custom", message: problem });
  });
}

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

// src/bus reads the stream's and buckets' settings from here.
export type { KvSettings, StreamSettings } from "./nats-schema.js";
