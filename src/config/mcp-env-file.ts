/* An MCP server's `envFile` (Cursor's key): a dotenv file whose variables the server starts with. */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseEnv } from "node:util";
import type { McpServerConfig } from "./mcp-server-schema.js";

/** Where an entry's `envFile` is: relative to the directory of the file that defined it, as Cursor reads it. */
export function envFilePath(config: McpServerConfig, configDir: string): string | undefined {
  if (config.envFile === undefined) return undefined;
  return resolve(config.dir ?? configDir, config.envFile);
}

/** The variables of a dotenv file (`NAME=value`, `export NAME="…"`, `#` comments); throws when it cannot be read. */
export function readEnvFile(path: string): Record<string, string> {
  return parseEnv(readFileSync(path, "utf8")) as Record<string, string>;
}

/**
 * The values of every server's `envFile` that can be read: secrets the redactor hides, as it hides
 * the environment's. A file that cannot be read holds none (its server does not start, and says why).
 */
export function envFileValues(servers: Record<string, McpServerConfig>, configDir: string): string[] {
  const values: string[] = [];
  for (const config of Object.values(servers)) {
    const path = envFilePath(config, configDir);
    if (path === undefined) continue;
    try {
      values.push(...Object.values(readEnvFile(path)));
    } catch {
      // Said where the server starts.
    }
  }
  return values;
}
