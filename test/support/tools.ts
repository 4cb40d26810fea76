import { mkdirSync, mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { builtinTools } from "../../src/tools/builtin/index.js";
import type { Tool, ToolContext, ToolResult } from "../../src/tools/tool.js";
import { parseArgs } from "../../src/tools/tool-schema.js";

/** A temporary root holding a workspace and a place outside it; `dispose` removes both. */
export function workspaceAndOutside(): { root: string; ws: string; outside: string; dispose: () => void } {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "troupe-attack-")));
  const ws = join(root, "ws");
  const outside = join(root, "outside");
  mkdirSync(ws);
  mkdirSync(outside);
  return { root, ws, outside, dispose: () => rmSync(root, { recursive: true, force: true }) };
}

const builtins = new Map(builtinTools().map((tool) => [tool.name, tool]));

/** Calls a built-in tool directly, its arguments parsed by its schema, as the pipeline would. */
export async function callBuiltin(
  name: string,
  args: Record<string, unknown>,
  workspace: string,
  extra: Partial<ToolContext> = {},
): Promise<ToolResult> {
  const tool = builtins.get(name) as Tool;
  return tool.execute(parseArgs(tool.parameters, args), {
    signal: new AbortController().signal,
    callId: "c",
    runId: "r",
    agentId: "a",
    workspace,
    ...extra,
  });
}
