import { createServer, type Server, Socket } from "node:net";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { tempTree } from "../support/cli.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * A TCP relay to a real nats-server that drops the connection when the client's first JetStream
 * request goes by, and turns connections away for a second: the server gone just after the connect.
 */
async function blippingRelay(upstream: number): Promise<{ url: string; drops: () => number }> {
  let drops = 0;
  let refuseUntil = 0;
  const sockets = new Set<Socket>();
  const relay: Server = createServer((client) => {
    if (Date.now() < refuseUntil) return void client.destroy();
    const server = new Socket();
    server.connect(upstream, "127.0.0.1");
    for (const socket of [client, server]) {
      sockets.add(socket);
      socket.on("error", () => {});
      socket.on("close", () => sockets.delete(socket));
    }
    client.on("data", (chunk: Buffer) => {
      if (drops === 0 && chunk.includes("$JS.API.INFO")) {
        drops++;
        refuseUntil = Date.now() + 1000;
        client.destroy();
        server.destroy();
        return;
      }
      server.write(chunk);
    });
    server.on("data", (chunk: Buffer) => client.write(chunk));
    server.on("close", () => client.destroy());
    client.on("close", () => server.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise<void>((resolve) => relay.close(() => resolve()));
  });
  const { port } = relay.address() as { port: number };
  return { url: `nats://127.0.0.1:${port}`, drops: () => drops };
}

it("connecting waits out a server that goes away just after the connect, as its first JetStream call is made", async () => {
  const { dir, dispose } = tempTree({});
  cleanups.push(dispose);
  const nats = await NatsServerProcess.start({ storeDir: join(dir, "store") });
  cleanups.push(() => nats.stop());
  const relay = await blippingRelay(nats.port);
  const bus = await NatsBus.connect({ url: relay.url, prefix: "blip" });
  cleanups.push(() => bus.close());
  expect(relay.drops()).toBe(1);
  const ack = await bus.eventLog.append(
    makeEnvelope({ runId: "r", agentId: "a", seq: 0, type: "t", data: {} }),
  );
  expect(ack.seq).toBe(1);
}, 60_000);
