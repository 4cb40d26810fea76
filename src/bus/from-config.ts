import { resolve } from "node:path";
import type { NatsConfig } from "../config/schema.js";
import type { NatsConnectOptions } from "./nats-connect.js";

/**
 * Connection options from troupe.yaml's `nats:`. Secrets named by `passwordEnv` / `tokenEnv` are
 * read from the environment; file paths are relative to the config directory.
 */
export function natsOptionsFromConfig(
  nats: NatsConfig,
  configDir: string,
  env: NodeJS.ProcessEnv = process.env,
): NatsConnectOptions & { prefix: string } {
  const options: NatsConnectOptions & { prefix: string } = { url: nats.url, prefix: nats.prefix };
  const fromEnv = (name: string | undefined) => (name === undefined ? undefined : env[name]);
  const password = nats.password ?? fromEnv(nats.passwordEnv);
  const token = nats.token ?? fromEnv(nats.tokenEnv);
  if (nats.user !== undefined) options.user = nats.user;
  if (password !== undefined) options.password = password;
  if (token !== undefined) options.token = token;
  if (nats.nkeySeedFile) options.nkeySeedFile = resolve(configDir, nats.nkeySeedFile);
  if (nats.credsFile) options.credsFile = resolve(configDir, nats.credsFile);
  if (nats.tls) {
    options.tls = {};
    if (nats.tls.caFile) options.tls.caFile = resolve(configDir, nats.tls.caFile);
    if (nats.tls.certFile) options.tls.certFile = resolve(configDir, nats.tls.certFile);
    if (nats.tls.keyFile) options.tls.keyFile = resolve(configDir, nats.tls.keyFile);
  }
  return options;
}
