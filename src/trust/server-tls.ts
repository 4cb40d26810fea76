import { join } from "node:path";
import { secretExists, writePrivateFile } from "../util/secret-files.js";
import { makeServerCertificates } from "./certificates.js";
import { credentialsDir } from "./role-credentials.js";

/**
 * The embedded nats-server's TLS, in `<dataDir>/credentials/` (0600, in a 0700 dir): a CA made at
 * the first start, and a certificate it signs for the server on loopback. Every Troupe command of
 * the data dir pins that CA, so a process that takes the port while the server is down (another
 * local user's, forwarding to a server of its own) cannot pass for it: it has no certificate the
 * CA signed, and the CA's key never leaves the data dir.
 */
export interface ServerTlsFiles {
  ca: string;
  cert: string;
  key: string;
}

export function serverTlsFiles(dataDir: string): ServerTlsFiles {
  const dir = credentialsDir(dataDir);
  return {
    ca: join(dir, "nats-ca.pem"),
    cert: join(dir, "nats-server.pem"),
    key: join(dir, "nats-server.key"),
  };
}

/** Makes the CA and the server's certificate when any part is missing; returns where they are. */
export function ensureServerTls(dataDir: string): ServerTlsFiles {
  const files = serverTlsFiles(dataDir);
  const caKey = join(credentialsDir(dataDir), "nats-ca.key");
  if ([files.ca, files.cert, files.key, caKey].every(secretExists)) return files;
  const made = makeServerCertificates("troupe embedded nats-server");
  writePrivateFile(caKey, made.caKey);
  writePrivateFile(files.key, made.serverKey);
  writePrivateFile(files.cert, made.serverCert);
  // Last: a command that finds the CA pins it, and the server it pins has what it needs by then.
  writePrivateFile(files.ca, made.caCert);
  return files;
}

/** The CA a command of this data dir pins, once the daemon has made one. */
export function pinnedServerCa(dataDir: string): string | undefined {
  const { ca } = serverTlsFiles(dataDir);
  return secretExists(ca) ? ca : undefined;
}

/** A nats-server `tls` block serving these files; the handshake may take a loaded machine a while. */
export function serverTlsBlock(files: ServerTlsFiles): string {
  return `tls {\n  cert_file: ${JSON.stringify(files.cert)}\n  key_file: ${JSON.stringify(files.key)}\n  timeout: 5\n}\n`;
}
