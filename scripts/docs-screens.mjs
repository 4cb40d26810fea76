// `npm run docs:screens`: screenshots of the web console for docs/web.md. Starts a daemon with the
// console on the NATS at NATS_URL (default 127.0.0.1:4222, under a prefix of its own) and the
// scripted model, runs a lead with two subagents and an approval, and saves what the page shows.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { ScriptedModelServer } from "../dist/testing/scripted-model-server.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bin = join(root, "bin/troupe.js");
const out = join(root, "docs/web");
const as = (name, turn) => ({ system: `"${name}"`, turn });
const model = await ScriptedModelServer.start([
  {
    match: as("lead", 1),
    reply: {
      text: "I'll send two scouts to look around first.",
      toolCalls: [
        { name: "subagent_scout", arguments: { task: "Read the release notes and list what changed" } },
        { name: "subagent_scout", arguments: { task: "Find the version number in package.json" } },
      ],
    },
    times: Number.POSITIVE_INFINITY,
  },
  {
    match: as("scout", 1),
    reply: { toolCalls: [{ name: "read_file", arguments: { path: "NOTES.md" } }], delayMs: 900 },
    times: Number.POSITIVE_INFINITY,
  },
  {
    match: as("scout", 2),
    reply: { text: "The notes list two fixes and one new command.", delayMs: 1200 },
    times: Number.POSITIVE_INFINITY,
  },
  {
    match: as("lead", 2),
    reply: {
      text: "Both scouts are back. Writing the changelog entry.",
      toolCalls: [
        {
          name: "edit_file",
          arguments: {
            path: "CHANGELOG.md",
            old_string: "## Unreleased\n",
            new_string: "## Unreleased\n\n- Two fixes and `troupe web`.\n",
          },
        },
      ],
    },
    times: Number.POSITIVE_INFINITY,
  },
  { match: as("lead", 3), reply: { text: "The changelog has its entry." }, times: Number.POSITIVE_INFINITY },
]);
const dir = mkdtempSync(join(tmpdir(), "troupe-screens-"));
const files = {
  "config/troupe.yaml": `nats:\n  prefix: screens${Date.now()}\ndefaultAgent: lead\ndefaultModel: scripted\n`,
  "config/agents/lead.yaml":
    "name: lead\ndescription: Leads the release.\ntools: [read_file, edit_file]\nsubagents: [scout]\nbudget: { maxTurns: 12, maxTokens: 40000 }\n",
  "config/agents/scout.yaml":
    "name: scout\ndescription: Reads and reports.\ntools: [read_file]\nbudget: { maxTurns: 6 }\n",
  "NOTES.md":
    "# Notes\n\n- fix: resume after a crash\n- fix: approvals from any terminal\n- new: troupe web\n",
  "CHANGELOG.md": "# Changelog\n\n## Unreleased\n",
};
for (const [path, content] of Object.entries(files)) {
  mkdirSync(dirname(join(dir, path)), { recursive: true });
  writeFileSync(join(dir, path), content);
}
const env = {
  ...process.env,
  NATS_URL: process.env.NATS_URL ?? "nats://127.0.0.1:4222",
  OPENAI_BASE_URL: model.baseURL,
  OPENAI_API_KEY: "",
  TROUPE_DATA_DIR: join(dir, ".data"),
};
const troupe = (args) =>
  spawn(process.execPath, [bin, "--config", join(dir, "config"), ...args], {
    cwd: dir,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
const daemon = troupe(["daemon", "--web", "127.0.0.1:0"]);
let stderr = "";
daemon.stderr.on("data", (chunk) => (stderr += chunk));
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
try {
  const started = Date.now();
  while (!stderr.includes("web console: ")) {
    if (Date.now() - started > 15_000) throw new Error(`the daemon did not start: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  // Not on a terminal: the daemon keeps the login in its data dir, not on stderr.
  const login = readFileSync(join(dir, ".data", "web-login"), "utf8").trim();
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  await page.goto(login);
  const finished = troupe([
    "run",
    "--approval",
    "auto-edit",
    "Look at the release notes and add a changelog entry",
  ]);
  await new Promise((resolve) => finished.once("exit", resolve));
  const client = troupe([
    "run",
    "--approval",
    "ask",
    "Look at the release notes again and add a changelog entry",
  ]);
  await page.locator('[data-testid="run-row"]').nth(1).waitFor();
  mkdirSync(out, { recursive: true });
  await page.locator('[data-testid="run-row"]').first().locator("a").click();
  await page.locator('[data-testid="approval"][data-status="pending"]').waitFor({ timeout: 20_000 });
  await page.screenshot({ path: join(out, "run.png") });
  await page.goto(new URL("/", login).href);
  await page.locator('[data-testid="pending-approvals"]').waitFor();
  await page.screenshot({ path: join(out, "runs.png") });
  client.kill("SIGINT");
  process.stdout.write(`saved ${join(out, "runs.png")} and ${join(out, "run.png")}\n`);
} finally {
  await browser.close();
  daemon.kill("SIGTERM");
  await model.close();
  rmSync(dir, { recursive: true, force: true });
}
