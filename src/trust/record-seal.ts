import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { join } from "node:path";
import { createSecretFile, readSecretFile } from "../util/secret-files.js";

/**
 * A seal on what only the daemon writes and reads (the run index): an HMAC with a key kept in its
 * data dir. Bucket permissions say who may publish on a key's subject, but whoever may read a stream
 * can have the server write a stored message over any key, so the daemon takes a record for its own
 * only when the seal is right. Canonical JSON (sorted keys) is what is sealed.
 */
export class RecordSeal {
  constructor(private readonly key: Buffer) {}

  /** The daemon's seal key, `<dataDir>/credentials/records.key` (0600), made on first use. */
  static forDataDir(dataDir: string): RecordSeal {
    const file = join(dataDir, "credentials", "records.key");
    createSecretFile(file, randomBytes(32).toString("base64"));
    return new RecordSeal(Buffer.from(readSecretFile(file).trim(), "base64"));
  }

  /** A key of this process only: records it seals mean nothing to the next one. */
  static ephemeral(): RecordSeal {
    return new RecordSeal(randomBytes(32));
  }

  seal<T extends object>(record: T): T & { seal: string } {
    const { seal: _old, ...rest } = record as T & { seal?: string };
    return { ...(rest as T), seal: this.#mac(rest) };
  }

  /** The record without its seal when the seal is this key's over it; otherwise undefined. */
  open<T extends object>(value: unknown, text?: (value: unknown) => string): T | undefined {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
    const { seal, ...rest } = value as { seal?: unknown };
    if (typeof seal !== "string") return undefined;
    const expected = Buffer.from(this.#mac(rest, text), "base64");
    const given = Buffer.from(seal, "base64");
    return given.length === expected.length && timingSafeEqual(given, expected) ? (rest as T) : undefined;
  }

  /**
   * As `seal`, over the record's JSON as written (its keys in their order), not its canonical form:
   * for what is large and written often (snapshots), where sorting every key of a conversation
   * costs ten times its JSON. A value read back from JSON writes out the same again.
   */
  sealAsWritten<T extends object>(record: T): T & { seal: string } {
    const { seal: _old, ...rest } = record as T & { seal?: string };
    return { ...(rest as T), seal: this.#mac(rest, JSON.stringify) };
  }

  /** `open` for what `sealAsWritten` sealed. */
  openAsWritten<T extends object>(value: unknown): T | undefined {
    return this.open(value, JSON.stringify);
  }

  #mac(value: unknown, text: (value: unknown) => string = canonical): string {
    return createHmac("sha256", this.key).update(text(value)).digest("base64");
  }
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}
