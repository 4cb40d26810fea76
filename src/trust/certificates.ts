import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from "node:crypto";

/**
 * X.509 certificates for the embedded nats-server, made with node:crypto alone: an ECDSA P-256 key
 * and a certificate in DER, as RFC 5280 lays it out. Only what a CA and a loopback server need.
 */

/** A DER element: tag, length, contents. */
function der(tag: number, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  const length =
    body.length < 0x80
      ? Buffer.from([body.length])
      : body.length < 0x100
        ? Buffer.from([0x81, body.length])
        : Buffer.from([0x82, body.length >> 8, body.length & 0xff]);
  return Buffer.concat([Buffer.from([tag]), length, body]);
}

const sequence = (...parts: Buffer[]) => der(0x30, ...parts);
const set = (...parts: Buffer[]) => der(0x31, ...parts);
const octets = (value: Buffer) => der(0x04, value);
const bits = (value: Buffer, unused = 0) => der(0x03, Buffer.from([unused]), value);
const utf8 = (text: string) => der(0x0c, Buffer.from(text, "utf8"));
const TRUE = der(0x01, Buffer.from([0xff]));

function oid(dotted: string): Buffer {
  const [first = 0, second = 0, ...rest] = dotted.split(".").map(Number);
  const bytes = [first * 40 + second];
  for (const arc of rest) {
    const chunk = [arc & 0x7f];
    for (let value = arc >>> 7; value > 0; value >>>= 7) chunk.unshift((value & 0x7f) | 0x80);
    bytes.push(...chunk);
  }
  return der(0x06, Buffer.from(bytes));
}

/** A positive INTEGER from big-endian bytes. */
function integer(value: Buffer): Buffer {
  const trimmed = value.subarray(
    Math.max(
      0,
      value.findIndex((byte) => byte !== 0),
    ),
  );
  return der(0x02, (trimmed[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), trimmed]) : trimmed);
}

/** UTCTime up to 2049, GeneralizedTime after (RFC 5280 4.1.2.5). */
function time(at: Date): Buffer {
  const iso = at.toISOString().replace(/[-:T]/g, "").slice(0, 14);
  return at.getUTCFullYear() < 2050
    ? der(0x17, Buffer.from(`${iso.slice(2)}Z`))
    : der(0x18, Buffer.from(`${iso}Z`));
}

const ECDSA_SHA256 = sequence(oid("1.2.840.10045.4.3.2"));
const commonName = (name: string) => sequence(set(sequence(oid("2.5.4.3"), utf8(name))));
const extension = (id: string, value: Buffer, critical = false) =>
  sequence(oid(id), ...(critical ? [TRUE] : []), octets(value));

/** SHA-1 of the public key's bits: the key identifier RFC 5280 4.2.1.2 suggests. */
function keyId(key: KeyObject): Buffer {
  const spki = key.export({ type: "spki", format: "der" });
  // The BIT STRING ends the SubjectPublicKeyInfo; for P-256 its key is the last 65 bytes.
  return createHash("sha1")
    .update(spki.subarray(spki.length - 65))
    .digest();
}

interface Issuer {
  name: string;
  key: KeyObject;
  publicKey: KeyObject;
}

interface CertificateRequest {
  subject: string;
  publicKey: KeyObject;
  issuer: Issuer;
  days: number;
  /** A CA: may sign certificates. Otherwise a TLS server for `hosts`. */
  ca?: boolean;
  /** DNS names and IP addresses (v4 or v6) the server answers on. */
  hosts?: { dns: string[]; ip: string[] };
}

function ipBytes(ip: string): Buffer {
  if (ip.includes(".")) return Buffer.from(ip.split(".").map(Number));
  const [head = "", tail = ""] = ip.split("::");
  const groups = (part: string) => (part ? part.split(":").map((group) => Number.parseInt(group, 16)) : []);
  const front = groups(head);
  const back = groups(tail);
  const all = [...front, ...Array(8 - front.length - back.length).fill(0), ...back];
  return Buffer.from(all.flatMap((group) => [group >> 8, group & 0xff]));
}

/** A certificate in PEM. */
function certificate(request: CertificateRequest): string {
  const now = Date.now();
  const extensions = request.ca
    ? [
        extension("2.5.29.19", sequence(TRUE), true),
        // keyCertSign and cRLSign.
        extension("2.5.29.15", bits(Buffer.from([0x06]), 1), true),
        extension("2.5.29.14", octets(keyId(request.publicKey))),
      ]
    : [
        extension("2.5.29.19", sequence(), true),
        // digitalSignature.
        extension("2.5.29.15", bits(Buffer.from([0x80]), 7), true),
        // serverAuth.
        extension("2.5.29.37", sequence(oid("1.3.6.1.5.5.7.3.1"))),
        extension(
          "2.5.29.17",
          sequence(
            ...(request.hosts?.dns ?? []).map((name) => der(0x82, Buffer.from(name))),
            ...(request.hosts?.ip ?? []).map((ip) => der(0x87, ipBytes(ip))),
          ),
        ),
        extension("2.5.29.14", octets(keyId(request.publicKey))),
        extension("2.5.29.35", sequence(der(0x80, keyId(request.issuer.publicKey)))),
      ];
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f;
  const tbs = sequence(
    der(0xa0, integer(Buffer.from([2]))),
    integer(serial),
    ECDSA_SHA256,
    commonName(request.issuer.name),
    // An hour back, for clocks a little behind.
    sequence(time(new Date(now - 3_600_000)), time(new Date(now + request.days * 86_400_000))),
    commonName(request.subject),
    request.publicKey.export({ type: "spki", format: "der" }),
    der(0xa3, sequence(...extensions)),
  );
  const signature = sign("sha256", tbs, request.issuer.key);
  const body = sequence(tbs, ECDSA_SHA256, bits(signature)).toString("base64");
  return `-----BEGIN CERTIFICATE-----\n${body.match(/.{1,64}/g)?.join("\n")}\n-----END CERTIFICATE-----\n`;
}

export interface ServerCertificates {
  /** The CA's certificate: what every client pins. */
  caCert: string;
  caKey: string;
  serverCert: string;
  serverKey: string;
}

/** A new CA, and a certificate it signs for a server on this machine's loopback addresses. */
export function makeServerCertificates(name: string, days = 3650): ServerCertificates {
  const caPair = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const serverPair = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const issuer = { name: `${name} CA`, key: caPair.privateKey, publicKey: caPair.publicKey };
  const pem = (key: KeyObject) => key.export({ type: "pkcs8", format: "pem" }).toString();
  return {
    caCert: certificate({ subject: issuer.name, publicKey: caPair.publicKey, issuer, days, ca: true }),
    caKey: pem(caPair.privateKey),
    serverCert: certificate({
      subject: name,
      publicKey: serverPair.publicKey,
      issuer,
      days,
      hosts: { dns: ["localhost"], ip: ["127.0.0.1", "::1"] },
    }),
    serverKey: pem(serverPair.privateKey),
  };
}
