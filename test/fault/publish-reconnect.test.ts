import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { afterEach, expect, it } from "vitest";
import { NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { AckedPublisher } from "../../src/bus/nats-publisher.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/*
 * A node killed under a publish takes the publish or its ack with it: the publisher must not wait
 * out the ack's deadline (seconds, with an agent held up), but fail it as the connection comes back
 * on another server, so the caller sends it again at once (stored once by its Nats-Msg-Id).
 */
it("fails a publish still waiting for its ack when the connection is re-made, not at its deadline", async () => {
  const storeDir = mkdtempSync(join(tmpdir(), "troupe-fault-publish-"));
  let server = await NatsServerProcess.start({ storeDir });
  cleanups.push(async () => {
    await server.stop();
    rmSync(storeDir, { recursive: true, force: true });
  });
  const nc = await connect({ servers: server.url, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
  cleanups.push(() => nc.close());
  const publisher = new AckedPublisher(nc);
  cleanups.push(async () => publisher.close());
  // Someone hears this subject but never answers: the ack can only come from the deadline, an hour
  // away, or the reconnect.
  nc.subscribe("nobody.answers");
  const waiting = publisher.publish("nobody.answers", new Uint8Array([1]), { timeoutMs: 3_600_000 });
  const outcome = waiting.then(
    () => "acked",
    (error: Error) => error.message,
  );
  await new Promise((resolve) => setTimeout(resolve, 100));
  await server.kill("SIGKILL");
  server = await server.restart();
  expect(await outcome).toBe("the connection was lost under a publish to nobody.answers");
}, 30_000);
