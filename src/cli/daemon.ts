import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { Runtime } from "../actors/runtime.js";
import { answersNats, findNatsServer, NATS_INSTALL_HINT, NatsServerProcess } from "../bus/embedded-nats.js";
import { natsOptionsFromConfig } from "../bus/from-config.js";
import { NatsBus } from "../bus/nats-bus.js";
import { loadConfig } from "../config/load.js";
import { dataDir } from "../config/paths.js";
import { Daemon } from "../daemon/daemon.js";
import type { Logger } from "../log.js";
import { BusApprover } from "../safety/bus-approver.js";

export class NoNatsError extends Error {
  override name = "NoNatsError";
}

/**
 * `troupe daemon`: connects to NATS (starting a nats-server child when nothing answers and one is
 * installed), serves the API and hosts runs until SIGINT or SIGTERM, then drains in order.
 */
export async function runDaemon(
  configPath: string | undefined,
  natsUrl: string | undefined,
  log: Logger,
): Promise<number> {
  const config = loadConfig({ config: configPath });
  const nats = { ...config.troupe.nats, ...(natsUrl ? { url: natsUrl } : {}) };
  const embedded = await embeddedServer(nats.url, nats.embedded, dataDir(config.troupe.dataDir), log);
  const bus = await NatsBus.connect({
    ...natsOptionsFromConfig(nats, config.dir),
    name: "troupe-daemon",
    log,
  });
  const runtime = await new Runtime({
    config,
    bus,
    log,
    // Approvals are records on the bus: any terminal may answer them.
    approver: new BusApprover(bus, config.troupe.approval.timeoutMs, log),
  }).open();
  const daemon = new Daemon(runtime, log);
  await daemon.start();
  process.stderr.write(
    `troupe daemon ready on ${nats.url} (prefix ${nats.prefix}${embedded ? `, nats-server pid ${embedded.pid}` : ""})\n`,
  );
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  log.info("stopping: no new runs, then drain");
  await daemon.stop();
  await runtime.close();
  await bus.close();
  await embedded?.stop();
  process.stderr.write("troupe daemon stopped\n");
  return 0;
}

/** Starts nats-server as a child when nothing answers at a loopback URL and embedding is on. */
async function embeddedServer(
  url: string,
  enabled: boolean,
  data: string,
  log: Logger,
): Promise<NatsServerProcess | undefined> {
  const target = new URL(
    url
      .split(",")[0]
      ?.trim()
      .replace(/^nats:/, "http:") ?? "http://127.0.0.1:4222",
  );
  const port = Number(target.port || 4222);
  if (await answersNats(target.hostname, port)) return undefined;
  const loopback = ["127.0.0.1", "localhost", "::1"].includes(target.hostname);
  if (!enabled || !loopback)
    throw new NoNatsError(
      `nothing answers at ${url}: start NATS there, or point nats.url (or NATS_URL) at one`,
    );
  if (!findNatsServer())
    throw new NoNatsError(`nothing answers at ${url} and nats-server is not installed: ${NATS_INSTALL_HINT}`);
  const storeDir = join(data, "nats");
  mkdirSync(storeDir, { recursive: true, mode: 0o700 });
  const server = await NatsServerProcess.start({ storeDir, port });
  log.info({ pid: server.pid, port, storeDir }, "started an embedded nats-server");
  return server;
}
