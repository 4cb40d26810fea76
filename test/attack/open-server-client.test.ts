import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { acceptsAnonymous } from "../../src/bus/nats-connect.js";
import { runTroupe, tempTree } from "../support/cli.js";

/* ATTACK (outside review, another local user, no credentials): with no daemon ever run in its data
 * dir (a first use, or a data dir other than the daemon's), `troupe run` had no seed and no CA to
 * pin, and connected to whatever answered at the default address: an open nats-server another
 * user started there took the task ("our deploy key is hunter2") and printed a fake "✓ done". A
 * client now refuses an open server it was not pointed at, as the daemon does. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

it("troupe run with no daemon's credentials in its data dir refuses the open server at the default address, in one line", async () => {
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultAgent: a\nnats:\n  prefix: openclient\n",
    "config/agents/a.yaml": "name: a\ndescription: A.\n",
  });
  cleanups.push(dispose);
  // The open server at the default address: the machine's shared one, else one of this test's.
  if (!(await acceptsAnonymous("nats://127.0.0.1:4222"))) {
    const storeDir = mkdtempSync(join(tmpdir(), "troupe-open-4222-"));
    const server = await NatsServerProcess.start({ storeDir, port: 4222 });
    cleanups.push(
      () => rmSync(storeDir, { recursive: true, force: true }),
      () => server.stop(),
    );
  }
  for (const args of [["run", "--wait-daemon", "0", "our deploy key is hunter2"], ["status"]]) {
    const result = await runTroupe(["--config", "config", ...args], { cwd: dir });
    expect(result.stderr).toMatch(
      /^troupe: no daemon of data dir \S+ answers on nats:\/\/127\.0\.0\.1:4222, and a nats-server there asks no credentials \(anyone on this machine can start one\): start "troupe daemon"[^\n]*\n$/,
    );
    expect(result.code).toBe(4);
  }
});
