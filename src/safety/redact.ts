import { FORMAT_HINT, redactK8sSecrets, SECRET_FORMATS } from "./secret-formats.js";
import {
  type Allowed,
  allowList,
  isSecretValue,
  looksRandom,
  SECRET_NAME_WORDS,
  type ValueContext,
} from "./secret-values.js";

/**
 * Removes secrets from text before it leaves a tool, reaches the bus, a log or stored state: the
 * values of secrets this process knows (secret-like variables of the environment, the providers'
 * keys, the NATS secrets), known key formats, and literal values after a secret-like name that are
 * secrets (secret-values.ts). Code that only names a secret (`const API_KEY = process.env.KEY`,
 * `let token = null`) is left exactly as it is: a coding agent reads and edits it.
 */

/**
 * Environment variables whose values are secrets: `*_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`, …;
 * not one that names where a secret is (`POSTGRES_PASSWORD_FILE`, `PASSWORD_STORE_DIR`).
 */
const SECRET_VARIABLE =
  /^(?!.*_(?:FILE|DIR|PATH|CMD|COMMAND)$)(?:.*(?:KEY|TOKEN|SECRETS?|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?|_PASS|_PWD)$|.*(?:SECRET|PASSWORD))/i;

/**
 * `NAME=value`, `NAME: value`, `"name": "value"`, `name := value` for secret-like names: the name
 * (quoted or not), the separator, and the value (a quoted string or a bare run up to a space). A
 * name is tried only where a run of name characters starts (not at each `\b` inside one), so a long
 * run costs one pass, not one per character: `a-a-a-…` of 120,000 characters took seconds.
 */
const ASSIGNMENT = new RegExp(
  String.raw`(["'\x60]?)(?<![A-Za-z0-9_.-])([A-Za-z0-9_.-]*${SECRET_NAME_WORDS})\1(\s*(?::=|=(?![=>~])|:(?![:=]))[ \t]*)("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|\x60[^\x60\n]*\x60|[^\s"'\x60]+)`,
  "gi",
);

/** A line that is nothing but `NAME=value` (a .env file, a shell script): its value is a literal. */
const ENV_LINE_START = /(?:^|\n)[ \t]*(?:export[ \t]+|-[ \t]+)?$/;

/** The password of a URL's user: `postgres://shop:PASSWORD@db/shop`. A scheme is tried where a run of its characters starts. */
const URL_PASSWORD = /((?<![a-z0-9+.-])[a-z][a-z0-9+.-]*:\/\/[^\s/:@'"`]+:)([^\s/@'"`]+)@/gi;

/** An `Authorization: Bearer TOKEN` header's token, whatever the header is called. */
const BEARER = /(\bBearer\s+)([A-Za-z0-9._~+/-]{16,}=*)/g;

/** Every assignment holds one of these (case ignored): a string with none skips the expression. */
const NAME_HINT = /KEY|TOKEN|SECRET|PASS|PWD|CREDENTIAL/i;

/** Values shorter than this are not treated as secrets by value (too likely to be ordinary words). */
const MIN_LITERAL = 8;

export class Redactor {
  #literals: string[];
  #allow: readonly string[];
  #allowed: Allowed;

  /**
   * `literals`: values known to be secrets (the environment's, the config's), hidden wherever they
   * appear, whatever `allow` says: a troupe.yaml cannot hand the user's own keys to the model.
   * `allow`: `redaction.allow`, values found by their shape that are kept.
   */
  constructor(literals: Iterable<string> = [], allow: readonly string[] = []) {
    this.#allow = allow;
    this.#allowed = allowList(allow);
    this.#literals = [...new Set([...literals].filter((value) => value.length >= MIN_LITERAL))].sort(
      (a, b) => b.length - a.length,
    );
  }

  /** A redactor knowing the secret-like variables of `env` and the named key variables. */
  static fromEnv(
    env: NodeJS.ProcessEnv,
    keyVariables: Iterable<string> = [],
    allow: readonly string[] = [],
  ): Redactor {
    const names = new Set(keyVariables);
    const literals: string[] = [];
    for (const [name, value] of Object.entries(env)) {
      if (value && (names.has(name) || SECRET_VARIABLE.test(name))) literals.push(value);
    }
    return new Redactor(literals, allow);
  }

  /** Another redactor that also knows these values. */
  with(literals: Iterable<string>): Redactor {
    return new Redactor([...this.#literals, ...literals], this.#allow);
  }

  redact(text: string): string {
    let out = text;
    for (const literal of this.#literals)
      if (out.includes(literal)) out = out.split(literal).join("[REDACTED]");
    if (FORMAT_HINT.test(out))
      for (const [kind, pattern] of SECRET_FORMATS)
        out = out.replace(pattern, (match) => (this.#allowed(match) ? match : `[REDACTED:${kind}]`));
    if (out.includes("://"))
      out = out.replace(URL_PASSWORD, (match, head: string, password: string) =>
        isSecretValue("password", password, "quoted") && !this.#allowed(password)
          ? `${head}[REDACTED]@`
          : match,
      );
    if (/bearer\s/i.test(out))
      out = out.replace(BEARER, (match, head: string, token: string) =>
        looksRandom(token) && !this.#allowed(token) ? `${head}[REDACTED]` : match,
      );
    if (!NAME_HINT.test(out)) return out;
    out = redactK8sSecrets(out);
    return out.replace(
      ASSIGNMENT,
      (match, quote: string, name: string, sep: string, value: string, offset: number, whole: string) => {
        const quoted = /^["'`]/.test(value);
        const inner = quoted ? value.slice(1, -1) : value;
        const context: ValueContext = quoted
          ? "quoted"
          : sep === "=" && ENV_LINE_START.test(whole.slice(Math.max(0, offset - 80), offset))
            ? "env"
            : "bare";
        if (!isSecretValue(name, inner, context) || this.#allowed(inner)) return match;
        // A bare value keeps what closes its statement or list: `token: …;` stays `token: [REDACTED];`.
        const tail = quoted ? "" : (/[;,)\]}]+$/.exec(value)?.[0] ?? "");
        return `${quote}${name}${quote}${sep}${quoted ? `${value[0]}[REDACTED]${value[0]}` : `[REDACTED]${tail}`}`;
      },
    );
  }

  /**
   * Every string in a JSON-like value, redacted; other values as they are. An array or object with
   * nothing to redact inside is returned itself, not copied: a snapshot or an event, nearly always
   * clean, costs a walk and no garbage. One that changed is a copy; the value given is never changed.
   */
  redactDeep<T>(value: T): T {
    if (typeof value === "string") return this.redact(value) as T;
    if (Array.isArray(value)) {
      let copy: unknown[] | undefined;
      for (let i = 0; i < value.length; i++) {
        const item: unknown = value[i];
        const clean = this.redactDeep(item);
        if (clean !== item) copy ??= value.slice();
        if (copy) copy[i] = clean;
      }
      return (copy ?? value) as T;
    }
    if (value && typeof value === "object") {
      let copy: Record<string, unknown> | undefined;
      for (const key of Object.keys(value)) {
        const item = (value as Record<string, unknown>)[key];
        const clean = this.redactDeep(item);
        if (clean !== item) copy ??= { ...(value as Record<string, unknown>) };
        if (copy) copy[key] = clean;
      }
      return (copy ?? value) as T;
    }
    return value;
  }
}
