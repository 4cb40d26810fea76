import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type JetStreamManager, jetstreamManager, StorageType } from "@nats-io/jetstream";
import { type ConnectionOptions, connect } from "@nats-io/transport-node";
import { freePort, NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { waitFor } from "./wait.js";

/** nats-server nodes in one cluster with JetStream, on loopback, each with its store and config file. */
export interface NatsCluster {
  /** Each node's client URL, in order. */
  urls: string[];
  /** Every node's URL, comma-separated: what troupe.yaml's nats.url takes. */
  url: string;
  nodes: Array<NatsServerProcess | undefined>;
  /** The config file of node `i`, as docs/deploy.md shows one. */
  configOf(i: number): string;
  /** Kills node `i` with a real SIGKILL, by pid. */
  kill(i: number): Promise<void>;
  /** Starts node `i` again on its ports; with `emptyStore`, its JetStream store gone first (a lost disk). */
  restart(i: number, options?: { emptyStore?: boolean }): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts a cluster of `size` nodes (`troupe-1` …) in `dir` and waits until JetStream answers on every
 * one (a meta leader elected) and a stream with `size` replicas can be placed, so one can be made at
 * once.
 */
export async function startCluster(dir: string, size = 3): Promise<NatsCluster> {
  const clientPorts = await Promise.all(Array.from({ length: size }, () => freePort()));
  const routePorts = await Promise.all(Array.from({ length: size }, () => freePort()));
  const configOf = (i: number) => join(dir, `node-${i + 1}.conf`);
  const storeOf = (i: number) => join(dir, `node-${i + 1}-store`);
  for (let i = 0; i < size; i++) {
    mkdirSync(storeOf(i), { recursive: true });
    const routes = routePorts.filter((_, j) => j !== i).map((port) => `"nats-route://127.0.0.1:${port}"`);
    writeFileSync(
      configOf(i),
      [
        `server_name: troupe-${i + 1}`,
        `listen: 127.0.0.1:${clientPorts[i]}`,
        "jetstream: enabled",
        "cluster {",
        "  name: troupe",
        `  listen: 127.0.0.1:${routePorts[i]}`,
        `  routes: [${routes.join(", ")}]`,
        "}",
        "",
      ].join("\n"),
    );
  }
  const nodes: Array<NatsServerProcess | undefined> = new Array(size).fill(undefined);
  const startNode = async (i: number) => {
    nodes[i] = await NatsServerProcess.start({
      storeDir: storeOf(i),
      port: clientPorts[i] as number,
      args: ["-c", configOf(i)],
      readyTimeoutMs: 20_000,
    });
  };
  const urls = clientPorts.map((port) => `nats://127.0.0.1:${port}`);
  const cluster: NatsCluster = {
    urls,
    url: urls.join(","),
    nodes,
    configOf,
    async kill(i) {
      await nodes[i]?.kill("SIGKILL");
      nodes[i] = undefined;
    },
    async restart(i, options = {}) {
      if (options.emptyStore) {
        rmSync(storeOf(i), { recursive: true, force: true });
        mkdirSync(storeOf(i), { recursive: true });
      }
      await startNode(i);
    },
    async stop() {
      await Promise.all(nodes.map((node) => node?.stop()));
    },
  };
  try {
    await Promise.all(nodes.map((_, i) => startNode(i)));
    await clusterFormed(urls);
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  return cluster;
}

/**
 * Waits until JetStream answers on every node of `urls` and a stream with a replica on each can be
 * made, connecting with `options` (a role's credentials, which must be allowed to make streams).
 */
export async function clusterFormed(urls: string[], options: ConnectionOptions = {}): Promise<void> {
  for (const url of urls) await waitFor(`JetStream on ${url}`, () => jetStreamAnswers(url, options), 30_000);
  // JetStream answers before the meta leader knows every peer: until then a stream with a replica
  // on each node finds "no suitable peers for placement".
  await waitFor(
    `room for ${urls.length} replicas`,
    () => placesReplicas(urls.join(","), urls.length, options),
    30_000,
  );
}

/** Whether JetStream answers its account info at `url` (in a cluster: once a meta leader is elected). */
const jetStreamAnswers = (url: string, options: ConnectionOptions) =>
  jetStreamDoes(url, options, (jsm) => jsm.getAccountInfo());

/** Whether a stream with `replicas` replicas can be made at `url` (it is made in memory, then deleted). */
const placesReplicas = (url: string, replicas: number, options: ConnectionOptions) =>
  jetStreamDoes(url, options, async (jsm) => {
    const name = "troupe_cluster_probe";
    await jsm.streams.add({ name, subjects: [name], num_replicas: replicas, storage: StorageType.Memory });
    await jsm.streams.delete(name);
  });

/** Whether `step` succeeds with JetStream at `url`, on a connection of its own. */
async function jetStreamDoes(
  url: string,
  options: ConnectionOptions,
  step: (jsm: JetStreamManager) => Promise<unknown>,
): Promise<boolean> {
  const nc = await connect({ ...options, servers: url.split(","), timeout: 1000 }).catch(() => undefined);
  if (!nc) return false;
  try {
    await step(await jetstreamManager(nc, { timeout: 2000 }));
    return true;
  } catch {
    return false;
  } finally {
    await nc.close();
  }
}
