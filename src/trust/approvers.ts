import { readdirSync } from "node:fs";
import { userInfo } from "node:os";
import { join } from "node:path";
import { createUser, fromPublic, fromSeed, type KeyPair } from "@nats-io/nkeys";
import { UserError } from "../errors.js";
import { createSecretFile, readSecretFile, secretExists } from "../util/secret-files.js";

/** Approver names: what `by` shows. */
export const APPROVER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** An nkey user public key: `U` and 55 base32 characters. */
export const PUBLIC_KEY = /^U[A-Z2-7]{55}$/;

export class KeyError extends UserError {
  override name = "KeyError";
}

/** Someone who signs answers to approvals: a name and an ed25519 key pair (an nkey). */
export interface Identity {
  readonly name: string;
  readonly publicKey: string;
  sign(data: Uint8Array): Uint8Array;
}

export function keysDir(dataDir: string): string {
  return join(dataDir, "keys");
}

/** `troupe keys create NAME`: a new key in the data dir; refuses to replace one. */
export function createKey(dataDir: string, name: string): { file: string; publicKey: string } {
  if (!APPROVER_NAME.test(name))
    throw new KeyError(`key name "${name}" must be letters, digits, ".", "_" or "-" (up to 64)`);
  const file = join(keysDir(dataDir), `${name}.nk`);
  const pair = createUser();
  if (!createSecretFile(file, `${new TextDecoder().decode(pair.getSeed())}\n`))
    throw new KeyError(`${file} exists: a key is never replaced; choose another name or remove it first`);
  return { file, publicKey: pair.getPublicKey() };
}

/**
 * The identity this process signs with: the seed file `TROUPE_APPROVER_KEY` names (its name is the
 * file's, without `.nk`), else the local user's key in the data dir, made on first use.
 */
export function localIdentity(dataDir: string, env: NodeJS.ProcessEnv = process.env): Identity {
  const file = env.TROUPE_APPROVER_KEY;
  if (file) return identityFromFile(file);
  const name = safeName(userInfo().username);
  const own = join(keysDir(dataDir), `${name}.nk`);
  if (!secretExists(own)) createSecretFile(own, `${new TextDecoder().decode(createUser().getSeed())}\n`);
  return identityFromFile(own);
}

export function identityFromFile(file: string): Identity {
  const name = (file.split("/").pop() ?? "").replace(/\.nk$/, "");
  if (!APPROVER_NAME.test(name))
    throw new KeyError(`${file}: name the file NAME.nk, NAME being the approver's`);
  const pair = pairOf(readSecretFile(file), file);
  return { name, publicKey: pair.getPublicKey(), sign: (data) => pair.sign(data) };
}

/**
 * Whose answers a host acts on: the approvers troupe.yaml lists (`approvers: {name: publicKey}`)
 * and every key in the host's own data dir (the local user's and those `troupe keys create` made).
 * The data dir is read again when an unknown key shows up, so a key made after the host started
 * is trusted without a restart.
 */
export class ApproverTrust {
  #local = new Map<string, string>();

  constructor(
    private readonly listed: Readonly<Record<string, string>>,
    private readonly dataDir: string | undefined,
  ) {}

  /** The trusted name of a public key, or undefined. */
  nameOf(publicKey: string): string | undefined {
    for (const [name, key] of Object.entries(this.listed)) if (key === publicKey) return name;
    if (!this.#local.has(publicKey)) this.#rescan();
    return this.#local.get(publicKey);
  }

  /** Whether `signature` is `publicKey`'s over `data`. */
  static verify(publicKey: string, data: Uint8Array, signature: Uint8Array): boolean {
    try {
      return fromPublic(publicKey).verify(data, signature);
    } catch {
      return false;
    }
  }

  #rescan(): void {
    if (!this.dataDir) return;
    let files: string[];
    try {
      files = readdirSync(keysDir(this.dataDir)).filter((file) => file.endsWith(".nk"));
    } catch {
      return;
    }
    for (const file of files) {
      try {
        const identity = identityFromFile(join(keysDir(this.dataDir), file));
        this.#local.set(identity.publicKey, identity.name);
      } catch {
        // A key file others can read is not trusted: its seed may not be its owner's alone.
      }
    }
  }
}

function pairOf(seed: string, where: string): KeyPair {
  try {
    return fromSeed(new TextEncoder().encode(seed.trim()));
  } catch {
    throw new KeyError(`${where}: not a key seed (troupe keys create NAME makes one)`);
  }
}

/** A user name as a key name: characters outside the allowed set become "_". */
function safeName(name: string): string {
  const cleaned = name.replace(/[^A-Za-z0-9._-]/g, "_").replace(/^[._-]+/, "");
  return APPROVER_NAME.test(cleaned) ? cleaned : "local";
}
