import { createServer, get } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import type { Daemon } from "../../src/daemon/daemon.js";
import { memoryLogger } from "../../src/log.js";
import { RunsFeed } from "../../src/web/runs-feed.js";
import { waitFor } from "../support/wait.js";

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it("a runs list the daemon could not make is tried again: the page sees the run that changed, and the log says so once", async () => {
  const bus = new LocalBus({ prefix: "feed" });
  const memory = memoryLogger("warn");
  const runs: Array<{ runId: string; startedAt: number }> = [];
  let failures = 0;
  const daemon = {
    async request(verb: string) {
      expect(verb).toBe("runs.list");
      if (runs.length > 0 && failures < 3) {
        failures++;
        throw new Error("the index is away");
      }
      return { runs };
    },
  } as unknown as Daemon;
  const closing = new AbortController();
  const feed = new RunsFeed(daemon, bus, memory.log, closing.signal);
  const server = createServer((request, response) => void feed.serve(request, response));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  cleanups.push(() => closing.abort());

  let text = "";
  const page = get(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, (response) => {
    response.setEncoding("utf8");
    response.on("data", (chunk: string) => (text += chunk));
  });
  page.on("error", () => {});
  cleanups.push(() => page.destroy());
  await waitFor("the first list", () => text.includes("event: runs"));

  runs.push({ runId: "run-one", startedAt: 1 });
  await (await bus.kv("runs")).put("run-one", { runId: "run-one" });
  await waitFor("the run on the page", () => text.includes("run-one"), 8000);
  expect(failures).toBe(3);
  const warnings = memory.records.filter((record) => String(record.msg).includes("runs not listed"));
  expect(warnings).toHaveLength(1);
}, 15_000);

it("a page's list is sent again every few seconds while it is open: a watch of the bus that ends or misses a change leaves no page stale", async () => {
  const local = new LocalBus({ prefix: "feedwatch" });
  // A bus whose watches of the runs end at once, as one whose consumer was lost does.
  const bus = new Proxy(local, {
    get(target, key, receiver) {
      if (key !== "kv") return Reflect.get(target, key, receiver);
      return async (name: string) => {
        const kv = await target.kv(name);
        return new Proxy(kv, {
          get: (store, k, r) => (k === "watch" ? () => (async function* () {})() : Reflect.get(store, k, r)),
        });
      };
    },
  });
  const runs: Array<{ runId: string; startedAt: number }> = [];
  const daemon = { request: async () => ({ runs }) } as unknown as Daemon;
  const closing = new AbortController();
  const feed = new RunsFeed(daemon, bus, memoryLogger("warn").log, closing.signal);
  const server = createServer((request, response) => void feed.serve(request, response));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  cleanups.push(() => closing.abort());
  let text = "";
  const page = get(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, (response) => {
    response.setEncoding("utf8");
    response.on("data", (chunk: string) => (text += chunk));
  });
  page.on("error", () => {});
  cleanups.push(() => page.destroy());
  await waitFor("the first list", () => text.includes("event: runs"));

  // Changed where no watch sees it.
  runs.push({ runId: "run-unseen", startedAt: 1 });
  await waitFor("the run on the page", () => text.includes("run-unseen"), 8000);
}, 15_000);
