import { accountsBlock } from "../bus/permissions.js";
import { type ConfigChoice, loadConfig } from "../config/load.js";
import { dataDir } from "../config/paths.js";
import { ROLES, type Role } from "../config/roles.js";
import { UserError } from "../errors.js";
import { createKey, keysDir, localIdentity } from "../trust/approvers.js";
import { ensureRoleCredentials, roleSeedFile } from "../trust/role-credentials.js";
import { pinnedServerCa } from "../trust/server-tls.js";
import { readSecretFile, secretExists } from "../util/secret-files.js";
import { table } from "./table.js";

/** `troupe keys create NAME`: a new approver key; prints its public key for the daemon's troupe.yaml. */
export function runKeysCreate(where: ConfigChoice, name: string): number {
  const config = loadConfig(where);
  const { file, publicKey } = createKey(dataDir(config.troupe.dataDir), name);
  process.stdout.write(`${publicKey}\n`);
  process.stderr.write(
    `wrote ${file} (keep it private). A daemon of this data dir trusts it already; for another, add to its troupe.yaml:\n  approvers:\n    ${name}: ${publicKey}\nthen answer as ${name} with TROUPE_APPROVER_KEY=${file}\n`,
  );
  return 0;
}

/** `troupe keys list`: the keys in this data dir and the approvers troupe.yaml trusts. */
export function runKeysList(where: ConfigChoice): number {
  const config = loadConfig(where);
  const data = dataDir(config.troupe.dataDir);
  const own = localIdentity(data);
  const rows: string[][] = [[own.name, own.publicKey, `this user (${keysDir(data)})`]];
  for (const [name, key] of Object.entries(config.troupe.approvers)) rows.push([name, key, "troupe.yaml"]);
  process.stdout.write(`${table(["NAME", "PUBLIC KEY", "FROM"], rows)}\n`);
  return 0;
}

export class CredentialsUsageError extends UserError {
  override name = "CredentialsUsageError";
}

/**
 * `troupe credentials [ROLE] [--server-config]`: the embedded server's role credentials, to hand to
 * a worker or an observer on another host (the seed of ROLE, for its `nats.nkeySeedFile`), or the
 * `accounts` block for a nats-server of your own.
 */
export function runCredentials(
  where: ConfigChoice,
  role: string | undefined,
  flags: { serverConfig?: boolean; ca?: boolean },
): number {
  const config = loadConfig(where);
  const data = dataDir(config.troupe.dataDir);
  if (flags.ca) {
    const ca = pinnedServerCa(data);
    if (!ca)
      throw new CredentialsUsageError(
        `no CA in data dir ${data}: its daemon makes one when it first starts its own nats-server`,
      );
    process.stdout.write(`${ca}\n`);
    return 0;
  }
  // Seeds are the daemon's to make (a server config is made to be used with new ones): made here for
  // a data dir no daemon uses, they would be handed out and refused.
  if (!flags.serverConfig && !ROLES.some((r) => secretExists(roleSeedFile(data, r))))
    throw new CredentialsUsageError(
      `no credentials in data dir ${data}: its daemon makes them at its first start; if yours runs with another data dir, set TROUPE_DATA_DIR (or troupe.yaml's dataDir) to that one`,
    );
  const keys = ensureRoleCredentials(data);
  if (flags.serverConfig) {
    const users = ROLES.map((r) => ({ role: r, nkey: keys[r] }));
    process.stdout.write(accountsBlock(users, config.troupe.nats.prefix));
    return 0;
  }
  if (role === undefined) {
    const rows = ROLES.map((r) => [r, keys[r], roleSeedFile(data, r)]);
    process.stdout.write(`${table(["ROLE", "PUBLIC KEY", "SEED FILE"], rows)}\n`);
    return 0;
  }
  if (!(ROLES as readonly string[]).includes(role))
    throw new CredentialsUsageError(`no role "${role}": the roles are ${ROLES.join(", ")}`);
  process.stdout.write(readSecretFile(roleSeedFile(data, role as Role)));
  process.stderr.write(
    `that is the ${role}'s seed: save it on the other host as ${role}.nk (chmod 600) and set nats.nkeySeedFile: ${role}.nk in its troupe.yaml; the embedded server's TLS is checked against the CA troupe credentials --ca names (nats.tls.caFile)\n`,
  );
  return 0;
}
