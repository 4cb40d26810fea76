import { expect, it } from "vitest";
import { Redactor } from "../../src/safety/redact.js";

/* ATTACK: tool output shaped to make redaction quadratic froze the agent: every tool result, event
 * and log line is redacted on the agent's own thread, so Ctrl-C, budgets and heartbeats stopped with
 * it. A run of name characters after a secret-like word (`token a-a-a-…`), an unclosed quoted
 * password, a URL scheme's characters repeated and `eyJ` inside a base64url run each cost seconds at
 * 20,000 units; at 120,000 a minute. Each is redacted here in one pass, with the test's own timeout. */

const N = 120_000;
const redactor = new Redactor(["a-secret-from-the-environment"]);

it.each([
  ["a run of name characters after a secret-like word", `token ${"a-".repeat(N)}`],
  ["an unclosed quoted password", `password="${"a.".repeat(N)}`],
  ["a URL scheme's characters", `https://u:${"a.".repeat(N)}`],
  ["eyJ inside a base64url run", "a-eyJ".repeat(N)],
])(
  "%s is redacted in one pass",
  (_, text) => {
    const planted = `${text}\nAPI_KEY=Zx81Kq9Lm2Pw7Rt5Yv3N\n`;
    const out = redactor.redact(planted);
    expect(out.endsWith("API_KEY=[REDACTED]\n")).toBe(true);
    expect(out.length).toBeLessThan(planted.length);
  },
  10_000,
);
