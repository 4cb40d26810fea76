import type { AgentDefinition } from "../config/schema.js";
import { countToolSpecTokens } from "../context/tokens.js";
import type { ToolSpec } from "../model/types.js";
import { skillCatalogue } from "../skills/skills.js";
import { type PlannedCall, parseArguments } from "../tools/plan.js";
import type { CallPreview, ToolRegistry } from "../tools/tool.js";
import type { AgentDeps } from "./agent-host.js";

/* What an agent host derives from its tools: the tools it has now, the skills it may see, what an
 * approval request shows, what a tool.requested event says. */

/**
 * The tools an agent has now: its list, where `server__*` stands for every tool of that MCP server,
 * against what is registered (an MCP server's tools come and go). Recomputed only when the
 * registered names change.
 */
export function toolView(list: readonly string[], registry: ToolRegistry, onlyReads = false) {
  const listed = (name: string) =>
    list.includes(name) || list.some((entry) => entry.endsWith("__*") && name.startsWith(entry.slice(0, -1)));
  const matches = (name: string) => listed(name) && (!onlyReads || registry.get(name)?.effect === "read");
  let key = "";
  let view = { allowed: new Set<string>(), specs: [] as ToolSpec[], tokens: 0 };
  return () => {
    const names = registry.names().filter(matches);
    const nextKey = names.join("\n");
    if (nextKey !== key || names.length === 0) {
      key = nextKey;
      const specs = names
        .map((name) => registry.spec(name))
        .filter((spec): spec is ToolSpec => spec !== undefined);
      view = { allowed: new Set(names), specs, tokens: countToolSpecTokens(specs) };
    }
    return view;
  };
}

/** The catalogue of the skills this agent may load, when it has the load_skill tool. */
export function catalogueFor(definition: AgentDefinition, deps: AgentDeps): string[] {
  if (!definition.tools.includes("load_skill")) return [];
  const visible = [...deps.skills.values()].filter(
    (skill) => !definition.skills || definition.skills.includes(skill.name),
  );
  const catalogue = skillCatalogue(visible);
  return catalogue ? [catalogue] : [];
}

/** What the person deciding sees: the tool's own preview (a diff, the command), else the arguments. */
export async function previewOf(deps: AgentDeps, call: PlannedCall): Promise<CallPreview> {
  const tool = deps.tools.get(call.name);
  try {
    if (tool?.preview) {
      const args = parseArguments(tool.parameters, call.arguments);
      return await tool.preview(args, { workspace: deps.workspace, protectedDirs: deps.protectedDirs });
    }
  } catch (error) {
    deps.log.debug({ err: error, tool: call.name }, "no preview");
  }
  return { detail: call.arguments, paths: [] };
}

export function requested(call: PlannedCall) {
  return {
    callId: call.id,
    name: call.name,
    arguments: call.arguments,
    effect: call.effect,
    decision: call.decision,
    ...(call.result?.error ? { error: call.result.error } : {}),
  };
}
