import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, inject, it } from "vitest";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { removePrefix } from "../support/buses.js";
import { onTerminal, spawnTroupe, tempTree } from "../support/cli.js";
import { killTree } from "../support/process-tree.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (a local user reading the journal, a proxy's access log, a browser's history): the web
 * console's startup login URL (good until used) went to stderr, which the shipped systemd unit sends
 * to the journal; and a session was accepted in the `?session=` parameter of every GET, where it is
 * written into every log and history that keeps URLs. The login goes only to a terminal (else a 0600
 * file named on stderr); the parameter opens only the event streams an EventSource follows. */

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A project whose daemon serves the console on a free port, with a prefix of its own on the shared NATS. */
function project() {
  const url = inject("natsUrl");
  const prefix = uniquePrefix();
  cleanups.push(() => removePrefix(url, prefix));
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: worker\ndefaultModel: scripted\n`,
    "config/agents/worker.yaml": "name: worker\ndescription: Works.\ntools: [read_file]\n",
  });
  cleanups.push(dispose);
  const data = join(dir, ".data");
  const env = {
    ...process.env,
    NATS_URL: url,
    OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: data,
  };
  const args = ["--config", join(dir, "config"), "daemon", "--web", "127.0.0.1:0"];
  return { dir, data, env, args, loginFile: join(data, "web-login") };
}

const tokenOf = (login: string) => new URL(login).searchParams.get("token") as string;

it("a daemon whose stderr is not a terminal (a service's journal) writes no login there: a 0600 file holds it", async () => {
  const p = project();
  const daemon = spawnTroupe(p.args, { cwd: p.dir, env: p.env });
  cleanups.push(() => void daemon.child.kill("SIGKILL"));
  await waitFor("the web console", () => daemon.stderr().includes("web console: "), 15_000);
  const login = readFileSync(p.loginFile, "utf8").trim();
  expect(statSync(p.loginFile).mode & 0o777).toBe(0o600);
  expect(login).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/login\?token=[\w-]{20,}$/);
  // No token at all on stderr (the journal under the shipped unit).
  expect(daemon.stderr()).not.toContain(tokenOf(login));
  expect(daemon.stderr()).not.toMatch(/token=/);
  // The journal is told where the console is and which file holds a login.
  expect(daemon.stderr()).toContain(
    `web console: ${new URL(login).origin} (a login URL, good once, is in ${p.loginFile}`,
  );
  // The file's login works, once; the one that replaces it is in the file, never on stderr.
  expect((await fetch(login)).status).toBe(200);
  await waitFor("a fresh login", () => readFileSync(p.loginFile, "utf8").trim() !== login, 5000);
  const next = readFileSync(p.loginFile, "utf8").trim();
  expect(statSync(p.loginFile).mode & 0o777).toBe(0o600);
  daemon.child.kill("SIGTERM");
  await daemon.exit;
  expect(daemon.stderr()).not.toContain(tokenOf(next));
  expect(daemon.stderr()).not.toMatch(/token=/);
});

it("a daemon started on a terminal shows its login there, and it logs in", async () => {
  const p = project();
  const running = onTerminal(p.args, { cwd: p.dir, env: p.env });
  cleanups.push(() => killTree(running.child.pid as number));
  await waitFor(
    "the login on the terminal",
    () => /web console: (http\S+token=[\w-]+)/.test(running.output()),
    15_000,
  );
  const login = /web console: (http\S+token=[\w-]+)/.exec(running.output())?.[1] as string;
  expect((await fetch(login)).status).toBe(200);
});

it("a session in the query opens only the event streams; every other GET needs it in the header", async () => {
  const p = project();
  const daemon = spawnTroupe(p.args, { cwd: p.dir, env: p.env });
  cleanups.push(() => void daemon.child.kill("SIGKILL"));
  await waitFor("the web console", () => daemon.stderr().includes("web console: "), 15_000);
  const login = readFileSync(p.loginFile, "utf8").trim();
  const origin = new URL(login).origin;
  const page = await (await fetch(login)).text();
  const session = /<meta name="troupe-session" content="([^"]+)"/.exec(page)?.[1] as string;
  expect(session).toBeTruthy();
  const bearer = { authorization: `Bearer ${session}` };
  const query = `?session=${encodeURIComponent(session)}`;

  for (const path of ["/api/whoami", "/api/machine", "/api/runs/run-x/approvals", "/api/nothing"]) {
    expect((await fetch(`${origin}${path}${query}`)).status, `${path} with the session in the query`).toBe(
      401,
    );
    expect((await fetch(`${origin}${path}`, { headers: bearer })).status, path).not.toBe(401);
  }
  // A POST never took it from the query; it still does not.
  const abort = await fetch(`${origin}/api/runs/run-x/abort${query}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  expect(abort.status).toBe(401);

  // What an EventSource follows still opens with it in the query: the stream starts.
  for (const path of ["/api/runs/live", "/api/runs/run-x/events"]) {
    const stream = new AbortController();
    const response = await fetch(`${origin}${path}${query}`, { signal: stream.signal });
    expect(response.status, path).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    stream.abort();
    expect((await fetch(`${origin}${path}?session=not-a-session`)).status).toBe(401);
  }
});
