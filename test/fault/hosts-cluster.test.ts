import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import { roleSeedFile } from "../../src/trust/role-credentials.js";
import { runTroupe, tempTree } from "../support/cli.js";
import { makeHosts } from "../support/hosts.js";
import { NODE_HOSTS, NODE_NAMES, startHostedNodes } from "../support/hosts-nats.js";
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
  const hosts = makeHosts({ ...NODE_HOSTS, observer: 24 });
  cleanups.push(() => hosts.remove());
  const data = join(dir, ".data");
  const env = { ...process.env, TROUPE_DATA_DIR: data };
  const auth = await runTroupe(["--config", join(dir, "config"), "credentials", "--server-config"], {
    cwd: dir,
    env,
  });
  expect(auth.code, auth.stderr).toBe(0);

  const nodes = startHostedNodes(hosts, dir, auth.stdout);
  cleanups.push(() => nodes.stop());

  const urls = NODE_NAMES.map((node) => nodes.url[node]);
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
  // three have elected a meta leader (the people's account reaches the hosts' streams' info under
  // their API prefix: no stream yet is an answer too).
  const seed = readFileSync(roleSeedFile(data, "observer"), "utf8").trim();
  const askJetStream = (url: string) => `
    import { connect, nkeyAuthenticator } from "@nats-io/transport-node";
    import { jetstreamManager } from "@nats-io/jetstream";
    const nc = await connect({ servers: ${JSON.stringify(url)}, authenticator: nkeyAuthenticator(new TextEncoder().encode(process.env.SEED)), inboxPrefix: "_INBOX_troupe.observer", timeout: 2000 });
    const info = nc.info;
    const jsm = await jetstreamManager(nc, { timeout: 2000, checkAPI: false, apiPrefix: "$JS.troupe_hosts.API" });
    await jsm.streams.info("TROUPE_EVENTS").then(() => console.log("js ok"), (e) => console.log(/stream not found/.test(e.message) ? "js ok" : "js " + e.message));
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
}, 120_000);
