/* One agent definition, as a YAML file under the agents dir (or `createRuntime`) writes it. */
import { z } from "zod";
import { budgetSchema } from "./budget-schema.js";
import { outputSchemaProblem } from "./output-schema.js";
import { approvalPolicySchema, sandboxModeSchema } from "./policy-schemas.js";

/** Names users type and the model sees in tool names (`subagent_<name>`): lowercase words. */
const AGENT_NAME = /^[a-z][a-z0-9_-]{0,63}$/;

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
  /**
   * How the model may use its tools on each turn that offers them: `auto` (the server's default),
   * `required`, `none`, or the name of one of its tools, which it must call. A budget's or a loop's
   * last turn offers no tools, and so no choice.
   */
  toolChoice: z.string().min(1).optional(),
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
  /**
   * The JSON Schema its final answer must fit: asked for as `response_format`, checked, asked again
   * once with what is wrong, and delivered parsed (`output` of `agent.stopped`); `output_invalid` when
   * it still does not fit.
   */
  output: z
    .record(z.string(), z.unknown())
    .superRefine((schema, ctx) => {
      const problem = outputSchemaProblem(schema);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    })
    .optional(),
});
export type AgentDefinition = z.infer<typeof agentSchema>;
/** An agent as written in agents/*.yaml, or given to `createRuntime`: its defaults not yet filled in. */
export type AgentSettings = z.input<typeof agentSchema>;
