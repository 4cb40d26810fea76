import { execFileSync, type SpawnOptions, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";

/**
 * Hosts as Linux network namespaces on one bridge: each has its own address and network stack, so a
 * process in one reaches another only over the bridge, and a host's link can be cut. They share the
 * filesystem (a workspace, the config). Needs root and iproute2's `ip`.
 */
export interface Hosts {
  /** The address of each host by name, and of the bridge (`bridge`, the root namespace). */
  address: Record<string, string>;
  /** Starts a command inside a host's namespace; its pid is the command's own. */
  spawn(host: string, command: string, args: string[], options?: SpawnOptions): ReturnType<typeof spawn>;
  /** Cuts a host's link (`down`) or mends it (`up`): a partition of that one host. */
  link(host: string, state: "up" | "down"): void;
  /** Removes the namespaces and the bridge. */
  remove(): void;
}

/** Says in one line what is missing when namespaces can't be made here. */
export function hostsUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return "the multi-host tests need root (ip netns); run them as root";
  try {
    execFileSync("ip", ["-V"], { stdio: "ignore" });
  } catch {
    return "the multi-host tests need iproute2's ip: apt-get install iproute2";
  }
  return undefined;
}

/**
 * Makes one namespace per host, each with one address on `<subnet>.0/24` as `addresses` says (the
 * last octet), joined by a bridge at `<subnet>.1`. Throws, saying what is missing, when it can't.
 * The subnet is 10.88.0 by default, the one deploy/nats/cluster.conf routes over; tests that make
 * hosts at the same time take subnets of their own.
 */
export function makeHosts(addresses: Record<string, number>, subnet = "10.88.0"): Hosts {
  const missing = hostsUnavailable();
  if (missing) throw new Error(missing);
  const tag = randomBytes(3).toString("hex");
  const bridge = `tb${tag}`;
  const namespaces = new Map<string, string>();
  const links = new Map<string, string>();
  const ip = (...args: string[]) => execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
  const hosts: Hosts = {
    address: { bridge: `${subnet}.1` },
    spawn: (host, command, args, options = {}) => {
      const ns = namespaces.get(host);
      if (!ns) throw new Error(`no host ${host}`);
      return spawn("ip", ["netns", "exec", ns, command, ...args], options);
    },
    link: (host, state) => {
      const link = links.get(host);
      if (!link) throw new Error(`no host ${host}`);
      ip("link", "set", link, state);
    },
    remove: () => {
      for (const ns of namespaces.values()) {
        try {
          ip("netns", "del", ns);
        } catch {}
      }
      try {
        ip("link", "del", bridge);
      } catch {}
    },
  };
  try {
    ip("link", "add", bridge, "type", "bridge");
    ip("addr", "add", `${subnet}.1/24`, "dev", bridge);
    ip("link", "set", bridge, "up");
    let i = 0;
    for (const [host, octet] of Object.entries(addresses)) {
      const ns = `troupe-${tag}-${host}`;
      const outside = `tv${tag}${i}`;
      const inside = `tw${tag}${i}`;
      i++;
      ip("netns", "add", ns);
      namespaces.set(host, ns);
      ip("link", "add", outside, "type", "veth", "peer", "name", inside);
      ip("link", "set", outside, "master", bridge);
      ip("link", "set", outside, "up");
      ip("link", "set", inside, "netns", ns);
      ip("-n", ns, "addr", "add", `${subnet}.${octet}/24`, "dev", inside);
      ip("-n", ns, "link", "set", inside, "up");
      ip("-n", ns, "link", "set", "lo", "up");
      links.set(host, outside);
      hosts.address[host] = `${subnet}.${octet}`;
    }
  } catch (error) {
    hosts.remove();
    throw new Error(
      `could not make the hosts' namespaces: ${(error as { stderr?: Buffer }).stderr ?? error}`,
    );
  }
  return hosts;
}
