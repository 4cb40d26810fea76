import { X509Certificate } from "node:crypto";
import { expect, it } from "vitest";
import { makeServerCertificates } from "../../src/trust/certificates.js";

it("makes a CA and a server certificate it signs, for loopback only, that node:crypto reads", () => {
  const made = makeServerCertificates("troupe test");
  const ca = new X509Certificate(made.caCert);
  const server = new X509Certificate(made.serverCert);
  expect(ca.ca).toBe(true);
  expect(server.ca).toBe(false);
  expect(server.verify(ca.publicKey)).toBe(true);
  expect(server.checkIssued(ca)).toBe(true);
  expect(server.subjectAltName).toBe("DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1");
  expect(server.checkIP("127.0.0.1")).toBe("127.0.0.1");
  expect(server.checkHost("example.com")).toBeUndefined();
  expect(new Date(server.validTo).getTime()).toBeGreaterThan(Date.now() + 3000 * 86_400_000);
  // Another CA's certificate is not this one's, whatever its names.
  const other = makeServerCertificates("troupe test");
  expect(new X509Certificate(other.serverCert).verify(ca.publicKey)).toBe(false);
});
