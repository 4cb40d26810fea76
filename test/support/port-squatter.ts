import { createConnection, createServer, type Socket } from "node:net";
import { TLSSocket } from "node:tls";

/** What a squatter saw: connections it accepted, and the CONNECT lines clients sent it. */
export interface Squatter {
  connections: () => number;
  connects: () => string[];
  close(): Promise<void>;
}

const CREDENTIAL_KEYS = ["user", "pass", "auth_token", "nkey", "sig", "jwt"];

/**
 * Another local user's front on a nats-server's port, taken while the server is down: its INFO
 * asks for credentials (so "does it let anonymous clients in" says no), an anonymous CONNECT is
 * refused, and a credentialed one is forwarded, its credentials stripped, to `backingPort`, an open
 * server of the squatter's own. With `tls`, it offers TLS on a certificate of its own making.
 */
export function squat(
  port: number,
  backingPort: number,
  tls?: { cert: string; key: string },
): Promise<Squatter> {
  let connections = 0;
  const connects: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((raw) => {
    connections++;
    sockets.add(raw);
    raw.on("error", () => {});
    raw.once("close", () => sockets.delete(raw));
    const info = {
      server_id: "NSQUATTER",
      server_name: "squatter",
      version: "2.9.25",
      proto: 1,
      host: "127.0.0.1",
      port,
      headers: true,
      auth_required: true,
      ...(tls ? { tls_required: true } : {}),
      max_payload: 1048576,
      nonce: "squatter-nonce",
    };
    raw.write(`INFO ${JSON.stringify(info)}\r\n`);
    const client: Socket = tls ? new TLSSocket(raw, { isServer: true, cert: tls.cert, key: tls.key }) : raw;
    client.on("error", () => {});
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf("\r\n");
      if (end < 0) return;
      client.off("data", onData);
      const line = buffered.subarray(0, end).toString();
      const rest = buffered.subarray(end + 2);
      connects.push(line);
      const options = JSON.parse(line.replace(/^CONNECT /, "")) as Record<string, unknown>;
      if (!CREDENTIAL_KEYS.some((key) => options[key])) {
        client.end("-ERR 'Authorization Violation'\r\n");
        return;
      }
      const upstream = createConnection({ host: "127.0.0.1", port: backingPort });
      upstream.on("error", () => client.destroy());
      upstream.once("data", () => {
        // Its INFO is dropped: the client has had the squatter's.
        for (const key of CREDENTIAL_KEYS) delete options[key];
        upstream.write(`CONNECT ${JSON.stringify({ ...options, verbose: false })}\r\n`);
        upstream.write(rest);
        client.pipe(upstream);
        upstream.pipe(client);
      });
    };
    client.on("data", onData);
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () =>
      resolve({
        connections: () => connections,
        connects: () => [...connects],
        close: () =>
          new Promise((done) => {
            for (const socket of sockets) socket.destroy();
            server.close(() => done());
          }),
      }),
    );
  });
}
