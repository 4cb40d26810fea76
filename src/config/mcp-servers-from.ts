import { existsSync, realpathSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { z } from "zod";
import { JsonFile } from "./json-file.js";
import { linkOnTheWay } from "./linked-path.js";
import { type McpServerConfig, mcpServerNameSchema, mcpServerSchema } from "./mcp-server-schema.js";
import type { ConfigProblem } from "./problems.js";
import type { TroupeConfig } from "./schema.js";
import type { YamlFile } from "./yaml-file.js";

/**
 * Another client's MCP config file: Claude Code's `.mcp.json` and Claude Desktop's config keep the
 * servers under `mcpServers`, VS Code's `.vscode/mcp.json` under `servers`. Anything else in the file
 * (VS Code's `inputs`, Claude Desktop's settings) is that client's, and left alone.
 */
const mcpJsonSchema = z
  .looseObject({
    mcpServers: z.record(mcpServerNameSchema, mcpServerSchema).optional(),
    servers: z.record(mcpServerNameSchema, mcpServerSchema).optional(),
  })
  .refine((file) => file.mcpServers !== undefined || file.servers !== undefined, {
    message: 'no "mcpServers" (Claude Code, Cursor, Claude Desktop) or "servers" (VS Code) in this file',
  });

/**
 * The servers of troupe.yaml's `mcpServersFrom` files (paths relative to the config dir) with its own
 * `mcpServers` over them: an entry of troupe.yaml wins over one of the same name in a file. Each
 * keeps the directory of its file. Problems, with the file's line and column, are appended.
 */
export function mcpServersOf(
  troupe: TroupeConfig,
  configFile: YamlFile | undefined,
  dir: string,
  cwd: string,
  problems: ConfigProblem[],
): Record<string, McpServerConfig> {
  const merged: Record<string, McpServerConfig> = {};
  troupe.mcpServersFrom.forEach((given, i) => {
    const path = resolve(dir, given);
    const where = ["mcpServersFrom", ...(configFile && typeof written(configFile) === "string" ? [] : [i])];
    if (!existsSync(path)) {
      if (configFile) problems.push(configFile.problem(where, `no such file: ${path}`));
      return;
    }
    // What it names is protected from every command; a link on the way could be swapped by one.
    const link = linkOnTheWay(dir, given);
    if (link) {
      if (configFile)
        problems.push(
          configFile.problem(
            where,
            `${given} goes through the symbolic link ${link}: name the file it leads to (${realpathSync(path)}), which troupe protects, so that no command can swap the link`,
          ),
        );
      return;
    }
    const file = JsonFile.read(path, cwd);
    const servers = file.validate(mcpJsonSchema);
    problems.push(...file.problems);
    Object.assign(merged, from(servers?.mcpServers, dirname(path)), from(servers?.servers, dirname(path)));
  });
  return { ...merged, ...from(troupe.mcpServers, dir) };
}

/** Each server with the directory of the file that defined it, where it starts. */
function from(
  servers: Record<string, McpServerConfig> | undefined,
  dir: string,
): Record<string, McpServerConfig> {
  return Object.fromEntries(
    Object.entries(servers ?? {}).map(([name, server]) => [name, { ...server, dir }]),
  );
}

/** `mcpServersFrom` as troupe.yaml writes it: one path, or a list. */
function written(file: YamlFile): unknown {
  return (file.data as { mcpServersFrom?: unknown } | undefined)?.mcpServersFrom;
}
