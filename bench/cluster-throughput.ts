/**
 * Throughput across processes: leads in the bench's runtime (as the daemon hosts them) each spawn
 * `WORKERS_PER_LEAD` subagents at once, placed on `troupe worker` processes; each subagent does three
 * turns (two reads of a file, an answer) against a scripted model that takes 20 ms per reply, in a
 * process of its own. On one nats-server, or on the three-node cluster with everything at R3.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { Runtime } from "../src/actors/runtime.js";
import { NatsBus } from "../src/bus/nats-bus.js";
import { natsOptionsFromConfig } from "../src/compose/nats-options.js";
import { loadConfig } from "../src/config/load.js";
import { createLogger } from "../src/log.js";
import { waitFor } from "../test/support/wait.js";
import {
  type BrokerKind,
  type Deployment,
  deploy,
  nodeFor,
  startBroker,
  startWorker,
} from "./cluster-deployment.js";
import { startModelProcess, WORKERS_PER_LEAD } from "./model-process.js";
import { agentsDone } from "./scale.js";

export interface ThroughputResult {
  broker: BrokerKind;
  workers: number;
  /** Agents started at once: the leads and their subagents. */
  agents: number;
  wallMs: number;
  /** Agents that did their three turns. */
  finished: number;
  /** Subagents no worker took (placement timed out), which their lead then hosted itself. */
  hostedByLead: number;
}

/** `subagents` subagents at once, under leads of `WORKERS_PER_LEAD` each, over `workers` workers. */
export async function measureThroughput(
  kind: BrokerKind,
  workers: number,
  subagents: number,
): Promise<ThroughputResult> {
  const store = mkdtempSync(join(tmpdir(), "troupe-bench-nats-"));
  const broker = await startBroker(kind, store);
  const model = await startModelProcess("lead-and-readers-20ms");
  const deployment = deploy({
    replicas: broker.replicas,
    modelURL: model.baseURL,
    subagents: WORKERS_PER_LEAD,
  });
  try {
    const leads = await leadRuntime(deployment, nodeFor(broker, 0));
    try {
      for (let i = 0; i < workers; i++)
        await startWorker(deployment, nodeFor(broker, i + 1), { heartbeatMs: 1000, deadAfterMs: 5000 });
      const heartbeats = await leads.runtime.bus.kv("workers");
      await waitFor(
        "the workers' heartbeats",
        async () => (await heartbeats.keys()).length === workers,
        15_000,
      );
      const once = async () => agentsDone(await leads.runtime.start({ task: "have the workers read" }).done);
      await once(); // warm up: modules, sockets, streams, in every process
      leads.hostedHere = 0;
      const runs = Math.ceil(subagents / WORKERS_PER_LEAD);
      const started = performance.now();
      const finished = await Promise.all(Array.from({ length: runs }, () => once()));
      return {
        broker: kind,
        workers,
        agents: runs * (WORKERS_PER_LEAD + 1),
        wallMs: performance.now() - started,
        finished: finished.reduce((sum, n) => sum + n, 0),
        hostedByLead: leads.hostedHere,
      };
    } finally {
      await leads.close();
    }
  } finally {
    await deployment.stop();
    await model.stop();
    await broker.stop();
    rmSync(store, { recursive: true, force: true });
  }
}

/**
 * The leads' runtime, on `url` with the deployment's config. Its bus makes the stream and buckets
 * as the daemon does, with the replicas troupe.yaml says, before any worker connects. It counts
 * the subagents it ends up hosting itself (it says so in a warning).
 */
export async function leadRuntime(deployment: Deployment, url: string) {
  const config = loadConfig({ config: deployment.configDir, env: deployment.env(url) });
  const { nats } = config.troupe;
  const bus = await NatsBus.connect({
    ...natsOptionsFromConfig(nats, config.dir, {}),
    storage: { stream: nats.stream, kv: nats.kv },
  });
  const counted = {
    hostedHere: 0,
    runtime: new Runtime({
      config,
      bus,
      workspace: deployment.workspace,
      env: {},
      log: createLogger({
        level: "warn",
        destination: new Writable({
          write(line: Buffer, _encoding, done) {
            if (line.includes("no worker took the subagent")) counted.hostedHere++;
            done();
          },
        }),
      }),
    }),
    close: async () => {
      await counted.runtime.close();
      await bus.close();
    },
  };
  await counted.runtime.open();
  return counted;
}
