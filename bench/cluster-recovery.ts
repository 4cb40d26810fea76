/**
 * Recovery on the three-node cluster (R3): a `troupe daemon` hosts the lead, two `troupe worker`s
 * on the other nodes host its subagent, a `troupe run --json` client on a node of its own follows
 * the run. Mid-run, one fault; measured: from the fault to the first event the client prints that
 * was made after it (its `ts`), so events already on their way when the fault struck do not count.
 * The agent streams a chunk every 20 ms, so that event comes at most 20 ms after the run goes on.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Placement } from "../src/actors/placement.js";
import { NatsBus } from "../src/bus/nats-bus.js";
import { ScriptedModelServer } from "../src/testing/scripted-model-server.js";
import { type AckDroppingRelay, ackDroppingRelay } from "../test/support/ack-dropping-relay.js";
import { waitFor } from "../test/support/wait.js";
import {
  type Broker,
  deploy,
  Followed,
  startBroker,
  startWorker,
  type WorkerProcess,
  whenWritten,
} from "./cluster-deployment.js";
import { stopChild } from "./processes.js";

/**
 * `leader node`: kill -9 of the daemon's node, while the lead streams its answer; the daemon is
 * connected to the node that leads the event stream, so the stream elects another leader.
 * `follower node`: the same with the daemon on a node that only holds a replica of it.
 * `worker`: kill -9 of the worker hosting the subagent, while it streams its answer.
 * `partition`: that worker's link to NATS goes dead instead (a relay stops forwarding); it is not
 * told, and goes on with its copy.
 */
export type Fault = "leader node" | "follower node" | "worker" | "partition";
const killsANode = (fault: Fault) => fault === "leader node" || fault === "follower node";

export interface RecoverySample {
  fault: Fault;
  /** The workers' --dead-after-ms (and --heartbeat-ms), for the faults of a worker. */
  timing?: WorkerTiming;
  /** The fault → the first event made after it, as the `troupe run` client printed it. */
  clientMs: number;
  /** The fault → the same, as a reader of the event log (JetStream, with follow) got it. */
  logMs: number;
  /** The node that led the event stream when the fault struck. */
  streamLeader: string | undefined;
  /** The daemon's node. */
  daemonNode: string;
}

export interface WorkerTiming {
  heartbeatMs: number;
  deadAfterMs: number;
}

/** A streamed answer long enough to strike mid-way: 600 chunks, 20 ms apart. */
const longAnswer = { text: "word ".repeat(600), chunks: 600, chunkDelayMs: 20 };
/** Chunks the client sees before the fault: the agent is well into its answer. */
const DELTAS_BEFORE_FAULT = 10;
const EVENT_TIMEOUT_MS = 60_000;

/** `troupe worker`'s defaults. */
export const DEFAULT_TIMING: WorkerTiming = { heartbeatMs: 1000, deadAfterMs: 5000 };

export async function measureRecovery(
  fault: Fault,
  timing: WorkerTiming = DEFAULT_TIMING,
): Promise<RecoverySample> {
  const model = await ScriptedModelServer.start(
    killsANode(fault)
      ? [{ match: { system: '"lead"' }, reply: longAnswer, times: Number.POSITIVE_INFINITY }]
      : [
          {
            match: { system: '"lead"', turn: 1 },
            reply: { toolCalls: [{ name: "subagent_worker", arguments: { task: "Answer at length." } }] },
          },
          { match: { system: '"lead"', turn: 2 }, reply: { text: "Done." } },
          // The resumed subagent asks again: the same answer.
          { match: { system: '"worker"' }, reply: longAnswer, times: Number.POSITIVE_INFINITY },
        ],
  );
  const store = mkdtempSync(join(tmpdir(), "troupe-bench-nats-"));
  const broker = await startBroker("cluster", store);
  const deployment = deploy({ replicas: broker.replicas, modelURL: model.baseURL, subagents: 1 });
  const relays: AckDroppingRelay[] = [];
  const reading = new AbortController();
  let observer: NatsBus | undefined;
  try {
    // Where the stream's leader is decides where the daemon goes: made first, as the daemon makes it.
    const leader = await makeStream(broker, deployment.prefix);
    const daemonAt = fault === "leader node" ? leader : (leader + 1) % 3;
    const [daemonNode, workerNode, clientNode] = [0, 1, 2].map(
      (i) => broker.urls[(daemonAt + i) % 3] ?? "",
    ) as [string, string, string];
    const daemon = deployment.troupe(["daemon"], daemonNode);
    await whenWritten(daemon, "stderr", /troupe daemon ready/);
    observer = await NatsBus.connect({ url: clientNode, prefix: deployment.prefix });
    const workers: WorkerProcess[] = [];
    if (!killsANode(fault)) {
      for (const node of [workerNode, clientNode]) {
        // A partitioned worker reaches its node through a relay that can stop forwarding.
        const relay = fault === "partition" ? await ackDroppingRelay(node) : undefined;
        if (relay) relays.push(relay);
        workers.push(await startWorker(deployment, relay?.url ?? node, timing));
      }
      const heartbeats = await observer.kv("workers");
      await waitFor("the workers' heartbeats", async () => (await heartbeats.keys()).length === 2, 15_000);
    }
    const client = Followed.client(deployment.troupe(["run", "--json", "Answer at length."], clientNode));
    const streaming = (killsANode(fault) ? leadDeltas : subagentDeltas)(client);
    await waitFor("the answer to stream", () => streaming().length >= DELTAS_BEFORE_FAULT, EVENT_TIMEOUT_MS);
    const { runId = "", agentId = "" } = streaming()[0] ?? {};
    const log = Followed.log(observer, runId, reading.signal);
    await log.next((event) => event.agentId === agentId, EVENT_TIMEOUT_MS, "the run in the log");
    const streamLeader = (await observer.clusterInfo()).stream?.leader;
    const placed = await (await observer.kv("actors")).get<Placement>(`${runId}.${agentId}`);
    const host = workers.findIndex((worker) => worker.id === placed?.value.worker);

    const struck = Date.now();
    if (killsANode(fault)) await broker.kill(daemonAt);
    else if (fault === "worker") await stopChild(workers[host]?.child ?? noHost(agentId), "SIGKILL");
    else (relays[host] ?? noHost(agentId)).cut();
    // Events made until the killed process was gone may still have got out: they do not count.
    const over = Date.now();
    const after = (followed: Followed, who: string) =>
      followed
        .next(
          (event) => event.agentId === agentId && event.ts > over,
          EVENT_TIMEOUT_MS,
          `${who} after ${fault}`,
        )
        .then((seen) => seen.at - struck);
    return {
      fault,
      ...(killsANode(fault) ? {} : { timing }),
      clientMs: await after(client, "the client"),
      logMs: await after(log, "the log"),
      streamLeader,
      daemonNode: `troupe-${daemonAt + 1}`,
    };
  } finally {
    reading.abort();
    await observer?.close();
    await deployment.stop();
    for (const relay of relays) await relay.close();
    await broker.stop();
    await model.close();
    rmSync(store, { recursive: true, force: true });
  }
}

/** Makes the event stream on the cluster, with its replicas; resolves with its leader's index. */
async function makeStream(broker: Broker, prefix: string): Promise<number> {
  const replicas = { replicas: broker.replicas };
  const bus = await NatsBus.connect({
    url: broker.urls.join(","),
    prefix,
    storage: { stream: replicas, kv: replicas },
  });
  try {
    return nodeIndex((await bus.clusterInfo()).stream?.leader);
  } finally {
    await bus.close();
  }
}

function noHost(agentId: string): never {
  throw new Error(`no worker of this bench hosts ${agentId}`);
}

/** The index of a node in the broker's URLs, from its name (`troupe-1` is the first). */
function nodeIndex(name: string | undefined): number {
  const index = Number(name?.replace("troupe-", "")) - 1;
  if (!(index >= 0 && index < 3)) throw new Error(`the event stream has no leader among the nodes (${name})`);
  return index;
}

/** The model chunks the client has seen of the run's lead. */
const leadDeltas = (client: Followed) => () =>
  client.seen.map((seen) => seen.envelope).filter((e) => e.type === "model.delta" && !e.parentId);

/** The model chunks the client has seen of a subagent. */
const subagentDeltas = (client: Followed) => () =>
  client.seen.map((seen) => seen.envelope).filter((e) => e.type === "model.delta" && e.parentId);
