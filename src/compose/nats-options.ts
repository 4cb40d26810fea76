import { resolve } from "node:path";
import type { NatsConnectOptions } from "../bus/nats-connect.js";
import { roleInbox } from "../bus/permissions.js";
import type { NatsConfig } from "../config/nats-schema.js";
import type { Role } from "../config/roles.js";
import { localSeedFile } from "../trust/role-credentials.js";
import { pinnedServerCa } from "../trust/server-tls.js";

/** Where a connection that troupe.yaml gives no credentials for looks for the embedded server's. */
export interface LocalCredentials {
  dataDir: string;
  /** The roles this command may connect as, the one it prefers first. */
  roles: readonly Role[];
}

/**
 * Connection options from troupe.yaml's `nats:`. Secrets named by `passwordEnv` / `tokenEnv` are
 * read from the environment; file paths are relative to the config directory. When `nats:` names no
 * credentials at all, the first of `local.roles` whose seed the daemon wrote in the data dir is used:
 * that is how every command on the daemon's machine reaches the embedded server with no flags.
 */
export function natsOptionsFromConfig(
  nats: NatsConfig,
  configDir: string,
  env: NodeJS.ProcessEnv = process.env,
  local?: LocalCredentials,
): NatsConnectOptions & { prefix: string; role?: Role } {
  const options: NatsConnectOptions & { prefix: string; role?: Role } = {
    url: nats.url,
    prefix: nats.prefix,
  };
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
  const named = nats.user ?? nats.token ?? nats.tokenEnv ?? nats.nkeySeedFile ?? nats.credsFile;
  if (local) {
    // Credentials troupe.yaml names are of its `role`, else of the role this command prefers.
    const seed = named === undefined ? localSeedFile(local.dataDir, local.roles) : undefined;
    if (seed) {
      options.nkeySeedFile = seed.file;
      options.credentialsFrom = `the ${seed.role}'s seed of data dir ${local.dataDir}: a daemon of another data dir has other seeds; set TROUPE_DATA_DIR, or troupe.yaml's dataDir, to the daemon's`;
    }
    // On loopback, where the data dir's daemon runs its server: that server must show a certificate
    // of the data dir's CA (troupe.yaml's `nats.tls` names another).
    const ca = !nats.tls && loopbackOnly(nats.url) ? pinnedServerCa(local.dataDir) : undefined;
    if (ca) options.tls = { caFile: ca, pinned: true };
    const role = seed?.role ?? nats.role ?? local.roles[0];
    if (role) {
      options.role = role;
      options.inboxPrefix = roleInbox(nats.prefix, role);
    }
  }
  return options;
}

/** Whether every server a URL names is on this machine's loopback (where the embedded server runs). */
function loopbackOnly(url: string): boolean {
  return url.split(",").every((server) => {
    try {
      const host = new URL(server.trim().replace(/^(nats|tls):/, "http:")).hostname;
      return host === "localhost" || host === "[::1]" || /^127\./.test(host);
    } catch {
      return false;
    }
  });
}
