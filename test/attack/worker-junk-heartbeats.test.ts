import { afterEach, expect, it } from "vitest";
import { runTroupe } from "../support/cli.js";
import { coderDaemon } from "../support/embedded-daemon.js";

/* ATTACK (outside review H, the worker's seed): the workers bucket is the worker's to write, and
 * `troupe status` printed whatever was there as a worker, "on undefined (pid undefined)". What is no
 * heartbeat is now left out, and counted in one line. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("`troupe status` shows no junk of the workers bucket as a worker, and says how much it left out", async () => {
  const prefix = "wjh";
  const h = await coderDaemon(prefix, "http://127.0.0.1:9/v1", cleanups);
  await h.start();
  const worker = await h.connectAs("worker", prefix);
  for (const [key, value] of [
    ["worker-junk1", {}],
    ["worker-junk2", { pid: "x", host: 5 }],
    ["worker-real", { pid: 42, host: "box", beats: 1, at: Date.now() }],
  ] as const)
    await worker.request(`$KV.${prefix}_workers.${key}`, JSON.stringify(value), { timeout: 5000 });

  const status = await runTroupe([...h.cfg, "status"], { cwd: h.dir, env: h.env });
  expect(status.code).toBe(0);
  expect(status.stdout).toContain("worker-real on box (pid 42");
  expect(status.stdout).not.toContain("undefined");
  expect(status.stdout).not.toContain("worker-junk");
  expect(status.stderr).toContain("2 records in the workers bucket that are no heartbeat: left out");
}, 60_000);
