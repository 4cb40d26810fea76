import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { chromiumPerFile } from "../support/browser.js";
import { runTroupe } from "../support/cli.js";
import { OtlpReceiver } from "../support/otlp-receiver.js";
import { leadAndExplorers, tracedProject, wholeTrace } from "../support/telemetry-project.js";
import { inTreeOrder, traceViewHtml } from "../support/trace-view.js";

/*
 * What a trace viewer shows of a run: the spans an OTLP receiver got from the daemon and a worker,
 * laid out as Jaeger's trace view lays them out, in Chromium. `npm run docs:trace` keeps the picture
 * in docs/telemetry-trace.png (DOCS_SCREENS=1).
 */

const browser = chromiumPerFile();
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}, 30_000);

it("a run's trace, as a trace viewer lays it out: each agent under the call that spawned it, each process in its colour", async () => {
  const receiver = await OtlpReceiver.http();
  cleanups.push(() => receiver.close());
  const model = await ScriptedModelServer.start(leadAndExplorers(400));
  cleanups.push(() => model.close());
  const p = await tracedProject(model, receiver, cleanups);
  const run = await runTroupe([...p.cfg, "run", "--approval", "yolo", "Read the notes"], {
    cwd: p.dir,
    env: p.env,
  });
  expect(run.code).toBe(0);
  const spans = await wholeTrace(receiver);

  const page = await browser().newPage({ viewport: { width: 1400, height: 560 } });
  cleanups.push(() => page.close());
  await page.setContent(traceViewHtml(spans));
  const rows = page.locator(".row");
  expect(await rows.count()).toBe(spans.length);
  // Row by row: the span's name at its depth in the tree, as the spans' parents make it.
  const shown = await rows.evaluateAll((elements) =>
    elements.map((e) => `${e.getAttribute("data-depth")} ${e.querySelector("b")?.textContent}`),
  );
  expect(shown).toEqual(inTreeOrder(spans).map(({ span, depth }) => `${depth} ${span.name}`));
  expect(shown.slice(0, 2)).toEqual(["0 invoke_workflow lead", "1 invoke_agent lead"]);
  expect(shown.filter((row) => row === "3 invoke_agent explorer")).toHaveLength(2);
  // Two processes, each in its colour: the daemon's and the worker's.
  await expect
    .poll(() => page.locator("header .key").allTextContents())
    .toEqual([
      expect.stringMatching(/^troupe · daemon · pid \d+$/),
      expect.stringMatching(/^troupe · worker · pid \d+$/),
    ]);
  const dir = mkdtempSync(join(tmpdir(), "troupe-trace-view-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const picture = join(dir, "trace.png");
  await page.screenshot({ path: picture, fullPage: true });
  if (process.env.DOCS_SCREENS === "1")
    copyFileSync(picture, resolve(import.meta.dirname, "../../docs/telemetry-trace.png"));
}, 90_000);
