/** Secrets known by their shape wherever they appear: vendors' key formats, PEM keys, JWTs, nkey seeds. */
export const SECRET_FORMATS: ReadonlyArray<[kind: string, pattern: RegExp]> = [
  ["private-key", /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g],
  ["anthropic-key", /\bsk-ant-[A-Za-z0-9_-]{20,}/g],
  ["openai-key", /\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}/g],
  ["github-token", /\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})/g],
  ["gitlab-token", /\bglpat-[A-Za-z0-9_-]{20,}/g],
  ["aws-access-key", /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g],
  ["google-api-key", /\bAIza[0-9A-Za-z_-]{35}/g],
  ["stripe-key", /\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}/g],
  ["slack-token", /\bxox[abposr]-[A-Za-z0-9-]{10,}/g],
  ["slack-webhook", /https:\/\/hooks\.slack\.com\/services\/[A-Za-z0-9/_-]+/g],
  ["npm-token", /\bnpm_[A-Za-z0-9]{36}\b/g],
  ["huggingface-token", /\bhf_[A-Za-z]{34}\b/g],
  ["nkey-seed", /\bS[UAONCPX][A-Z2-7]{56}\b/g],
  // Tried where a run of base64url starts: at each `eyJ` inside one (`a-eyJa-eyJ…`), the first part
  // would be scanned to the run's end again, seconds for a long one.
  ["jwt", /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g],
];

/**
 * Every format above holds one of these: a string with none of them skips the expressions. Looser
 * than the formats (case ignored), so it errs towards looking.
 */
export const FORMAT_HINT =
  /-----BEGIN|sk-|gh[pousr]_|github_pat_|glpat-|AKIA|ASIA|AIza|[rs]k_(?:live|test)_|xox[abposr]-|hooks\.slack\.com|npm_|hf_|\bS[UAONCPX][A-Z2-7]{20}|eyJ/i;

/** `kind: Secret`, a Kubernetes Secret: every value of its `data:` and `stringData:` is a secret. */
const K8S_SECRET = /^kind:\s*["']?Secret["']?\s*$/m;
const DATA_BLOCK = /^([ \t]*)(?:data|stringData):[ \t]*\n((?:\1[ \t]+[^\n]*\n?)+)/gm;
const DATA_ENTRY = /^([ \t]+["']?[\w.-]+["']?:[ \t]*)(?![|>][-+]?[ \t]*$)(\S[^\n]*)$/gm;

/** The text with the values of a Kubernetes Secret's `data:` and `stringData:` redacted. */
export function redactK8sSecrets(text: string): string {
  if (!K8S_SECRET.test(text)) return text;
  return text
    .split(/^(?=---)/m)
    .map((doc) =>
      K8S_SECRET.test(doc)
        ? doc.replace(DATA_BLOCK, (block) =>
            block.replace(DATA_ENTRY, (entry, head: string, value: string) =>
              /^\$|^\{\{|^["']{2}$/.test(value) ? entry : `${head}[REDACTED:k8s-secret]`,
            ),
          )
        : doc,
    )
    .join("");
}
