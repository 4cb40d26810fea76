import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { natsOptionsFromConfig } from "../../src/bus/from-config.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { BusUnavailableError } from "../../src/bus/nats-connect.js";
import { natsConfigSchema } from "../../src/config/schema.js";

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
  const ack = await bus.log.append({
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
