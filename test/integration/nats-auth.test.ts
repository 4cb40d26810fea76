import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createUser } from "@nats-io/nkeys";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { BusUnavailableError } from "../../src/bus/nats-connect.js";
import { refuseSquatter } from "../../src/cli/daemon.js";
import { natsOptionsFromConfig } from "../../src/compose/nats-options.js";
import { natsConfigSchema } from "../../src/config/nats-schema.js";
import { makeEnvelope } from "../../src/events/envelope.js";

let dir: string;
let server: NatsServerProcess;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "troupe-auth-"));
  writeFileSync(
    join(dir, "auth.conf"),
    'authorization { users = [ { user: "daemon", password: "s3cret-pass" } ] }\n',
  );
  server = await NatsServerProcess.start({
    storeDir: join(dir, "store"),
    args: ["-c", join(dir, "auth.conf")],
  });
});
afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it("connects with a user and a password read from the variable troupe.yaml names", async () => {
  const nats = natsConfigSchema.parse({
    url: server.url,
    user: "daemon",
    passwordEnv: "TEST_NATS_PASSWORD",
    prefix: "authok",
  });
  const options = natsOptionsFromConfig(nats, dir, { TEST_NATS_PASSWORD: "s3cret-pass" });
  expect(options).toMatchObject({ user: "daemon", password: "s3cret-pass", prefix: "authok" });
  const bus = await NatsBus.connect(options);
  const ack = await bus.eventLog.append({
    v: 1,
    id: "x1",
    ts: 1,
    runId: "r",
    agentId: "a",
    seq: 0,
    type: "t",
    data: null,
  });
  expect(ack.duplicate).toBe(false);
  await bus.close();
});

it("refuses at once, with one clear error, when the credentials are wrong", async () => {
  const started = Date.now();
  const failure = await NatsBus.connect({
    url: server.url,
    user: "daemon",
    password: "wrong",
    connectTimeoutMs: 10_000,
  }).catch((error) => error);
  expect(failure).toBeInstanceOf(BusUnavailableError);
  expect(failure.message).toMatch(
    /^cannot connect to NATS at nats:\/\/127\.0\.0\.1:\d+: .*(auth|Authorization)/i,
  );
  expect(Date.now() - started).toBeLessThan(5000);
});

it("gives up on an address where nothing answers after its connect timeout", async () => {
  const failure = await NatsBus.connect({ url: "nats://127.0.0.1:1", connectTimeoutMs: 300 }).catch(
    (error) => error,
  );
  expect(failure).toBeInstanceOf(BusUnavailableError);
  expect(failure.message).toContain("cannot connect to NATS at nats://127.0.0.1:1");
});

describe("other credentials from troupe.yaml", () => {
  it("connects with a token read from the variable tokenEnv names", async () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-token-"));
    const tokenServer = await NatsServerProcess.start({
      storeDir: join(dir, "store"),
      args: ["--auth", "s3cret-token-value"],
    });
    try {
      const nats = natsConfigSchema.parse({
        url: tokenServer.url,
        tokenEnv: "TEST_NATS_TOKEN",
        prefix: "tok",
      });
      const bus = await NatsBus.connect(
        natsOptionsFromConfig(nats, dir, { TEST_NATS_TOKEN: "s3cret-token-value" }),
      );
      expect(
        (await bus.eventLog.append(makeEnvelope({ runId: "r", agentId: "a", seq: 0, type: "t", data: null })))
          .duplicate,
      ).toBe(false);
      await bus.close();
      const wrong = await NatsBus.connect({
        url: tokenServer.url,
        token: "nope",
        connectTimeoutMs: 2000,
      }).catch((e) => e);
      expect(wrong).toBeInstanceOf(BusUnavailableError);
    } finally {
      await tokenServer.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("connects with an nkey seed file, relative to the config dir", async () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-nkey-"));
    const user = createUser();
    writeFileSync(join(dir, "user.nk"), new TextDecoder().decode(user.getSeed()));
    writeFileSync(join(dir, "nkey.conf"), `authorization { users = [ { nkey: ${user.getPublicKey()} } ] }\n`);
    const nkeyServer = await NatsServerProcess.start({
      storeDir: join(dir, "store"),
      args: ["-c", join(dir, "nkey.conf")],
    });
    try {
      const nats = natsConfigSchema.parse({ url: nkeyServer.url, nkeySeedFile: "user.nk", prefix: "nk" });
      const bus = await NatsBus.connect(natsOptionsFromConfig(nats, dir, {}));
      expect(
        (await bus.eventLog.append(makeEnvelope({ runId: "r", agentId: "a", seq: 0, type: "t", data: null })))
          .duplicate,
      ).toBe(false);
      await bus.close();
    } finally {
      await nkeyServer.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("TLS from troupe.yaml", () => {
  it("connects over TLS with the CA file given, and refuses a server it cannot verify", async () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-tls-"));
    const made = spawnSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "key.pem",
        "-out",
        "cert.pem",
        "-days",
        "2",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=IP:127.0.0.1,DNS:localhost",
      ],
      { cwd: dir, stdio: "ignore" },
    );
    expect(made.status).toBe(0);
    const tlsServer = await NatsServerProcess.start({
      storeDir: join(dir, "store"),
      args: ["--tls", "--tlscert", join(dir, "cert.pem"), "--tlskey", join(dir, "key.pem")],
    });
    try {
      const nats = natsConfigSchema.parse({
        url: `tls://127.0.0.1:${tlsServer.port}`,
        tls: { caFile: "cert.pem" },
        prefix: "tls",
      });
      const bus = await NatsBus.connect(natsOptionsFromConfig(nats, dir, {}));
      expect(
        (await bus.eventLog.append(makeEnvelope({ runId: "r", agentId: "a", seq: 0, type: "t", data: null })))
          .duplicate,
      ).toBe(false);
      await bus.close();
      const untrusted = await NatsBus.connect({
        url: `tls://127.0.0.1:${tlsServer.port}`,
        connectTimeoutMs: 1500,
      }).catch((e) => e);
      expect(untrusted).toBeInstanceOf(BusUnavailableError);
    } finally {
      await tlsServer.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("a server squatting on the daemon's default address", () => {
  it("an open one is refused unless the URL was chosen; one that asks credentials is not a squatter", async () => {
    const open = await NatsServerProcess.start({ storeDir: join(dir, "open-store") });
    try {
      await expect(refuseSquatter(open.url, false)).rejects.toThrow(
        `a nats-server that asks no credentials already answers at ${open.url}, where this daemon would start its own: stop it, or set nats.url in troupe.yaml (or NATS_URL) to use it on purpose`,
      );
      await expect(refuseSquatter(open.url, true)).resolves.toBeUndefined();
    } finally {
      await open.stop();
    }
    // The server of this file asks for a password: no anonymous client can publish there.
    await expect(refuseSquatter(server.url, false)).resolves.toBeUndefined();
  });
});
