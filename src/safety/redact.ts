/**
 * Removes secrets from text before it leaves a tool, reaches the bus, a log or stored state: known
 * key formats, `NAME=value` for secret-like names, and the literal values of secrets this process
 * knows (API keys in the environment and the config).
 */

/** A name that ends in a secret word: `API_KEY`, `apiKey`, `DB_PASSWORD`, `accessToken`, `CREDENTIALS`. */
const SECRET_NAME = /(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?)$/i;

const PATTERNS: Array<[kind: string, pattern: RegExp]> = [
  ["private-key", /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g],
  ["anthropic-key", /\bsk-ant-[A-Za-z0-9_-]{20,}/g],
  ["openai-key", /\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}/g],
  ["github-token", /\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})/g],
  ["aws-access-key", /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g],
  ["slack-token", /\bxox[abposr]-[A-Za-z0-9-]{10,}/g],
  ["slack-webhook", /https:\/\/hooks\.slack\.com\/services\/[A-Za-z0-9/_-]+/g],
  ["jwt", /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g],
];

/** `NAME=value`, `NAME: value`, `"name": "value"` for secret-like names. */
const ASSIGNMENT =
  /(["']?)([A-Za-z0-9_.-]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?))\1(\s*[=:]\s*)("[^"\n]*"|'[^'\n]*'|[^\s"',;]+)/gi;

/**
 * Every pattern above and every assignment holds one of these (matched more loosely, ignoring case):
 * a string with none of them skips the nine regular expressions.
 */
const MIGHT_HOLD_SECRET =
  /-----BEGIN|sk-|gh[pousr]_|github_pat_|AKIA|ASIA|xox[abposr]-|hooks\.slack\.com|eyJ|KEY|TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL/i;

/** Values shorter than this are not treated as secrets by value (too likely to be ordinary words). */
const MIN_LITERAL = 8;

export class Redactor {
  #literals: string[];

  constructor(literals: Iterable<string> = []) {
    this.#literals = [...new Set([...literals].filter((value) => value.length >= MIN_LITERAL))].sort(
      (a, b) => b.length - a.length,
    );
  }

  /** A redactor knowing the secret-like variables of `env` and the named key variables. */
  static fromEnv(env: NodeJS.ProcessEnv, keyVariables: Iterable<string> = []): Redactor {
    const names = new Set(keyVariables);
    const literals: string[] = [];
    for (const [name, value] of Object.entries(env)) {
      if (value && (names.has(name) || SECRET_NAME.test(name))) literals.push(value);
    }
    return new Redactor(literals);
  }

  /** Another redactor that also knows these values. */
  with(literals: Iterable<string>): Redactor {
    return new Redactor([...this.#literals, ...literals]);
  }

  redact(text: string): string {
    let out = text;
    for (const literal of this.#literals)
      if (out.includes(literal)) out = out.split(literal).join("[REDACTED]");
    if (!MIGHT_HOLD_SECRET.test(out)) return out;
    for (const [kind, pattern] of PATTERNS) out = out.replace(pattern, `[REDACTED:${kind}]`);
    out = out.replace(ASSIGNMENT, (match, quote: string, name: string, sep: string, value: string) =>
      value.startsWith("[REDACTED") || /^\$|^\{\{/.test(value)
        ? match
        : `${quote}${name}${quote}${sep}[REDACTED]`,
    );
    return out;
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
