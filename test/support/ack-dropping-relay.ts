import { createServer, type Server, Socket } from "node:net";

/**
 * A TCP relay to a real nats-server that reads what the server sends its client and, while armed,
 * drops JetStream publish acknowledgements (`{"stream":…,"seq":…}` on an inbox): the message is
 * stored, but its ack is lost on the way back, as on a connection that broke just then. Cut, it
 * forwards nothing either way.
 */
export interface AckDroppingRelay {
  url: string;
  /** Drops the next `count` acks. */
  drop(count: number): void;
  /** How many acks it has dropped. */
  dropped(): number;
  /**
   * Stops forwarding either way for good, its sockets left open: a link gone dead, not closed, so
   * neither end hears of it until its own timeouts say so.
   */
  cut(): void;
  /** Closes the connections it relays now (the relay still listens): its clients reconnect through it. */
  reset(): void;
  close(): Promise<void>;
}

export async function ackDroppingRelay(upstream: string): Promise<AckDroppingRelay> {
  const { hostname, port } = new URL(upstream);
  let armed = 0;
  let dropped = 0;
  let cut = false;
  const sockets = new Set<Socket>();
  const relay: Server = createServer((client) => {
    const server = new Socket();
    server.connect(Number(port), hostname);
    for (const socket of [client, server]) {
      sockets.add(socket);
      socket.on("error", () => {});
      socket.on("close", () => sockets.delete(socket));
    }
    client.on("data", (chunk: Buffer) => {
      if (!cut) server.write(chunk);
    });
    let pending = Buffer.alloc(0);
    server.on("data", (chunk: Buffer) => {
      if (cut) return;
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const frame = nextFrame(pending);
        if (!frame) break;
        const bytes = pending.subarray(0, frame.length);
        pending = pending.subarray(frame.length);
        if (armed > 0 && frame.inbox && /^\{"stream":"[^"]+",.*"seq":\d+/.test(frame.payload)) {
          armed--;
          dropped++;
          continue;
        }
        client.write(bytes);
      }
    });
    server.on("close", () => client.destroy());
    client.on("close", () => server.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  const address = relay.address() as { port: number };
  return {
    url: `nats://127.0.0.1:${address.port}`,
    drop: (count) => {
      armed += count;
    },
    dropped: () => dropped,
    cut: () => {
      cut = true;
    },
    reset: () => {
      for (const socket of sockets) socket.destroy();
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => relay.close(() => resolve()));
    },
  };
}

/**
 * The first whole protocol frame in `buffer`: a line, or a MSG/HMSG line with its payload. Undefined
 * until all of it has arrived.
 */
function nextFrame(buffer: Buffer): { length: number; inbox: boolean; payload: string } | undefined {
  const end = buffer.indexOf("\r\n");
  if (end < 0) return undefined;
  const line = buffer.subarray(0, end).toString("latin1");
  const parts = line.split(" ");
  if (parts[0] !== "MSG" && parts[0] !== "HMSG") return { length: end + 2, inbox: false, payload: "" };
  const size = Number(parts.at(-1));
  const length = end + 2 + size + 2;
  if (buffer.length < length) return undefined;
  const headerSize = parts[0] === "HMSG" ? Number(parts.at(-2)) : 0;
  const payload = buffer.subarray(end + 2 + headerSize, end + 2 + size).toString("utf8");
  return { length, inbox: (parts[1] ?? "").startsWith("_INBOX."), payload };
}
