/**
 * Whether a value written after a secret-like name is a secret, or code, a reference or a
 * placeholder. Source text names secrets all the time without holding one (`const API_KEY =
 * process.env.SERVICE_KEY`, `let token = null`, `POSTGRES_PASSWORD: ${PG_PASS}`); what it holds
 * is a literal, and a literal key looks random.
 */

/** A name that ends in a secret word: `API_KEY`, `apiKey`, `DB_PASSWORD`, `accessToken`, `PG_PASS`. */
export const SECRET_NAME_WORDS =
  "(?:KEY|TOKEN|SECRETS?|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?|[_.-]PASS|[_.-]PWD)";

/** Names whose literal values are secrets however plain they look: a password need not be random. */
const PASSWORD_NAME = /(?:PASSWORD|PASSWD|PASSPHRASE|SECRETS?|[_.-]PASS|[_.-]PWD)$/i;

/** Values written to be replaced: `changeme`, `<your-key>`, `xxx`, `your_api_key_here`, `***`. */
const PLACEHOLDER =
  /^(?:<[^>]*>|\[[^\]]*\]|\{[^}]*\}|x+|\*+|\.+|…|-+|_+|0+|your[-_ ].*|.*[-_ ]here|(?:change|replace|fill|insert)[-_ ]?(?:me|this|it|in)(?:[-_ .].*)?|placeholder|example|dummy|sample|secret|password|(?:my|some|test|fake|dummy|example|sample)[-_ ]?(?:secret|password|pass|token|key|api[-_ ]?key)s?\d*|passw[o0]rd1?2?3?|redacted|todo|tbd|none|null|nil|empty|default|test|testing|\.\.\.)$/i;

/** `$VAR`, `${VAR}`, `${{ secrets.X }}`, `{{ .Values.x }}`, `%(name)s`, `<%= … %>`: the value lives elsewhere. */
const REFERENCE = /^(?:\$|\{\{|%\(|<%|#\{)/;

/** Values that are code: keywords and literals of a language, numbers. */
const CODE_WORD =
  /^(?:null|undefined|true|false|none|nil|this|self|new|await|yield|typeof|void|function|async|lambda|yes|no|on|off|NaN|Infinity|-?\d[\d_.]*(?:e-?\d+)?n?|0x[\da-f]+)$/i;

/** An identifier followed by a call, an index, a member or generics: `getPassword()`, `env.KEY`, `a[0]`. */
const EXPRESSION = /^[A-Za-z_$@#][\w$]*\s*(?:\??\.[A-Za-z_$]|\(|\[|<|!|\?\?|\|\||&&|\+|\s+as\b)/;

/** Where a value is written: quoted (a string literal) or bare; `env` for a whole `NAME=value` line. */
export type ValueContext = "quoted" | "bare" | "env";

/** The allowed values of `redaction.allow`: a value one of them matches whole is kept. */
export type Allowed = (value: string) => boolean;

export function allowList(patterns: readonly string[]): Allowed {
  if (patterns.length === 0) return () => false;
  const whole = new RegExp(`^(?:${patterns.map((p) => `(?:${p})`).join("|")})$`, "u");
  return (value) => whole.test(value);
}

/** Whether `value` (its quotes taken off), written after `name`, is a secret. */
export function isSecretValue(name: string, value: string, context: ValueContext): boolean {
  const v = context === "bare" ? value.replace(/[;,)\]}]+$/, "") : value;
  if (v.length === 0 || v.startsWith("[REDACTED") || REFERENCE.test(v) || PLACEHOLDER.test(v)) return false;
  if (v.includes("${")) return false;
  if (context === "bare" && (CODE_WORD.test(v) || EXPRESSION.test(v) || /[()[\]{}]/.test(v))) return false;
  if (looksRandom(v)) return true;
  // A bare word after `password:` is as likely an identifier (`{ password: userPassword }`) as YAML.
  return context !== "bare" && PASSWORD_NAME.test(name) && v.length >= 8 && !/\s/.test(v);
}

/**
 * A key, token or hash rather than words or a path: 16 characters or more, no spaces, letters and
 * digits mixed, about as varied as random text (Shannon entropy ≥ 3.5 bits a character), and not
 * mostly lower-case letters (identifiers and slugs are; random text in 62 or 64 characters isn't).
 */
export function looksRandom(value: string): boolean {
  if (value.length < 16 || value.length > 4096 || !/^[\x21-\x7e]+$/.test(value)) return false;
  if (value.includes("://") || /^(?:\.{0,2}\/|~\/)/.test(value)) return false;
  if (!/[A-Za-z]/.test(value) || !/\d/.test(value)) return false;
  if (/^[\da-f]{32,}$/i.test(value)) return true;
  if (entropy(value) < 3.5) return false;
  const digits = count(value, /\d/g) / value.length;
  const lower = count(value, /[a-z]/g) / value.length;
  const upper = /[A-Z]/.test(value);
  return digits >= 0.2 || (upper && lower > 0 && lower <= 0.6);
}

/** Shannon entropy in bits a character. */
export function entropy(value: string): number {
  const counts = new Map<string, number>();
  for (const char of value) counts.set(char, (counts.get(char) ?? 0) + 1);
  let bits = 0;
  for (const n of counts.values()) {
    const p = n / value.length;
    bits -= p * Math.log2(p);
  }
  return bits;
}

function count(value: string, pattern: RegExp): number {
  return value.match(pattern)?.length ?? 0;
}
