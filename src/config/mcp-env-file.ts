/* An MCP server's `envFile` (Cursor's key): a dotenv file whose variables the server starts with. */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { McpServerConfig } from "./mcp-server-schema.js";

/** Where an entry's `envFile` is: relative to the directory of the file that defined it, as Cursor reads it. */
export function envFilePath(config: McpServerConfig, configDir: string): string | undefined {
  if (config.envFile === undefined) return undefined;
  return resolve(config.dir ?? configDir, config.envFile);
}

/** The variables of a dotenv file (`NAME=value`, `export NAME="…"`, `#` comments); throws when it cannot be read. */
export function readEnvFile(path: string): Record<string, string> {
  return parseDotenv(readFileSync(path, "utf8"));
}

/**
 * A dotenv file's variables, read as Node's `util.parseEnv` reads them (which Node 20 has only from
 * 20.12): `NAME=value` a line, `export ` before it allowed; a value in double quotes may span lines
 * and takes `\n` as a newline, one in single or back quotes is as written; an unquoted one ends at
 * ` #` and is trimmed. Lines that are not assignments are left out.
 */
export function parseDotenv(text: string): Record<string, string> {
  const vars: Record<string, string> = {};
  const line = /^[ \t]*(?:export[ \t]+)?([\w.-]+)[ \t]*=[ \t]*("(?:\\.|[^"\\])*"|'[^']*'|`[^`]*`|[^\n]*)/gm;
  for (const [, name, raw = ""] of text.replace(/\r\n?/g, "\n").matchAll(line)) {
    const quote = raw[0];
    let value: string;
    if (quote === '"' && raw.endsWith('"') && raw.length > 1) value = raw.slice(1, -1).replace(/\\n/g, "\n");
    else if ((quote === "'" || quote === "`") && raw.endsWith(quote) && raw.length > 1)
      value = raw.slice(1, -1);
    else value = raw.replace(/\s+#.*$/, "").trim();
    vars[name as string] = value;
  }
  return vars;
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
