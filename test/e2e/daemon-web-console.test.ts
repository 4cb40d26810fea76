import { readdirSync, readFileSync } from "node:fs";
import { get } from "node:http";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { freePort } from "../../src/bus/embedded-nats.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe } from "../support/cli.js";
import { embeddedDaemon, runToCommand } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/*
 * The console's port, as another local user meets it: anyone on the machine can connect to
 * 127.0.0.1, and anyone can take a fixed port while the daemon is down. Neither may take the
 * daemon's runs with it.
 */
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}, 60_000);

/** What docs/web.md says the console allows: connections at once, and a request's headers (seconds). */
const MAX_CONNECTIONS = 256;
const HEADERS_TIMEOUT_S = 10;
/** A whole request (seconds): a live stream's response lasts longer, and must. */
const REQUEST_TIMEOUT_S = 15;

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Another local user's connections, `count` of them, opened one after the other: half send a
 * request's first line and then a header line a second, never ending it; half send nothing.
 */
async function slowClients(port: number, count: number) {
  const open = new Set<Socket>();
  const timers: NodeJS.Timeout[] = [];
  cleanups.push(() => {
    for (const timer of timers) clearInterval(timer);
    for (const socket of open) socket.destroy();
  });
  for (let i = 0; i < count; i++) {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.on("error", () => {});
    socket.on("data", () => {});
    open.add(socket);
    socket.once("close", () => open.delete(socket));
    await new Promise((resolve) => {
      socket.once("connect", resolve);
      socket.once("close", resolve);
    });
    if (i % 2 === 1) continue;
    socket.write("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    timers.push(setInterval(() => socket.writable && socket.write("X-Slow: 1\r\n"), 1000));
  }
  return { open: () => open.size };
}

/** A page's live stream of the runs, followed over a connection of its own. */
function followStream(url: string) {
  let text = "";
  let closed = false;
  const request = get(url, { agent: false }, (response) => {
    response.setEncoding("utf8");
    response.on("data", (chunk: string) => (text += chunk));
    response.on("close", () => (closed = true));
  });
  request.on("error", () => (closed = true));
  cleanups.push(() => request.destroy());
  return { text: () => text, closed: () => closed };
}

/** Takes `port` as another user's server would, as soon as it is free. */
async function hold(port: number): Promise<{ requests: () => number }> {
  let requests = 0;
  const server: Server = createServer((socket) => {
    requests++;
    socket.end("HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n\r\nnot the console");
  });
  await waitFor(
    `port ${port} held`,
    () =>
      new Promise<boolean>((resolve) => {
        server.once("error", () => resolve(false));
        server.listen(port, "127.0.0.1", () => resolve(true));
      }),
    5000,
  );
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return { requests: () => requests };
}

it("another local user's slow connections to the console take its share of connections, never the daemon's descriptors: runs go on, a page's live stream too", async () => {
  const model = await ScriptedModelServer.start([{ reply: { text: "done" }, times: 10 }]);
  cleanups.push(() => model.close());
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml":
        "nats:\n  prefix: webslow\ndefaultAgent: a\ndefaultModel: scripted\nweb:\n  listen: 127.0.0.1:0\n",
      "config/agents/a.yaml": "name: a\ndescription: Answers.\n",
    },
    model.baseURL,
    cleanups,
  );
  await h.start();
  await waitFor("the console", () => h.stderr().includes("troupe web console:"), 10_000);
  const login = readFileSync(join(h.dir, ".data", "web-login"), "utf8").trim();
  const { origin, port } = new URL(login);
  const page = await (await fetch(login)).text();
  const session = /<meta name="troupe-session" content="([^"]+)"/.exec(page)?.[1] as string;
  const stream = followStream(`${origin}/api/runs/live?session=${session}`);
  const streamOpened = Date.now();
  await waitFor("the runs list", () => stream.text().includes("event: runs"), 5000);
  const fds = () => readdirSync(`/proc/${h.pid()}/fd`).length;
  const before = fds();

  const flood = await slowClients(Number(port), MAX_CONNECTIONS + 50);
  await sleep(500);
  // Past the limit, a connection is closed as it comes: the daemon holds no more than its limit.
  expect(flood.open()).toBeLessThan(MAX_CONNECTIONS);
  expect(flood.open()).toBeGreaterThan(MAX_CONNECTIONS - 20);
  expect(fds()).toBeLessThan(before + MAX_CONNECTIONS + 20);

  // Meanwhile a run reaches its model and finishes; the page open before sees it.
  const run = await runTroupe([...h.cfg, "run", "--json", "Answer"], { cwd: h.dir, env: h.env });
  expect(run.code, run.stderr).toBe(0);
  const runId = (JSON.parse(run.stdout.split("\n")[0] as string) as { runId: string }).runId;
  await waitFor("the run on the page", () => stream.text().includes(runId), 10_000).catch((error) => {
    throw new Error(
      `${error.message} (page stream closed: ${stream.closed()}); the daemon said:\n${h.stderr()}`,
    );
  });

  // Headers that never end, and a connection that says nothing, are let go within seconds.
  await waitFor("the slow connections let go", () => flood.open() === 0, (HEADERS_TIMEOUT_S + 5) * 1000);

  // The page's stream outlives the deadline of a request: a response is not held to it.
  await sleep(Math.max(0, streamOpened + (REQUEST_TIMEOUT_S + 3) * 1000 - Date.now()));
  expect(stream.closed()).toBe(false);
  const second = await runTroupe([...h.cfg, "run", "--json", "Answer again"], { cwd: h.dir, env: h.env });
  expect(second.code, second.stderr).toBe(0);
  const secondId = (JSON.parse(second.stdout.split("\n")[0] as string) as { runId: string }).runId;
  await waitFor("the second run on the page", () => stream.text().includes(secondId), 10_000);
}, 90_000);

it("a console port another process holds: the daemon says so in one line before it is ready, resumes its run and finishes it, and stops its nats-server on exit", async () => {
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: { toolCalls: [{ name: "shell", arguments: { command: "echo ran >> ledger.txt; sleep 5" } }] },
      times: 5,
    },
    { match: { turn: 2 }, reply: { text: "all done" }, times: 5 },
  ]);
  cleanups.push(() => model.close());
  const webPort = await freePort();
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: webheld\ndefaultAgent: coder\ndefaultModel: scripted\nweb:\n  listen: 127.0.0.1:${webPort}\n`,
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
    },
    model.baseURL,
    cleanups,
  );
  await h.start();
  await waitFor("the console", () => h.stderr().includes("troupe web console:"), 10_000);
  const run = await runToCommand(h, cleanups);

  // A restart, with the console's port taken meanwhile by another user's server.
  h.kill();
  const squatter = await hold(webPort);
  await h.start();
  const lines = h.stderr().trim().split("\n");
  const said = lines.filter((line) => line.includes("web console"));
  expect(said).toEqual([
    expect.stringMatching(
      new RegExp(
        `^troupe: warning: web console: not served: 127\\.0\\.0\\.1:${webPort} is taken by another process; .+$`,
      ),
    ),
  ]);
  expect(lines.indexOf(said[0] as string)).toBeLessThan(
    lines.findIndex((line) => line.startsWith("troupe daemon ready")),
  );
  const server = Number(/nats-server pid (\d+) adopted/.exec(h.stderr())?.[1]);
  expect(alive(server)).toBe(true);

  // The run the daemon resumed goes on to its end, the daemon with it.
  expect(await run.exit).toBe(0);
  expect(run.out()).toContain("all done");
  expect(readFileSync(join(h.dir, "ledger.txt"), "utf8")).toBe("ran\n");
  expect(alive(h.pid() as number)).toBe(true);
  // No login names the port the other server holds.
  const web = await runTroupe([...h.cfg, "web"], { cwd: h.dir, env: h.env });
  expect(web.code).toBe(1);
  expect(web.stderr).toContain("no web console is running");
  expect(squatter.requests()).toBe(0);

  await h.stop();
  await waitFor("its nats-server stopped", () => !alive(server), 10_000);
}, 90_000);
