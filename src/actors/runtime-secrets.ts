/* The secrets a runtime's redactor hides, from its config and environment. */
import type { LoadedConfig } from "../config/load.js";
import { envFileValues } from "../config/mcp-env-file.js";
import { Redactor } from "../safety/redact.js";

/**
 * A redactor that knows the process's secret-like variables, the providers' key variables, the NATS
 * secrets and the values of MCP servers' `envFile`s, and keeps what `redaction.allow` allows.
 */
export function secretsOf(config: LoadedConfig, env: NodeJS.ProcessEnv): Redactor {
  const keyVariables = Object.values(config.troupe.providers).map((provider) => provider.apiKeyEnv);
  const nats = config.troupe.nats;
  const literals = [nats.password, nats.token].filter((value): value is string => value !== undefined);
  literals.push(...envFileValues(config.troupe.mcpServers, config.dir));
  return Redactor.fromEnv({ ...process.env, ...env }, keyVariables, config.troupe.redaction.allow).with(
    literals,
  );
}
