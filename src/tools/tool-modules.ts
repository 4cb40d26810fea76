import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { AgentDefinition } from "../config/agent-schema.js";
import { UserError } from "../errors.js";
import type { Tool } from "./tool.js";

export class ToolModuleError extends UserError {
  override name = "ToolModuleError";
}

/** The tools each agent's `toolModules` export (every export that is a tool), by agent name. */
export async function loadToolModules(
  definitions: AgentDefinition[],
  configDir: string,
): Promise<Map<string, Tool[]>> {
  const byAgent = new Map<string, Tool[]>();
  for (const definition of definitions) {
    const tools: Tool[] = [];
    for (const path of definition.toolModules) {
      let exported: Record<string, unknown>;
      try {
        exported = (await import(pathToFileURL(resolve(configDir, path)).href)) as Record<string, unknown>;
      } catch (error) {
        throw new ToolModuleError(
          `${definition.name}: toolModules: cannot load ${path}: ${(error as Error).message}`,
        );
      }
      const found = Object.values(exported)
        .flatMap((value) => (Array.isArray(value) ? value : [value]))
        .filter(isTool);
      if (found.length === 0)
        throw new ToolModuleError(
          `${definition.name}: toolModules: ${path} exports no tool (use defineTool)`,
        );
      tools.push(...found);
    }
    if (tools.length > 0) byAgent.set(definition.name, tools);
  }
  return byAgent;
}

function isTool(value: unknown): value is Tool {
  const tool = value as Partial<Tool> | null;
  return (
    typeof tool?.name === "string" &&
    typeof tool.execute === "function" &&
    typeof tool.effect === "string" &&
    tool.parameters !== undefined
  );
}
