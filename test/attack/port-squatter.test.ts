import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { afterEach, expect, it } from "vitest";
import { freePort, NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { CLIENT_ROLES } from "../../src/cli/client.js";
import { natsOptionsFromConfig } from "../../src/compose/nats-options.js";
import { loadConfig } from "../../src/config/load.js";
import { silentLogger } from "../../src/log.js";
import { makeServerCertificates } from "../../src/trust/certificates.js";
import { runTroupe } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";
import { squat } from "../support/port-squatter.js";

/*
 * Another local user takes the embedded server's port while the daemon restarts (its server stops
 * with it), with a front that asks for credentials and forwards them, stripped, to an open server of
 * its own. Every Troupe command of the data dir pins the CA the daemon made: a client connected
 * before, a new `troupe run`, and the daemon starting again all refuse the front before they send it
 * anything, and nothing reaches the squatter's server.
 */
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const fronts = [
  ["a front that asks for credentials", false],
  ["a front with TLS on a certificate of its own for 127.0.0.1", true],
] as const;

it.each(fronts)(
  "%s on the port between the daemon's stop and start: refused by clients and the daemon, nothing reaches it",
  async (_, withTls) => {
    const prefix = uniquePrefix();
    const daemon = await embeddedDaemon(
      {
        "config/troupe.yaml": `nats:\n  prefix: ${prefix}\n`,
        "config/agents/a.yaml": "name: a\ndescription: A.\n",
      },
      "http://127.0.0.1:9/v1",
      cleanups,
    );
    await daemon.start();
    const url = daemon.env.NATS_URL as string;
    const port = Number(new URL(url.replace(/^nats:/, "http:")).port);

    // A client of the data dir, connected while the real server is up, as `troupe observe` is.
    const config = loadConfig({ config: join(daemon.dir, "config"), env: daemon.env, cwd: daemon.dir });
    const client = await NatsBus.connect({
      ...natsOptionsFromConfig(config.troupe.nats, config.dir, daemon.env, {
        dataDir: join(daemon.dir, ".data"),
        roles: CLIENT_ROLES,
      }),
      name: "troupe-observe",
      log: silentLogger,
    });
    cleanups.push(() => client.close());

    // The squatter's own open server, and everything that arrives there.
    const backing = await NatsServerProcess.start({
      storeDir: join(daemon.dir, "squatter-store"),
      port: await freePort(),
    });
    cleanups.push(() => backing.stop());
    const watcher = await connect({ servers: backing.url });
    cleanups.push(() => watcher.close());
    const arrived: string[] = [];
    watcher.subscribe(">", { callback: (_error, msg) => void arrived.push(msg.subject) });
    const forged = makeServerCertificates("troupe embedded nats-server");

    await daemon.stop();
    const front = await squat(
      port,
      backing.port,
      withTls ? { cert: forged.serverCert, key: forged.serverKey } : undefined,
    );
    cleanups.push(() => front.close());

    // The client tries to come back (to the front), and never gives it a CONNECT.
    const deadline = Date.now() + 3000;
    while (front.connections() < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(front.connections()).toBeGreaterThanOrEqual(1);
    expect(front.connects()).toEqual([]);

    const run = await runTroupe(
      ["--config", join(daemon.dir, "config"), "run", "--wait-daemon", "2", "read the secrets"],
      {
        cwd: daemon.dir,
        env: daemon.env,
      },
    );
    expect(run.code).not.toBe(0);
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
    expect(run.stderr).toContain(`the server at ${url} is not this data dir's nats-server`);

    await expect(daemon.start()).rejects.toThrow(/exited \(\d+\) before it was ready/);
    expect(daemon.stderr()).toContain("is not this data dir's nats-server");
    expect(daemon.stderr()).not.toContain("troupe daemon ready");

    // Not one CONNECT (so no credentials, not even a signed nonce) went to the front from anyone.
    expect(front.connections()).toBeGreaterThanOrEqual(3);
    expect(front.connects()).toEqual([]);
    await watcher.flush();
    expect(arrived).toEqual([]);
  },
  60_000,
);
