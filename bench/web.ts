/**
 * `npm run bench:web`: the web console under load. A daemon serves the console; a run of 100 agents
 * streams about 10,000 events into the log (written as agents would, at about 2,000 a second), with a
 * page open on it in headless Chromium. Measured: the time from an event's making to the page's
 * change that shows it (median, p95), and the tab's V8 heap and DOM after all of them, after a GC.
 * Writes the "Web console" section of docs/bench.md.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { NatsBus } from "../src/bus/nats-bus.js";
import { uniquePrefix } from "../src/bus/subjects.js";
import { writeSyntheticRun } from "../src/testing/synthetic-run.js";
import { launchChromium } from "../test/support/browser.js";
import { removePrefix } from "../test/support/buses.js";
import { format, formatWritten, median, writeSection } from "./report.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const AGENTS = 100;
const ROUNDS = 96;
const ROUND_MS = 50;

/** In the page before its own script: each event's making time, and when the page next changed. */
const LATENCY_PROBE = `
  window.__latencies = [];
  const waiting = [];
  const Source = window.EventSource;
  window.EventSource = class extends Source {
    constructor(url) {
      super(url);
      this.addEventListener("events", (message) => {
        for (const event of JSON.parse(message.data)) waiting.push(event.ts);
      });
    }
  };
  new MutationObserver(() => {
    const now = Date.now();
    for (const ts of waiting.splice(0)) window.__latencies.push(now - ts);
  }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
`;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN;
}

async function main(): Promise<void> {
  const url = process.env.NATS_URL ?? "nats://127.0.0.1:4222";
  const prefix = uniquePrefix();
  const dir = mkdtempSync(join(tmpdir(), "troupe-bench-web-"));
  mkdirSync(join(dir, "config/agents"), { recursive: true });
  writeFileSync(join(dir, "config/troupe.yaml"), `nats:\n  prefix: ${prefix}\ndefaultModel: scripted\n`);
  writeFileSync(join(dir, "config/agents/lead.yaml"), "name: lead\ndescription: Leads.\n");
  const daemon: ChildProcess = spawn(
    process.execPath,
    [join(root, "bin/troupe.js"), "--config", join(dir, "config"), "daemon", "--web", "127.0.0.1:0"],
    {
      cwd: dir,
      env: { ...process.env, NATS_URL: url, TROUPE_DATA_DIR: join(dir, ".data") },
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  let stderr = "";
  daemon.stderr?.on("data", (chunk) => (stderr += chunk));
  const browser = await launchChromium();
  const bus = await NatsBus.connect({ url, prefix });
  try {
    const started = Date.now();
    while (!stderr.includes("web console: ")) {
      if (Date.now() - started > 15_000) throw new Error(`the daemon did not start: ${stderr}`);
      await new Promise((done) => setTimeout(done, 50));
    }
    // Not on a terminal: the daemon keeps the login in its data dir, not on stderr.
    const login = readFileSync(join(dir, ".data", "web-login"), "utf8").trim();
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    await page.addInitScript(LATENCY_PROBE);
    await page.goto(login);
    const runId = "run-01m8v4z12jkgqwesm1zvzjva5b";
    await page.goto(`${new URL(login).origin}/#/runs/${runId}`);
    await page.waitForLoadState("networkidle").catch(() => {});
    const writing = Date.now();
    const written = await writeSyntheticRun(bus, {
      runId,
      agents: AGENTS,
      deltas: ROUNDS,
      pace: (round) =>
        new Promise((done) => setTimeout(done, Math.max(0, writing + round * ROUND_MS - Date.now()))),
    });
    const seconds = (Date.now() - writing) / 1000;
    await page.getByText(`${written} / ${written} events`).waitFor({ timeout: 60_000 });
    const latencies = (await page.evaluate("window.__latencies")) as number[];
    const cdp = await page.context().newCDPSession(page);
    await cdp.send("HeapProfiler.collectGarbage");
    await cdp.send("Performance.enable");
    const { metrics } = await cdp.send("Performance.getMetrics");
    const metric = (name: string) => metrics.find((m) => m.name === name)?.value ?? Number.NaN;
    const result = {
      events: written,
      agents: AGENTS,
      eventsPerSecond: written / seconds,
      medianMs: median(latencies),
      p95Ms: percentile(latencies, 0.95),
      maxMs: Math.max(...latencies),
      heapMB: metric("JSHeapUsedSize") / 1024 / 1024,
      domNodes: metric("Nodes"),
    };
    process.stderr.write(`${JSON.stringify(result)}\n`);
    const section = [
      "## Web console",
      "",
      `\`npm run bench:web\` on ${new Date().toISOString().slice(0, 10)}, Node ${process.version}, Debian's Chromium headless: a run of ${AGENTS} agents streaming ${format(written)} events into the log at ${format(result.eventsPerSecond)} a second, a page open on it from the start.`,
      "",
      "| measure | value |",
      "| --- | --- |",
      `| from an event's making to the page's change that shows it, median | ${format(result.medianMs)} ms |`,
      `| the same, p95 | ${format(result.p95Ms)} ms |`,
      `| the same, max | ${format(result.maxMs)} ms |`,
      `| the tab's V8 heap after all ${format(written)} events, after a GC | ${result.heapMB.toFixed(1)} MB |`,
      `| DOM nodes then | ${format(result.domNodes)} |`,
      "",
      "Events are applied in batches, one render per animation frame; a conversation draws its latest 200 items.",
      "",
    ].join("\n");
    writeSection(join(root, "docs/bench.md"), section);
    formatWritten(root, ["docs/bench.md"]);
  } finally {
    await browser.close();
    await bus.close();
    daemon.kill("SIGTERM");
    await removePrefix(url, prefix).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
