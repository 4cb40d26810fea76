/**
 * A nats-server as `troupe daemon` starts its own: TLS on a certificate of a CA of its data dir, and
 * Troupe's two accounts (the hosts' streams and buckets; the people's imports, with no JetStream).
 * What a user runs by default, for the bench's rows and the soak to measure on.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NatsServerProcess } from "../src/bus/embedded-nats.js";
import { NatsBus } from "../src/bus/nats-bus.js";
import { accountsBlock, roleInbox } from "../src/bus/permissions.js";
import { ROLES, type Role } from "../src/config/roles.js";
import { silentLogger } from "../src/log.js";
import { ensureRoleCredentials, roleSeedFile } from "../src/trust/role-credentials.js";
import { ensureServerTls, serverTlsBlock } from "../src/trust/server-tls.js";

export interface DefaultServer {
  url: string;
  /** The data dir whose seeds and CA the server takes: a `troupe` command given it connects as its roles. */
  dataDir: string;
  /** A bus as `role`, with its seed, its inbox and the CA pinned, as a `troupe` command connects. */
  as(role: Role, prefix: string): Promise<NatsBus>;
  /** Stopped and started again on the same store and port (the soak's fault). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The credentials, the CA and the server's config of a data dir, as the daemon writes them for its
 * own server, one pair of accounts per prefix; returns the config file's path.
 */
export function writeDefaultServerConfig(dataDir: string, conf: string, prefixes: string[]): string {
  const keys = ensureRoleCredentials(dataDir);
  const users = ROLES.map((role) => ({ role, nkey: keys[role] }));
  const blocks = prefixes.map((prefix) => accountsBlock(users, prefix));
  writeFileSync(conf, mergeAccounts(blocks) + serverTlsBlock(ensureServerTls(dataDir)));
  return conf;
}

export async function defaultServer(prefixes: string[], port?: number): Promise<DefaultServer> {
  const root = mkdtempSync(join(tmpdir(), "troupe-bench-default-"));
  const dataDir = join(root, "data");
  const conf = writeDefaultServerConfig(dataDir, join(root, "server.conf"), prefixes);
  const tls = ensureServerTls(dataDir);
  const start = (at?: number) =>
    NatsServerProcess.start({
      storeDir: join(root, "store"),
      args: ["-c", conf],
      ...(at ? { port: at } : {}),
    });
  let server = await start(port);
  const url = `nats://127.0.0.1:${server.port}`;
  return {
    url,
    dataDir,
    as: (role, prefix) =>
      NatsBus.connect({
        url,
        prefix,
        role,
        nkeySeedFile: roleSeedFile(dataDir, role),
        inboxPrefix: roleInbox(prefix, role),
        tls: { caFile: tls.ca, pinned: true },
        log: silentLogger,
      }),
    restart: async () => {
      await server.stop();
      server = await start(server.port);
    },
    stop: async () => {
      await server.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** The `accounts { … }` blocks of several prefixes, as one block. */
function mergeAccounts(blocks: string[]): string {
  const inner = blocks.map((block) =>
    block
      .trim()
      .replace(/^accounts \{\n/, "")
      .replace(/\n\}$/, ""),
  );
  return `accounts {\n${inner.join("\n")}\n}\n`;
}
