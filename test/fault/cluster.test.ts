import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterEach, expect, it } from "vitest";
import type { ClusterInfo } from "../../src/bus/nats-bus.js";
import { subjects, uniquePrefix } from "../../src/bus/subjects.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, spawnTroupe, tempTree } from "../support/cli.js";
import { startCluster } from "../support/nats-cluster.js";
import { waitFor } from "../support/wait.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/*
 * Troupe on a three-node NATS cluster with JetStream, on loopback: its stream and buckets have three
 * replicas because troupe.yaml says so, and a run goes on when the node its daemon is connected to is
 * killed with SIGKILL: the daemon reconnects to another node (the cluster told it of them), the stream
 * keeps a leader, and the client, on another node, sees every event in order.
 */
it("on a three-node cluster: R3 from troupe.yaml, and a run finishes after kill -9 of the daemon's node", async () => {
  const prefix = uniquePrefix("cl");
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": [
      "defaultAgent: worker",
      "defaultModel: scripted",
      "nats:",
      `  prefix: ${prefix}`,
      "  embedded: false",
      "  stream: { replicas: 3 }",
      "  kv: { replicas: 3 }",
      "",
    ].join("\n"),
    "config/agents/worker.yaml": "name: worker\ndescription: Works.\ntools: [read_file]\n",
    "notes.txt": "survives\n",
  });
  cleanups.push(dispose);
  const cluster = await startCluster(join(dir, "cluster"));
  cleanups.push(() => cluster.stop());
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: { text: "Reading.", toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] },
    },
    {
      match: { turn: 2 },
      reply: { text: `It says: survives. ${"More. ".repeat(40)}`, chunks: 40, chunkDelayMs: 100 },
    },
  ]);
  cleanups.push(() => model.close());
  const [nodeA, , nodeC] = cluster.urls as [string, string, string];
  const env = (url: string) => ({
    ...process.env,
    NATS_URL: url,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  });
  const troupe = (args: string[], url: string) => {
    const running = spawnTroupe(["--config", join(dir, "config"), ...args], { cwd: dir, env: env(url) });
    cleanups.push(() => void running.child.kill("SIGKILL"));
    return running;
  };
  const daemon = troupe(["daemon"], nodeA);
  await waitFor("the daemon", () => daemon.stderr().includes("troupe daemon ready"), 30_000);

  // What JetStream says of the stream and a bucket the daemon made: three replicas, one of them leader.
  const nc = await connect({ servers: nodeC });
  cleanups.push(() => nc.close());
  const jsm = await jetstreamManager(nc);
  const stream = await jsm.streams.info(subjects(prefix).eventStream);
  expect(stream.config.num_replicas).toBe(3);
  expect(stream.cluster?.leader).toMatch(/^troupe-[123]$/);
  expect(stream.cluster?.replicas).toHaveLength(2);
  const bucket = await jsm.streams.info(`KV_${prefix}_snapshots`);
  expect(bucket.config.num_replicas).toBe(3);

  // troupe status, from node C, says where it is and how the stream is kept, as NATS reports them.
  const status = await runTroupe(["--config", join(dir, "config"), "status", "--json"], {
    cwd: dir,
    env: env(nodeC),
  });
  expect(status.code, status.stderr).toBe(0);
  const { cluster: reported } = JSON.parse(status.stdout) as { cluster: ClusterInfo };
  expect(reported).toMatchObject({ server: "troupe-3", cluster: "troupe", stream: { replicas: 3 } });
  const peers = [reported.stream?.leader, ...(reported.stream?.followers ?? []).map((peer) => peer.name)];
  expect(peers.sort()).toEqual(["troupe-1", "troupe-2", "troupe-3"]);
  const text = await runTroupe(["--config", join(dir, "config"), "status"], { cwd: dir, env: env(nodeC) });
  expect(text.stdout).toContain("nats: on troupe-3 of cluster troupe\n");
  expect(text.stdout).toMatch(/^stream \S+: 3 replicas, leader troupe-[123]; troupe-\d \(\w+/m);

  const client = troupe(["run", "--json", "What do the notes say?"], nodeC);
  await waitFor(
    "the second answer to stream",
    () => client.stdout().split('"model.delta"').length > 6,
    20_000,
  );

  await cluster.kill(0);

  expect(await client.exit, client.stderr()).toBe(0);
  const events = client
    .stdout()
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { seq: number; type: string; data: { text?: string } });
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
  expect(events.at(-1)).toMatchObject({ type: "agent.stopped", data: { reason: "done" } });
  const streamed = events
    .filter((e) => e.type === "model.delta")
    .map((e) => e.data.text)
    .join("");
  expect(streamed).toBe(`Reading.It says: survives. ${"More. ".repeat(40)}`);
  expect(daemon.child.exitCode).toBeNull();
}, 120_000);
