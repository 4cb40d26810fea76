import type { ToolEffect } from "../events/agent-events.js";

export type { ToolEffect };

/** The built-in tools by name, with their effect: what agent YAML may list under `tools`. */
export const BUILTIN_TOOL_EFFECTS = {
  read_file: "read",
  list_dir: "read",
  glob: "read",
  grep: "read",
  load_skill: "read",
  write_file: "write",
  edit_file: "write",
  apply_patch: "write",
  shell: "execute",
} as const satisfies Record<string, ToolEffect>;

export type BuiltinToolName = keyof typeof BUILTIN_TOOL_EFFECTS;

/** A built-in tool's name and effect, as its definition takes them: the catalog is their one source. */
export function builtin<N extends BuiltinToolName>(
  name: N,
): { name: N; effect: (typeof BUILTIN_TOOL_EFFECTS)[N] } {
  return { name, effect: BUILTIN_TOOL_EFFECTS[name] };
}

/** The effect of the built-in tool of that name; undefined when there is none. */
export function builtinEffect(name: string): ToolEffect | undefined {
  return Object.hasOwn(BUILTIN_TOOL_EFFECTS, name)
    ? BUILTIN_TOOL_EFFECTS[name as BuiltinToolName]
    : undefined;
}

/** Built-in tools that run in the sandbox: a read-only agent may list them, and they run read-only for it. */
export const SANDBOXED_TOOLS: ReadonlySet<string> = new Set(["shell"]);

/** MCP tools are named `server__tool`; `server__*` stands for all of a server's tools. */
export const MCP_SEPARATOR = "__";

export function splitMcpToolName(name: string): { server: string; tool: string } | undefined {
  const at = name.indexOf(MCP_SEPARATOR);
  if (at <= 0 || at + MCP_SEPARATOR.length >= name.length) return undefined;
  return { server: name.slice(0, at), tool: name.slice(at + MCP_SEPARATOR.length) };
}
