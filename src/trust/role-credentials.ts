import { join } from "node:path";
import { createUser, fromSeed } from "@nats-io/nkeys";
import { ROLES, type Role } from "../config/roles.js";
import { UserError } from "../errors.js";
import { createSecretFile, readSecretFile, secretExists } from "../util/secret-files.js";

/**
 * The NATS credentials of each role for the embedded nats-server: one nkey seed per role in
 * `<dataDir>/credentials/<role>.nk` (0600, in a 0700 dir). The daemon makes them before it starts
 * the server; every `troupe` command of the same data dir finds the one for its role.
 */
export function credentialsDir(dataDir: string): string {
  return join(dataDir, "credentials");
}

export function roleSeedFile(dataDir: string, role: Role): string {
  return join(credentialsDir(dataDir), `${role}.nk`);
}

/** Makes the seeds that are missing; returns each role's public key (`U…`). */
export function ensureRoleCredentials(dataDir: string): Record<Role, string> {
  const keys = {} as Record<Role, string>;
  for (const role of ROLES) {
    const file = roleSeedFile(dataDir, role);
    const pair = createUser();
    createSecretFile(file, `${new TextDecoder().decode(pair.getSeed())}\n`);
    keys[role] = publicKeyOfSeed(readSecretFile(file), file);
  }
  return keys;
}

/** The first of `roles` that has a seed file in the data dir, for a connection that names none. */
export function localSeedFile(
  dataDir: string,
  roles: readonly Role[],
): { role: Role; file: string } | undefined {
  for (const role of roles) {
    const file = roleSeedFile(dataDir, role);
    if (secretExists(file)) return { role, file };
  }
  return undefined;
}

export function publicKeyOfSeed(seed: string, where: string): string {
  try {
    return fromSeed(new TextEncoder().encode(seed.trim())).getPublicKey();
  } catch {
    throw new UserError(`${where}: not an nkey seed (it starts with SU and is 58 characters)`);
  }
}
