/**
 * What a tool does to the world. Read tools run in parallel and are the only ones a subagent may
 * have; write and execute tools run one at a time and go through the approval policy.
 */
export type ToolEffect = "read" | "write" | "execute";

/** The built-in tools by name, with their effect: what agent YAML may list under `tools`. */
export const BUILTIN_TOOL_EFFECTS: Readonly<Record<string, ToolEffect>> = {
  read_file: "read",
  list_dir: "read",
  glob: "read",
  grep: "read",
  load_skill: "read",
  write_file: "write",
  edit_file: "write",
  apply_patch: "write",
  shell: "execute",
};

/** Built-in tools that run in the sandbox: a read-only agent may list them, and they run read-only for it. */
export const SANDBOXED_TOOLS: ReadonlySet<string> = new Set(["shell"]);

/** MCP tools are named `server__tool`; `server__*` stands for all of a server's tools. */
export const MCP_SEPARATOR = "__";

export function splitMcpToolName(name: string): { server: string; tool: string } | undefined {
  const at = name.indexOf(MCP_SEPARATOR);
  if (at <= 0 || at + MCP_SEPARATOR.length >= name.length) return undefined;
  return { server: name.slice(0, at), tool: name.slice(at + MCP_SEPARATOR.length) };
}
