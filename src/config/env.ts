import type { TroupeConfig } from "./schema.js";

/**
 * The environment over the settings, whether they came from troupe.yaml or from code (the library):
 * this is the one place it is applied. NATS_URL replaces `nats.url`; OPENAI_BASE_URL replaces the
 * `openai` provider's `baseURL` (the first provider's when none is called openai). Other variables
 * are read where they are used: TROUPE_DATA_DIR by `dataDir`, a provider's key (`apiKeyEnv`) when a
 * model is called, TROUPE_CONFIG when a config directory is looked for.
 */
export function withEnv(config: TroupeConfig, env: NodeJS.ProcessEnv): TroupeConfig {
  const result = structuredClone(config);
  if (env.NATS_URL) result.nats.url = env.NATS_URL;
  if (env.OPENAI_BASE_URL) {
    const provider = result.providers.openai ?? Object.values(result.providers)[0];
    if (provider) provider.baseURL = env.OPENAI_BASE_URL;
  }
  return result;
}
