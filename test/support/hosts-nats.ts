import type { ChildProcess } from "node:child_process";
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { nkeyAuthenticator } from "@nats-io/transport-node";
import { findNatsServer } from "../../src/bus/embedded-nats.js";
import { roleInbox } from "../../src/bus/permissions.js";
import { exited } from "./cli.js";
import type { Hosts } from "./hosts.js";
import { clusterFormed } from "./nats-cluster.js";
import { unitCommand } from "./systemd-unit.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** The nodes of docs/deploy.md's cluster: their hosts, at the addresses deploy/nats/cluster.conf routes to. */
export const NODE_HOSTS = { "nats-1": 11, "nats-2": 12, "nats-3": 13 } as const;
export type NodeName = keyof typeof NODE_HOSTS;
export const NODE_NAMES = Object.keys(NODE_HOSTS) as NodeName[];

/**
 * Three nats-server nodes, each on its host, started as docs/deploy.md says: by the command of
 * deploy/systemd/nats-troupe.service, from deploy/nats/cluster.conf.
 */
export interface HostedNodes {
  /** Each node's client URL. */
  url: Record<NodeName, string>;
  /** Kills a node with SIGKILL, by pid, and waits until it is gone. */
  kill(node: NodeName): Promise<void>;
  /** Starts a node again; with `emptyStore`, its JetStream directory removed first (a lost disk). */
  start(node: NodeName, options?: { emptyStore?: boolean }): void;
  /**
   * Waits until the three have formed (a stream of three replicas can be placed), asked from the
   * bridge with the daemon's seed: only the daemon may make streams.
   */
  formed(daemonSeed: string): Promise<void>;
  /** What a node (its latest run) has said on stderr lately. */
  log(node: NodeName): string;
  /** Kills every node still running; throws, with its log, for one that exited by itself. */
  stop(): Promise<void>;
}

/**
 * Starts the three nodes on `hosts` (which has the hosts of NODE_HOSTS), each with a copy of
 * deploy/nats/cluster.conf and `authConf` (what `troupe credentials --server-config` prints) beside it
 * in `dir/<node>`, its store in `dir/<node>/store`.
 */
export function startHostedNodes(hosts: Hosts, dir: string, authConf: string): HostedNodes {
  const running = new Map<NodeName, { server: ChildProcess; log: () => string }>();
  const died: string[] = [];
  const storeOf = (node: NodeName) => join(dir, node, "store");
  const start = (node: NodeName, options: { emptyStore?: boolean } = {}) => {
    if (options.emptyStore) rmSync(storeOf(node), { recursive: true, force: true });
    mkdirSync(storeOf(node), { recursive: true });
    copyFileSync(join(ROOT, "deploy/nats/cluster.conf"), join(dir, node, "cluster.conf"));
    writeFileSync(join(dir, node, "auth.conf"), authConf);
    // What deploy/systemd/nats-troupe.service starts, with its node's drop-in.
    const unit = unitCommand(
      join(ROOT, "deploy/systemd/nats-troupe.service"),
      {
        "/usr/sbin/nats-server": findNatsServer() ?? "nats-server",
        "/etc/nats": join(dir, node),
        "/var/lib/nats/jetstream": storeOf(node),
      },
      { NATS_NODE: node },
    );
    const server = hosts.spawn(node, unit.command, unit.args, {
      env: { ...process.env, ...unit.env },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let log = "";
    server.stderr?.on("data", (chunk) => (log = (log + chunk).slice(-20_000)));
    server.once("exit", (code, signal) => {
      if (signal !== "SIGKILL") died.push(`${node} exited (${code ?? signal}): ${log}`);
    });
    running.set(node, { server, log: () => log });
  };
  for (const node of NODE_NAMES) start(node);
  const kill = async (node: NodeName) => {
    const entry = running.get(node);
    running.delete(node);
    if (!entry || entry.server.exitCode !== null) return;
    const gone = exited(entry.server);
    entry.server.kill("SIGKILL");
    await gone;
  };
  const url = Object.fromEntries(
    NODE_NAMES.map((node) => [node, `nats://${hosts.address[node]}:4222`]),
  ) as Record<NodeName, string>;
  return {
    url,
    kill,
    start,
    log: (node) => running.get(node)?.log() ?? "",
    formed: (daemonSeed) =>
      clusterFormed(Object.values(url), {
        authenticator: nkeyAuthenticator(new TextEncoder().encode(daemonSeed)),
        inboxPrefix: roleInbox("troupe", "daemon"),
      }),
    async stop() {
      for (const node of NODE_NAMES) await kill(node);
      if (died.length > 0) throw new Error(died.join("\n"));
    },
  };
}
