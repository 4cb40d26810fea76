import type { LoadedConfig } from "../config/load.js";
import type { Logger } from "../log.js";
import { ModelRouter } from "../model/model-router.js";
import { openTelemetry } from "../telemetry/otel-setup.js";
import type { Telemetry } from "../telemetry/telemetry.js";

/**
 * A process's telemetry from its config and environment (docs/telemetry.md): undefined when it is
 * off. `role` says what the process is on its resource (`daemon`, `worker`, `local`).
 */
export function processTelemetry(
  config: LoadedConfig,
  role: string,
  log?: Logger,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Telemetry | undefined> {
  const models = new ModelRouter(config.troupe, { env });
  return openTelemetry(config.troupe.telemetry, {
    role,
    env,
    log,
    providerOf: (model) => {
      try {
        return models.resolve(model).provider;
      } catch {
        return undefined;
      }
    },
  });
}
