import { Worker, type WorkerOptions } from "../actors/worker.js";
import { denyingApprover } from "../approvals/approver.js";
import { NatsBus } from "../bus/nats-bus.js";
import { natsOptionsFromConfig } from "../compose/nats-options.js";
import { openRuntime } from "../compose/runtime.js";
import { processTelemetry } from "../compose/telemetry.js";
import { type ConfigChoice, loadConfig } from "../config/load.js";
import { dataDir } from "../config/paths.js";
import type { Logger } from "../log.js";
import { stopSignal } from "./stop-signal.js";

/** `troupe worker`: joins the worker queue and hosts subagents until SIGINT or SIGTERM. */
export async function runWorker(where: ConfigChoice, options: WorkerOptions, log: Logger): Promise<number> {
  const stopped = stopSignal();
  const config = loadConfig(where);
  const bus = await NatsBus.connect({
    ...natsOptionsFromConfig(config.troupe.nats, config.dir, process.env, {
      dataDir: dataDir(config.troupe.dataDir),
      roles: ["worker"],
    }),
    name: "troupe-worker",
    log,
  });
  const telemetry = await processTelemetry(config, "worker", log);
  const runtime = await openRuntime({
    config,
    bus,
    log,
    telemetry,
    // Subagents only read: nothing they do is ever asked about.
    approver: denyingApprover("a subagent cannot ask for approval"),
  });
  const worker = new Worker(runtime, log, options);
  await worker.start();
  process.stderr.write(
    `troupe worker ${worker.id} (pid ${process.pid}) on ${config.troupe.nats.url}, prefix ${config.troupe.nats.prefix}\n`,
  );
  await stopped;
  log.info({ worker: worker.id }, "stopping");
  await worker.stop();
  await runtime.close();
  await telemetry?.shutdown();
  await bus.close();
  return 0;
}
