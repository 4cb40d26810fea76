import type { ChildProcess } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import { findNatsServer } from "../../src/bus/embedded-nats.js";
import { roleSeedFile } from "../../src/trust/role-credentials.js";
import { exited, runTroupe, tempTree } from "../support/cli.js";
import { makeHosts } from "../support/hosts.js";
import { waitFor } from "../support/wait.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/*
 * The cluster of docs/deploy.md on hosts of their own: three nats-server nodes, each in its network
 * namespace at the address deploy/nats/cluster.conf routes to, run from that very file with the
 * authorization block `troupe credentials --server-config` prints. A Troupe client on a fourth host
 * reaches the cluster through any node with its role's seed, and one without credentials is refused.
 */
it("the cluster of docs/deploy.md forms across hosts from deploy/nats/cluster.conf, and lets in only Troupe's roles", async () => {
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultModel: scripted\nnats:\n  embedded: false\n",
    "config/agents/a.yaml": "name: a\ndescription: A.\n",
  });
  cleanups.push(dispose);
  const hosts = makeHosts({ "nats-1": 11, "nats-2": 12, "nats-3": 13, observer: 24 });
  cleanups.push(() => hosts.remove());
  const data = join(dir, ".data");
  const env = { ...process.env, TROUPE_DATA_DIR: data };
  const auth = await runTroupe(["--config", join(dir, "config"), "credentials", "--server-config"], {
    cwd: dir,
    env,
  });
  expect(auth.code, auth.stderr).toBe(0);

  const nodes: ChildProcess[] = [];
  for (const node of ["nats-1", "nats-2", "nats-3"]) {
    const confDir = join(dir, node);
    mkdirSync(join(confDir, "store"), { recursive: true });
    copyFileSync(join(ROOT, "deploy/nats/cluster.conf"), join(confDir, "cluster.conf"));
    writeFileSync(join(confDir, "auth.conf"), auth.stdout);
    const server = hosts.spawn(
      node,
      findNatsServer() ?? "nats-server",
      ["-c", join(confDir, "cluster.conf")],
      {
        env: { ...process.env, NATS_NODE: node, NATS_STORE: join(confDir, "store") },
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    let log = "";
    server.stderr?.on("data", (chunk) => (log += chunk));
    cleanups.push(async () => {
      server.kill("SIGKILL");
      await exited(server);
    });
    nodes.push(server);
    cleanups.push(() => {
      if (server.exitCode !== null) throw new Error(`${node} exited: ${log.slice(-2000)}`);
    });
  }

  const urls = ["11", "12", "13"].map((octet) => `nats://10.88.0.${octet}:4222`);
  const probe = (script: string, extra: Record<string, string> = {}) =>
    new Promise<{ code: number | null; out: string }>((done) => {
      const child = hosts.spawn("observer", process.execPath, ["--input-type=module", "-e", script], {
        env: { ...process.env, ...extra },
        stdio: ["ignore", "pipe", "pipe"],
        cwd: ROOT,
      });
      let out = "";
      child.stdout?.on("data", (chunk) => (out += chunk));
      child.stderr?.on("data", (chunk) => (out += chunk));
      child.once("exit", (code) => done({ code, out }));
    });
  // From the observer's host, with the observer's seed: JetStream answers through each node once the
  // three have elected a meta leader.
  const seed = readFileSync(roleSeedFile(data, "observer"), "utf8").trim();
  const askJetStream = (url: string) => `
    import { connect, nkeyAuthenticator } from "@nats-io/transport-node";
    import { jetstreamManager } from "@nats-io/jetstream";
    const nc = await connect({ servers: ${JSON.stringify(url)}, authenticator: nkeyAuthenticator(new TextEncoder().encode(process.env.SEED)), inboxPrefix: "_INBOX_troupe.observer", timeout: 2000 });
    const info = nc.info;
    await (await jetstreamManager(nc, { timeout: 2000 })).getAccountInfo().then(() => console.log("js ok"), (e) => console.log("js " + e.message));
    console.log("on " + info.server_name + " of " + info.cluster);
    await nc.close();`;
  for (const [i, url] of urls.entries()) {
    await waitFor(
      `JetStream through nats-${i + 1}`,
      async () => (await probe(askJetStream(url), { SEED: seed })).out.includes("js ok"),
      30_000,
    );
    expect((await probe(askJetStream(url), { SEED: seed })).out).toContain(`on nats-${i + 1} of troupe`);
  }
  const anonymous = await probe(`
    import { connect } from "@nats-io/transport-node";
    try { await connect({ servers: ${JSON.stringify(urls[0])}, timeout: 2000 }); console.log("let in"); }
    catch (e) { console.log("refused: " + e.message); }`);
  expect(anonymous.out).toMatch(/^refused: .*(Authorization|authentication)/im);
  for (const node of nodes) expect(node.exitCode).toBeNull();
}, 120_000);
