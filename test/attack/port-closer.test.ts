import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { answersNats } from "../../src/bus/embedded-nats.js";
import { runTroupe, tempTree } from "../support/cli.js";

/* ATTACK (outside review, another local user): a listener on the daemon's NATS port that accepts
 * each connection and closes it at once made `troupe daemon` exit with code 13 and no word (its
 * look for a server there never settled), and `troupe status` say "node provided an undefined
 * error". Now such a port is no server, and the daemon says in one line what it could not do. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function closer(): Promise<number> {
  const server: Server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as { port: number }).port;
}

it("a port that takes a connection and closes it is no NATS server, and the daemon says what it could not do", async () => {
  const port = await closer();
  expect(await answersNats("127.0.0.1", port)).toBe(false);
  const { dir, dispose } = tempTree({ "config/troupe.yaml": "defaultModel: scripted\n" });
  cleanups.push(dispose);
  const daemon = await runTroupe(["--config", join(dir, "config"), "daemon"], {
    cwd: dir,
    env: { ...process.env, NATS_URL: `nats://127.0.0.1:${port}`, TROUPE_DATA_DIR: join(dir, ".data") },
  });
  expect(daemon.code).not.toBe(0);
  expect(daemon.code).not.toBe(13);
  expect(daemon.stderr.trim().split("\n").at(-1)).toMatch(/^troupe: /);
}, 90_000);
