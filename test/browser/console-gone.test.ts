import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { expect, inject, it } from "vitest";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import type { RunSummary } from "../../src/web/runs-feed.js";
import { chromiumPerFile } from "../support/browser.js";
import { removePrefix } from "../support/buses.js";
import { runTroupe, tempTree } from "../support/cli.js";
import { daemonProcesses } from "../support/daemon-process.js";
import { waitFor } from "../support/wait.js";

/*
 * A tab left open on the console while its daemon stops: the console's port is free, and another
 * user of the machine may take it (docs/web.md, "What another user of the machine can do to it").
 */
const { cleanups, follow } = daemonProcesses();
const browser = chromiumPerFile();

const FAKE_TASK = "FAKE: deploy to production approved by security";
const FAKE_RUN = "run-01m9fakefakefakefakefakefa";

/** One Server-Sent Event, as the console writes them. */
function sse(response: ServerResponse, event: string, data: unknown): void {
  response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store" });
  response.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

/**
 * Another local user's server on the console's old port: it records every request (a page's
 * stream would carry the session in its URL) and answers the live streams with a run of its own.
 */
function fakeConsole(port: number) {
  const asked: string[] = [];
  const fake = createServer((request: IncomingMessage, response: ServerResponse) => {
    asked.push(`${request.method} ${request.url} ${request.headers.authorization ?? ""}`.trim());
    const path = request.url?.split("?")[0] ?? "/";
    if (path === "/api/runs/live") {
      const run: RunSummary = {
        runId: FAKE_RUN,
        agentId: "worker-fake",
        agent: "worker",
        task: FAKE_TASK,
        status: "running",
        startedAt: Date.now() - 5000,
        pendingApprovals: 0,
      };
      return sse(response, "runs", [run]);
    }
    const events = /^\/api\/runs\/([A-Za-z0-9_-]+)\/events$/.exec(path);
    if (events) {
      const started = makeEnvelope({
        runId: events[1] as string,
        agentId: "worker-fake",
        seq: 0,
        type: "agent.started",
        data: { name: "worker", model: "scripted", task: FAKE_TASK, budget: {}, depth: 0 },
      });
      return sse(response, "events", [started]);
    }
    response.writeHead(404, { "content-type": "application/json" }).end("{}");
  });
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        fake.closeAllConnections();
        fake.close(() => resolve());
      }),
  );
  return new Promise<{ asked: () => string[] }>((resolve, reject) => {
    fake.once("error", reject);
    fake.listen(port, "127.0.0.1", () => resolve({ asked: () => [...asked] }));
  });
}

const text = (page: Page) => page.textContent("body");
const gone = (page: Page) => page.getByTestId("console-gone").isVisible();

it("a tab whose daemon stopped follows nothing more: another user's server on the console's old port is asked nothing, the session least of all, and its runs never show; the tab says the console went away", async () => {
  const natsUrl = inject("natsUrl");
  const prefix = uniquePrefix();
  cleanups.push(() => removePrefix(natsUrl, prefix));
  const model = await ScriptedModelServer.start([{ reply: { text: "Hello." }, times: Infinity }]);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: worker\ndefaultModel: scripted\n`,
    "config/agents/worker.yaml": "name: worker\ndescription: Works.\ntools: []\n",
  });
  cleanups.push(dispose);
  const env = {
    NATS_URL: natsUrl,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  };
  const config = ["--config", join(dir, "config")];
  // As `troupe daemon --web` takes it by default: a free port, another at the next start.
  const daemon = follow([...config, "daemon", "--web", "127.0.0.1:0"], dir, env);
  await waitFor("the web console", () => daemon.stderr().includes("web console: "), 15_000);
  const login = readFileSync(join(env.TROUPE_DATA_DIR, "web-login"), "utf8").trim();
  const { origin, port } = new URL(login);
  expect((await runTroupe([...config, "run", "Say hello"], { cwd: dir, env })).code).toBe(0);

  // Two tabs of one browser, logged in: the runs list, and the run (each follows its own stream).
  const context = await browser().newContext();
  cleanups.push(() => context.close());
  const list = await context.newPage();
  await list.goto(login);
  const row = list.getByTestId("run-row");
  await row.first().waitFor({ timeout: 5000 });
  const session = await list.evaluate<string | null>('localStorage.getItem("troupe-session")');
  expect(session).toBeTruthy();
  const run = await context.newPage();
  await run.goto(`${origin}/#/runs/${await row.first().getAttribute("data-run")}`);
  await run.getByTestId("agent-tree").getByText("worker").waitFor({ timeout: 5000 });
  expect(await run.getByTestId("run-status").textContent()).toBe("done");

  // What the tabs ask of the console's address from the moment its daemon stops.
  const sent: string[] = [];
  context.on("request", (request) => {
    if (request.url().startsWith(origin)) sent.push(request.url());
  });
  daemon.child.kill("SIGTERM");
  expect(await daemon.exit).toBe(0);
  const fake = await fakeConsole(Number(port));

  // An EventSource left to itself reconnects within seconds, to whatever holds the port by then.
  await waitFor(
    "the tabs to give up, or to ask the fake console",
    async () => fake.asked().length > 0 || ((await gone(list)) && (await gone(run))),
    10_000,
  );
  const lookAgain = async () => {
    expect(fake.asked()).toEqual([]);
    expect(sent).toEqual([]);
    for (const page of [list, run]) {
      expect(await text(page)).not.toContain("FAKE");
      expect(await gone(page)).toBe(true);
      expect(await text(page)).toContain("troupe web");
    }
  };
  await lookAgain();
  // And later too: past any reconnection the browser might still have had scheduled.
  await new Promise((resolve) => setTimeout(resolve, 6000));
  await lookAgain();
  // Not a click away either: the run's link is gone with the rest of what the console showed.
  expect(await list.getByTestId("run-row").count()).toBe(0);
}, 90_000);
