import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { Redactor } from "../../src/safety/redact.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, tempTree } from "../support/cli.js";

/* ATTACK (on the user, by Troupe itself): redaction that judges code by its shape. `const API_KEY =
 * process.env.SERVICE_KEY;`, `const password = getPassword();` and `let token = null;` reached the
 * model as `… = [REDACTED];`, so a coding agent could neither read nor edit_file them. Only values
 * that are secrets may be hidden: this repository's own sources and common config files come through
 * exactly; every planted secret, of every format, does not. */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** Planted secrets, put together here so that this file's own text holds none of them whole. */
const join_ = (...parts: string[]) => parts.join("");
const PLANTED = {
  openai: join_("sk-proj-", "T3BlbkFJq8Zr3Lm0Xv5Tn2Kw9Pb4Yc7H"),
  anthropic: join_("sk-ant-", "api03-Qw8Zr3Lm0Xv5Tn2Kw9Pb4Yc7H"),
  github: join_("ghp_", "Zr3Lm0Xv5Tn2Kw9Pb4Yc7Hq8Aj1Ds6Fg2Hk"),
  githubPat: join_("github_", "pat_11AAQ3LM0X_v5Tn2Kw9Pb4Yc7Hq8Aj1Ds6"),
  aws: join_("AKIA", "Q3LM0XV5TN2KW9PB"),
  google: join_("AIza", "SyQ3Lm0Xv5Tn2Kw9Pb4Yc7Hq8Aj1Ds6Fg2H"),
  stripe: join_("sk_", "live_", "51Hq8Aj1Ds6Fg2HkZr3Lm0Xv5T"),
  slack: join_("xoxb-", "2048-Zr3Lm0Xv5Tn2Kw9Pb4"),
  nkey: join_("SU", "AJHHXDU2ZGIT4JON3ZNQJROZNZLJ6ZZITACCCZTECSXNWTSCK3NLD4R4"),
  jwt: join_("eyJhbGciOiJIUzI1NiJ9.", "eyJzdWIiOiJ0cm91cGUifQ.", "Zr3Lm0Xv5Tn2Kw9Pb4Yc7Hq8Aj1Ds6"),
  pem: join_(
    "-----BEGIN ",
    "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END ",
    "OPENSSH PRIVATE KEY-----",
  ),
  /** A random literal after a key-like name, and a password after a password's name. */
  entropy: join_("q8Zr3Lm0", "Xv5Tn2Kw9Pb4Yc7H"),
  password: join_("hunter2", "-correct-horse"),
  /** The value of a secret variable of the environment, wherever it appears. */
  fromEnv: join_("plain-words-", "but-secret-ok"),
  k8s: join_("c3VwZXIt", "c2VjcmV0LXBhc3N3b3Jk"),
};

const redactor = () => Redactor.fromEnv({ DEPLOY_TOKEN: PLANTED.fromEnv, HOME: "/root", PATH: "/usr/bin" });

function files(dir: string, ending: RegExp): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && ending.test(entry.name))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)));
}

/** The lines redaction changed: `file:line: before`. */
function changed(file: string, text: string, redacted: string): string[] {
  const before = text.split("\n");
  const after = redacted.split("\n");
  return before.flatMap((line, i) => (line === after[i] ? [] : [`${file}:${i + 1}: ${line}`]));
}

describe("redaction by value", () => {
  it("leaves this repository's sources, config and docs exactly as they are", () => {
    const r = redactor();
    const sources = [
      ...files("src", /\.ts$/),
      ...files("config", /\.(ya?ml|md)$/),
      ...files("docs", /\.md$/),
      ...files("web/src", /\.tsx?$/),
      ...files("deploy", /./),
    ];
    expect(sources.length).toBeGreaterThan(200);
    const touched = sources.flatMap((file) => {
      const text = readFileSync(join(ROOT, file), "utf8");
      return changed(file, text, r.redact(text));
    });
    expect(touched).toEqual([]);
  });

  it("in this repository's tests, hides only the contents of string literals (their planted secrets), never code", () => {
    const r = redactor();
    for (const file of files("test", /\.(ts|mjs)$/)) {
      const text = readFileSync(join(ROOT, file), "utf8");
      const before = text.split("\n");
      const after = r.redact(text).split("\n");
      before.forEach((line, i) => {
        const out = after[i] as string;
        if (line === out) return;
        // Where the lines part: everything before it is kept, and it is inside an open quote.
        let start = 0;
        while (line[start] === out[start]) start++;
        const head = line.slice(0, start);
        const open = ['"', "'", "`"].some((q) => head.split(q).length % 2 === 0);
        expect(open, `${file}:${i + 1} redacted outside a string: ${line}`).toBe(true);
      });
    }
  });

  it("leaves common config files whole: references, placeholders, code, a ConfigMap", () => {
    const r = redactor();
    const fixtures = files("test/fixtures/redaction", /./);
    expect(fixtures.length).toBeGreaterThanOrEqual(7);
    for (const file of fixtures) {
      const text = readFileSync(join(ROOT, file), "utf8");
      expect(r.redact(text), file).toBe(text);
    }
  });

  it("hides every planted secret, of every format and in every file it is planted in", () => {
    const r = redactor();
    const p = PLANTED;
    const planted: Record<string, string> = {
      ".env": [
        `OPENAI_API_KEY=${p.openai}`,
        `ANTHROPIC_API_KEY=${p.anthropic}`,
        `GITHUB_TOKEN=${p.github}`,
        `GH_PAT=${p.githubPat}`,
        `AWS_ACCESS_KEY_ID=${p.aws}`,
        `GOOGLE_API_KEY=${p.google}`,
        `STRIPE_SECRET_KEY=${p.stripe}`,
        `SLACK_BOT_TOKEN=${p.slack}`,
        `NATS_SEED=${p.nkey}`,
        `SESSION_TOKEN=${p.entropy}`,
        `DB_PASSWORD=${p.password}`,
        `DEPLOY=${p.fromEnv}`,
      ].join("\n"),
      "config.ts": [
        `const client = new OpenAI({ apiKey: "${p.openai}" });`,
        `const webhookSecret = "${p.entropy}";`,
        `const auth = { password: '${p.password}' };`,
        `fetch(url, { headers: { authorization: "Bearer ${p.jwt}" } });`,
      ].join("\n"),
      id_ed25519: p.pem,
      "secret.yaml": [
        "apiVersion: v1",
        "kind: Secret",
        "metadata:",
        "  name: db-credentials",
        "type: Opaque",
        "data:",
        `  password: ${p.k8s}`,
        `  username: ${p.k8s.slice(0, 8)}`,
      ].join("\n"),
      "curl.log": [
        `> Authorization: Bearer ${p.entropy}`,
        `DATABASE_URL=postgres://shop:${p.password}@db:5432/shop`,
      ].join("\n"),
      "notes.md": `The deploy runs with ${p.fromEnv}; the seed is ${p.nkey}; the Google key ${p.google}.`,
    };
    for (const [file, text] of Object.entries(planted)) {
      const out = r.redact(text);
      for (const [kind, secret] of Object.entries(p))
        expect(out.includes(secret), `${kind} in ${file}`).toBe(false);
    }
    // Every line of the planted .env lost its value, and nothing but its value.
    for (const line of r.redact(planted[".env"] as string).split("\n"))
      expect(line).toMatch(/^[A-Z_]+=\[REDACTED(?::[a-z-]+)?\]$/);
    expect(r.redact(planted["secret.yaml"] as string)).toContain("  password: [REDACTED:k8s-secret]");
  });

  it("learns the values of the environment's secret variables, not of those naming where a secret is", () => {
    const env = {
      DEPLOY_TOKEN: PLANTED.fromEnv,
      APP_SECRET_SALT: PLANTED.entropy,
      PASSWORD_STORE_DIR: "/root/.password-store",
      POSTGRES_PASSWORD_FILE: "/run/secrets/postgres",
      PWD: "/home/someone/project",
      SHORT_TOKEN: "abc123",
    };
    const text = Object.values(env).join(" ");
    expect(Redactor.fromEnv(env).redact(text)).toBe(
      "[REDACTED] [REDACTED] /root/.password-store /run/secrets/postgres /home/someone/project abc123",
    );
  });

  it("keeps what redaction.allow allows: a value found by its shape that it matches whole; never the environment's secrets", () => {
    const r = Redactor.fromEnv(
      { DEPLOY_TOKEN: PLANTED.fromEnv },
      [],
      ["sk_live_51Hq8Aj1Ds6Fg2Hk\\w+", "q8Zr3Lm0.*", ".*-but-secret-ok"],
    );
    const text = `STRIPE_KEY=${PLANTED.stripe}\nSESSION_TOKEN=${PLANTED.entropy}\nGITHUB_TOKEN=${PLANTED.github}\nTOKEN=${PLANTED.fromEnv}`;
    expect(r.redact(text)).toBe(
      `STRIPE_KEY=${PLANTED.stripe}\nSESSION_TOKEN=${PLANTED.entropy}\nGITHUB_TOKEN=[REDACTED:github-token]\nTOKEN=[REDACTED]`,
    );
    // Matched whole: an entry that is part of a value allows nothing.
    expect(new Redactor([], ["q8Zr3Lm0"]).redact(`SESSION_TOKEN=${PLANTED.entropy}`)).toBe(
      "SESSION_TOKEN=[REDACTED]",
    );
  });

  it("troupe.yaml's redaction.allow must hold regular expressions: one that is not is refused at its line", () => {
    const { dir, dispose } = tempTree({
      "config/troupe.yaml": "redaction:\n  allow:\n    - 'sk-(unclosed'\n",
    });
    try {
      expect(() => loadConfig({ config: join(dir, "config") })).toThrow(
        /troupe\.yaml:3:7: redaction\.allow\[0\]: must be a regular expression/,
      );
    } finally {
      dispose();
    }
  });
});

describe("a coding agent reads and edits code that names secrets", () => {
  let server: ScriptedModelServer;
  let dir: string;
  let dispose: () => void;
  const CODE = [
    "const API_KEY = process.env.SERVICE_KEY;",
    "const password = getPassword();",
    "let token = null;",
  ];
  beforeEach(async () => {
    server = await ScriptedModelServer.start();
    ({ dir, dispose } = tempTree({
      "config/troupe.yaml": "defaultAgent: coder\ndefaultModel: scripted\n",
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [read_file, edit_file]\n",
      "ws/service.ts": `${CODE.join("\n")}\nconst fallback = "${PLANTED.openai}";\n`,
    }));
  });
  afterEach(async () => {
    await server.close();
    dispose();
  });

  it("read_file shows the code lines exactly and the planted key redacted; edit_file on them works", async () => {
    server.script(
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ name: "read_file", arguments: { path: "service.ts" } }] },
      },
      {
        match: { turn: 2 },
        reply: {
          toolCalls: [
            {
              name: "edit_file",
              arguments: {
                path: "service.ts",
                old_string: CODE[2],
                new_string: "let token: string | null = null;",
              },
            },
            {
              name: "edit_file",
              arguments: {
                path: "service.ts",
                old_string: CODE[1],
                new_string: "const password = await getPassword();",
              },
            },
          ],
        },
      },
      { match: { turn: 3 }, reply: { text: "Done." } },
    );
    const result = await runTroupe(
      [
        "--config",
        join(dir, "config"),
        "run",
        "--local",
        "--approval",
        "auto-edit",
        "-w",
        "ws",
        "Tidy service.ts",
      ],
      { cwd: dir, env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "" } },
    );
    expect(result.stderr).not.toContain(PLANTED.openai);
    expect(result.code).toBe(0);
    server.assertComplete();
    const read = String(server.requests[1]?.body.messages.at(-1)?.content);
    for (const line of CODE) expect(read).toContain(line);
    expect(read).toContain('const fallback = "[REDACTED:openai-key]";');
    const edits = (server.requests[2]?.body.messages ?? []).filter((m) => m.role === "tool").slice(-2);
    for (const edit of edits) expect(String(edit.content)).not.toMatch(/error/i);
    expect(JSON.stringify(server.requests.map((r) => r.body))).not.toContain(PLANTED.openai);
    expect(readFileSync(join(dir, "ws/service.ts"), "utf8")).toBe(
      [
        CODE[0],
        "const password = await getPassword();",
        "let token: string | null = null;",
        `const fallback = "${PLANTED.openai}";`,
        "",
      ].join("\n"),
    );
  });
});
