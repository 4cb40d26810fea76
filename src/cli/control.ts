import { type Heartbeat, heartbeatSchema } from "../actors/placement.js";
import { listApprovals } from "../approvals/answer-approval.js";
import type { Bus } from "../bus/bus.js";
import { type ClusterInfo, NatsBus } from "../bus/nats-bus.js";
import { answersAnonymously } from "../bus/nats-connect.js";
import { type ConfigChoice, loadConfig } from "../config/load.js";
import type { ApiRequest } from "../daemon/api.js";
import type { RunList } from "../daemon/run-index.js";
import type { Logger } from "../log.js";
import { jsonVisible, visibleLine } from "../util/visible.js";
import { approvalsTable } from "./approve.js";
import { callApi, connectClient, leftOutLine } from "./client.js";
import { table } from "./table.js";

/** `troupe steer` and `troupe abort`: one acknowledged command to a run through the daemon. */
export async function runControl<V extends "runs.steer" | "runs.abort">(
  where: ConfigChoice,
  verb: V,
  data: ApiRequest<V>,
  log: Logger,
): Promise<number> {
  const config = loadConfig(where);
  const bus = await connectClient(config, `troupe-${verb}`, log);
  try {
    await callApi(bus, config, verb, data);
    process.stdout.write(
      `${verb === "runs.abort" ? "abort sent to" : "steering sent to"} ${visibleLine(data.runId)}\n`,
    );
    return 0;
  } finally {
    await bus.close();
  }
}

/** `troupe status`: the runs the daemon knows, and the workers whose heartbeats are in KV. */
export async function runStatus(
  where: ConfigChoice,
  flags: { json?: boolean },
  log: Logger,
): Promise<number> {
  const config = loadConfig(where);
  const bus = await connectClient(config, "troupe-status", log);
  try {
    const list = (await callApi(bus, config, "runs.list", {})) as RunList;
    const { runs } = list;
    const { url, prefix } = config.troupe.nats;
    const open = await answersAnonymously(url, bus.subjects.api("runs.start"));
    // An observer's credentials may not read these: then they are left out.
    const workers = await readHeartbeats(bus).catch(() => undefined);
    const waiting = await listApprovals(bus)
      .then((records) => records.filter((record) => record.status === "pending"))
      .catch(() => undefined);
    const nats = bus instanceof NatsBus ? await bus.clusterInfo() : undefined;
    if (flags.json) {
      const approvals = waiting?.map(({ request, createdAt }) => ({ ...request, createdAt }));
      process.stdout.write(
        `${jsonVisible(JSON.stringify({ daemon: { nats: url, prefix }, bus: { open }, cluster: nats, workers, runs, approvals }))}\n`,
      );
      return 0;
    }
    const now = Date.now();
    process.stdout.write(`daemon: answering on ${url} (prefix ${prefix})\n`);
    process.stdout.write(
      open
        ? `bus: open to anyone who reaches ${url} (see docs/nats-permissions.md)\n`
        : "bus: credentials required\n",
    );
    if (nats) process.stdout.write(`${clusterLines(nats).map(visibleLine).join("\n")}\n`);
    process.stdout.write(
      `workers: ${workers === undefined ? "not readable with these credentials" : workers.length ? "" : "none"}\n`,
    );
    for (const worker of workers ?? []) process.stdout.write(`  ${visibleLine(workerLine(worker, now))}\n`);
    process.stdout.write("\n");
    const rows = runs.map((run) => [
      run.runId,
      run.agent,
      run.status,
      age(now - run.startedAt),
      visibleLine(run.task).slice(0, 50),
    ]);
    process.stdout.write(`${table(["RUN", "AGENT", "STATUS", "AGE", "TASK"], rows)}\n`);
    const leftOut = leftOutLine(list);
    if (leftOut) process.stdout.write(`${leftOut}\n`);
    if (waiting?.length)
      process.stdout.write(
        `\napprovals waiting (troupe approve CALL_ID --allow|--deny):\n${approvalsTable(waiting, now)}\n`,
      );
    return 0;
  } finally {
    await bus.close();
  }
}

/**
 * Each worker's last heartbeat, by worker id. A worker's seed may write anything there: what is no
 * heartbeat is left out, and counted in one line.
 */
async function readHeartbeats(bus: Bus): Promise<Array<{ id: string } & Heartbeat>> {
  const kv = await bus.kv("workers");
  const workers: Array<{ id: string } & Heartbeat> = [];
  let junk = 0;
  for (const id of await kv.keys()) {
    const entry = await kv.get<unknown>(id);
    const beat = entry && heartbeatSchema.safeParse(entry.value);
    if (beat?.success) workers.push({ id, ...beat.data });
    else if (entry) junk++;
  }
  if (junk)
    process.stderr.write(
      `troupe: ${junk} record${junk === 1 ? "" : "s"} in the workers bucket that are no heartbeat: left out\n`,
    );
  return workers;
}

/** Where the connection is, and the event stream's replicas as NATS reports them. */
function clusterLines(info: ClusterInfo): string[] {
  const where = info.cluster
    ? `nats: on ${info.server ?? "a server"} of cluster ${info.cluster}`
    : `nats: on ${info.server ?? "a server"} (no cluster)`;
  const { stream } = info;
  if (!stream) return [where];
  const followers = stream.followers.map(
    (peer) =>
      `${peer.name} (${peer.current ? "current" : "behind"}${peer.lag ? `, ${peer.lag} behind` : ""})`,
  );
  return [
    where,
    `stream ${stream.name}: ${stream.replicas} replica${stream.replicas === 1 ? "" : "s"}, leader ${stream.leader ?? "none"}${followers.length ? `; ${followers.join(", ")}` : ""}`,
  ];
}

/** A worker: where it runs, what it hosts, and how long ago it last said so (by its own clock). */
function workerLine(worker: { id: string } & Heartbeat, now: number): string {
  const agents = worker.agentCount ?? worker.agents?.length ?? 0;
  const listed = worker.agents?.length
    ? `: ${worker.agents.join(", ")}${agents > worker.agents.length ? ", …" : ""}`
    : "";
  const beat = worker.at === undefined ? "" : `, last heartbeat ${age(Math.max(0, now - worker.at))} ago`;
  return `${worker.id} on ${worker.host} (pid ${worker.pid}${beat}), ${agents} agent${agents === 1 ? "" : "s"}${listed}`;
}

function age(ms: number): string {
  if (ms < 60_000) return `${Math.round(ms / 1000)}s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)}m`;
  return `${Math.round(ms / 3_600_000)}h`;
}
