import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { apiRequest, coderDaemon, coderTroupeYaml } from "../support/embedded-daemon.js";
import { FIXTURE } from "../support/mcp-servers.js";
import { descendants } from "../support/process-tree.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (outside review): every workspace a client named in runs.start got a runtime, with its own
 * MCP servers, that the daemon kept until it stopped: 60 directories left 61 servers (3.8 GB) after
 * every run had finished. Now a workspace's runtime is closed when its last run ends, and at most
 * daemon.maxWorkspaces of them are open at once. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

/** The fixture MCP servers running under the daemon: node processes started on FIXTURE (not a sandbox's launcher). */
function mcpServers(daemonPid: number): number[] {
  return descendants(daemonPid).filter((pid) => {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      return argv.includes(FIXTURE) && basename(argv[0] ?? "") !== "bwrap";
    } catch {
      return false;
    }
  });
}

/**
 * A daemon (on its own nats-server) whose troupe.yaml has one stdio MCP server and lets runs into
 * projects/ws1..ws4, with a client to ask it. Each run runs one command, which waits for the file
 * its task names (`wait for NAME`) in its workspace, and is then done.
 */
async function project(maxWorkspaces: number) {
  const model = await ScriptedModelServer.start([
    {
      // Until its command says it waited (one cut short by a daemon killed is run again).
      reply: (request) => {
        const last = request.messages.at(-1);
        if (last?.role === "tool" && JSON.stringify(last.content).includes("waited")) return { text: "done" };
        const name = /wait for (go-\w+)/.exec(JSON.stringify(request.messages))?.[1] ?? "go-never";
        const command = `touch ${name}.waiting; until [ -e ${name} ]; do sleep 0.1; done; echo waited`;
        return { toolCalls: [{ name: "shell", arguments: { command } }] };
      },
      times: Number.POSITIVE_INFINITY,
    },
  ]);
  cleanups.push(() => model.close());
  const prefix = "wsrt";
  const settings = (most: number) =>
    [
      `daemon:\n  workspaces: [../projects]\n  maxWorkspaces: ${most}`,
      "mcpServers:",
      "  fixture:",
      `    command: ${JSON.stringify(process.execPath)}`,
      `    args: [${JSON.stringify(FIXTURE)}]`,
      // Started from outside the project, which agents may write.
      `    cwd: ${JSON.stringify(dirname(FIXTURE))}`,
      "",
    ].join("\n");
  const h = await coderDaemon(
    prefix,
    model.baseURL,
    cleanups,
    settings(maxWorkspaces),
    Object.fromEntries([1, 2, 3, 4].map((n) => [`projects/ws${n}/notes.txt`, "a project\n"])),
  );
  await h.start();
  // The daemon's own runtime has its server from the start, and keeps it.
  const servers = () => mcpServers(h.pid() as number).length;
  await waitFor("the daemon's own MCP server", () => servers() === 1, 20_000);
  const client = await h.connectAs("client", prefix);
  const ask = (verb: string, data: unknown) => apiRequest(client, prefix, verb, data);
  const ws = (n: number) => join(h.dir, "projects", `ws${n}`);
  return {
    h,
    model,
    ask,
    servers,
    /** Says the runs of workspace `n` waiting for `name` may go on. */
    go: (n: number, name: string) => writeFileSync(join(ws(n), name), ""),
    /** Whether the command of a run in workspace `n` waiting for `name` has started. */
    waiting: (n: number, name: string) => existsSync(join(ws(n), `${name}.waiting`)),
    /** The next daemon reads `most` as daemon.maxWorkspaces. */
    setMax: (most: number) =>
      writeFileSync(join(h.dir, "config", "troupe.yaml"), coderTroupeYaml(prefix, settings(most))),
    /** Starts a run in workspace `n` that waits for `name`. */
    start: async (n: number, name: string) => {
      const reply = await ask("runs.start", {
        task: `wait for ${name}`,
        approval: "auto-edit",
        workspace: ws(n),
      });
      expect(reply.type, JSON.stringify(reply.data)).toBe("runs.start.reply");
      return (reply.data as { runId: string }).runId;
    },
    /** A runs.start in workspace `n` that is refused: what it says. */
    refused: async (n: number) => {
      const reply = await ask("runs.start", {
        task: "wait for go-x",
        approval: "auto-edit",
        workspace: ws(n),
      });
      expect(reply.type).toBe("error");
      return (reply.data as { message: string }).message;
    },
    done: (...runIds: string[]) =>
      waitFor(
        `runs ${runIds.join(", ")} done`,
        async () => {
          const records = await Promise.all(runIds.map((runId) => ask("runs.get", { runId })));
          return records.every((r) => (r.data as { status?: string }).status === "done");
        },
        30_000,
      ),
  };
}

const PAST_MOST = (open: number) =>
  `the daemon has runs in ${open} other workspaces, its most at once (daemon.maxWorkspaces in its troupe.yaml): wait for one's runs to end, or run in one of those`;

it("a workspace's runtime, MCP servers and all, is closed when its last run ends; past daemon.maxWorkspaces a run is refused in one line", async () => {
  const p = await project(2);

  // One workspace after another, as in the review, each run over before the next: none leaves a
  // server behind.
  for (const n of [4, 2, 1, 3]) {
    p.go(n, "go-e");
    await p.done(await p.start(n, "go-e"));
  }
  await waitFor("their servers gone", () => p.servers() === 1, 20_000);

  // Two workspaces with runs: two runtimes, a server each. A second run in ws1 shares its runtime.
  const a = await p.start(1, "go-a");
  const b = await p.start(2, "go-b");
  const c = await p.start(1, "go-c");
  await waitFor("a server for ws1 and for ws2", () => p.servers() === 3, 20_000);
  // A third workspace while both have runs: refused, saying what to do, and nothing started for it.
  expect(await p.refused(3)).toBe(PAST_MOST(2));
  expect(p.servers()).toBe(3);

  // ws2's run ends: its server goes. One of ws1's two ends: ws1's stays, for the other.
  p.go(2, "go-b");
  p.go(1, "go-a");
  await p.done(b, a);
  await waitFor("ws2's server gone", () => p.servers() === 2, 20_000);
  // Room for ws3 now.
  p.go(3, "go-d");
  const d = await p.start(3, "go-d");
  await p.done(d);
  await waitFor("ws3's server gone", () => p.servers() === 2, 20_000);
  p.go(1, "go-c");
  await p.done(c);
  await waitFor("every workspace's server gone", () => p.servers() === 1, 20_000);
}, 180_000);

it("runs left running are resumed in their workspaces as the daemon starts, past daemon.maxWorkspaces, and their runtimes closed when they end", async () => {
  const p = await project(2);
  const a = await p.start(1, "go-a");
  const b = await p.start(2, "go-b");
  await waitFor("a server for ws1 and for ws2", () => p.servers() === 3, 20_000);
  await waitFor("both commands waiting", () => p.waiting(1, "go-a") && p.waiting(2, "go-b"), 20_000);
  // Killed while both wait; the next one allows fewer workspaces than have runs.
  p.h.kill();
  p.setMax(1);
  await p.h.start();
  await waitFor("both resumed, a server each", () => p.servers() === 3, 20_000);
  expect(await p.refused(3)).toBe(PAST_MOST(2));
  p.go(1, "go-a");
  p.go(2, "go-b");
  await p.done(a, b);
  await waitFor("their servers gone", () => p.servers() === 1, 20_000);
  // Below the bound again: a run in another workspace is taken.
  p.go(3, "go-c");
  await p.done(await p.start(3, "go-c"));
  await waitFor("ws3's server gone", () => p.servers() === 1, 20_000);
}, 180_000);
