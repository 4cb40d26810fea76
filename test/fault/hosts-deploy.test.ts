import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import type { Heartbeat } from "../../src/actors/placement.js";
import type { ClusterInfo } from "../../src/bus/nats-bus.js";
import type { Role } from "../../src/config/roles.js";
import {
  type ChatRequest,
  ScriptedModelServer,
  type ScriptRule,
} from "../../src/testing/scripted-model-server.js";
import { roleSeedFile } from "../../src/trust/role-credentials.js";
import { type RunningTroupe, runTroupe, spawnTroupe, tempTree } from "../support/cli.js";
import { type Hosts, makeHosts } from "../support/hosts.js";
import { type HostedNodes, NODE_HOSTS, type NodeName, startHostedNodes } from "../support/hosts-nats.js";
import { FIXTURE } from "../support/mcp-servers.js";
import { unitCommand } from "../support/systemd-unit.js";
import { waitFor } from "../support/wait.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/*
 * Troupe deployed as docs/deploy.md says, each process on a host of its own (a network namespace):
 * the three nodes of deploy/nats/cluster.conf with Troupe's stream and buckets at three replicas; the
 * daemon on its host, on node A (nats-1) first; two workers, on nodes B and C first; an observer on
 * node C first; the client submitting the run from the daemon's host. Each connects with its role's
 * seed. The run: a lead appends a line to effects.txt with a shell command, spawns two explorers at
 * once (they land on the workers), and appends another line when they are done; each explorer
 * appends three lines, one a turn, through the fixture MCP server's `append`, and answers. Every
 * model reply is slow, so a fault lands mid-turn.
 *
 * Each case makes the deployment afresh, does its fault, and checks what holds whatever the fault:
 * the run finishes, each line is in effects.txt once, the client exits 0, and the observer, which
 * stayed attached, saw every event of the run in order with no gap in any agent's seq.
 */

const HOSTS = { ...NODE_HOSTS, daemon: 21, "worker-1": 22, "worker-2": 23, observer: 24 };
type Host = keyof typeof HOSTS;
/** A host that runs troupe (not a node). */
type TroupeHost = Exclude<Host, NodeName>;

/** The node each Troupe host lists first: where it connects while that node is up. */
const FIRST_NODE: Record<TroupeHost, NodeName> = {
  daemon: "nats-1",
  "worker-1": "nats-2",
  "worker-2": "nats-3",
  observer: "nats-3",
};

/** What each host's processes connect as; the daemon's host runs the daemon and the client, with the data dir's seeds. */
const ROLE: Record<Exclude<TroupeHost, "daemon">, Role> = {
  "worker-1": "worker",
  "worker-2": "worker",
  observer: "observer",
};

const CHILDREN = ["one", "two"] as const;
const TURNS_WITH_APPEND = 3;
const EXPECTED_LINES = [
  "lead-1",
  ...CHILDREN.flatMap((child) =>
    Array.from({ length: TURNS_WITH_APPEND }, (_, i) => `child-${child}-${i + 1}`),
  ),
  "lead-2",
].sort();

interface Pace {
  /** How long each model reply takes. */
  replyMs: number;
  /** How long an explorer's append holds its answer, after the line is written. */
  holdMs: number;
}

interface Event {
  id: string;
  runId: string;
  agentId: string;
  parentId?: string;
  seq: number;
  ts: number;
  type: string;
  data: Record<string, unknown>;
}

interface Status {
  cluster: ClusterInfo;
  workers?: Array<{ id: string } & Heartbeat>;
}

interface Deployment {
  hosts: Hosts;
  nodes: HostedNodes;
  /** The workspace, shared by every host (they share the filesystem). */
  workspace: string;
  workers: Record<"worker-1" | "worker-2", RunningTroupe>;
  /** `troupe ARGS` on `host`, with that host's config; the deployment ends it. */
  troupe(host: TroupeHost, args: string[]): RunningTroupe;
  /** `troupe status --json` from `host`. */
  status(host: TroupeHost): Promise<Status>;
  /** The lines of effects.txt, sorted. */
  effects(): string[];
}

/** The model's part: the lead's turns, and each explorer's (told apart by its task). */
function script(effectsFile: string, pace: Pace): ScriptRule[] {
  const firstUser = (request: ChatRequest) =>
    String(request.messages.find((message) => message.role === "user")?.content ?? "");
  const lead = (turn: number, reply: ScriptRule["reply"]): ScriptRule => ({
    match: { system: '"lead"', turn },
    reply,
  });
  const shell = (line: string) => ({
    toolCalls: [{ name: "shell", arguments: { command: `echo ${line} >> effects.txt` } }],
    delayMs: pace.replyMs,
  });
  // An explorer taken over in the middle of a model call asks for the same turn again.
  const explorer = (child: string, turn: number, reply: ScriptRule["reply"]): ScriptRule => ({
    match: { system: '"explorer"', turn, where: (request) => firstUser(request).includes(`child ${child}`) },
    reply,
    times: 2,
  });
  return [
    lead(1, shell("lead-1")),
    lead(2, {
      toolCalls: CHILDREN.map((child) => ({
        name: "subagent_explorer",
        arguments: { task: `You are child ${child}.` },
      })),
      delayMs: pace.replyMs,
    }),
    ...CHILDREN.flatMap((child) => [
      ...Array.from({ length: TURNS_WITH_APPEND }, (_, i) =>
        explorer(child, i + 1, {
          toolCalls: [
            {
              name: "fixture__append",
              arguments: { path: effectsFile, line: `child-${child}-${i + 1}`, holdMs: pace.holdMs },
            },
          ],
          delayMs: pace.replyMs,
        }),
      ),
      explorer(child, TURNS_WITH_APPEND + 1, { text: `Child ${child} is done.`, delayMs: pace.replyMs }),
    ]),
    lead(3, shell("lead-2")),
    lead(4, { text: "All done.", delayMs: pace.replyMs }),
  ];
}

/** Makes the hosts, starts the cluster, the daemon and the workers, as docs/deploy.md says. */
async function deploy(pace: Pace): Promise<Deployment> {
  const { dir, dispose } = tempTree({
    "agents/lead.yaml": "name: lead\ndescription: Leads.\ntools: [shell]\nsubagents: [explorer]\n",
    "agents/explorer.yaml":
      "name: explorer\ndescription: Explores.\nreadOnly: true\ntools: [fixture__append]\n",
    "ws/README": "The workspace of the run.\n",
  });
  cleanups.push(dispose);
  const hosts = makeHosts(HOSTS);
  cleanups.push(() => hosts.remove());
  const workspace = join(dir, "ws");
  const effectsFile = join(workspace, "effects.txt");
  const model = await ScriptedModelServer.start(script(effectsFile, pace), { host: hosts.address.bridge });
  cleanups.push(() => model.close());

  const configOf = (host: TroupeHost) => join(dir, host, "config");
  const dataOf = (host: TroupeHost) => join(dir, host, "data");
  const nodeUrl = (node: NodeName) => `nats://${hosts.address[node]}:4222`;
  const urlsFrom = (first: NodeName) =>
    [first, ...(Object.keys(NODE_HOSTS) as NodeName[]).filter((node) => node !== first)].map(nodeUrl);
  const writeConfig = (host: TroupeHost, credentials: string[]) => {
    mkdirSync(configOf(host), { recursive: true });
    writeFileSync(
      join(configOf(host), "troupe.yaml"),
      [
        "defaultAgent: lead",
        "defaultModel: scripted",
        "agentsDir: ../../agents",
        "approval: { policy: auto-edit }",
        "nats:",
        `  url: ${urlsFrom(FIRST_NODE[host]).join(",")}`,
        "  embedded: false",
        "  stream: { replicas: 3 }",
        "  kv: { replicas: 3 }",
        ...credentials,
        "mcpServers:",
        "  fixture:",
        `    command: ${JSON.stringify(process.execPath)}`,
        `    args: [${JSON.stringify(FIXTURE)}]`,
        "    readOnly: true",
        "",
      ].join("\n"),
    );
  };
  const envOf = (host: TroupeHost): NodeJS.ProcessEnv => {
    // Without CI's NATS_URL: each host's troupe.yaml names the cluster.
    const { NATS_URL: _shared, ...env } = process.env;
    return {
      ...env,
      TROUPE_CONFIG: configOf(host),
      TROUPE_DATA_DIR: dataOf(host),
      OPENAI_BASE_URL: model.baseURL,
      OPENAI_API_KEY: "",
    };
  };
  const troupe = (host: TroupeHost, args: string[], cwd = workspace) => {
    const running = spawnTroupe(args, {
      cwd,
      env: envOf(host),
      launch: (command, commandArgs, options) => hosts.spawn(host, command, commandArgs, options),
    });
    cleanups.push(() => void running.child.kill("SIGKILL"));
    return running;
  };
  // What a unit of deploy/systemd starts there, its paths moved into the test's (the host's config
  // and data dirs are already the environment's).
  const service = (host: TroupeHost, unit: "troupe-daemon" | "troupe-worker") => {
    const started = unitCommand(join(ROOT, "deploy/systemd", `${unit}.service`), {
      "/etc/troupe": configOf(host),
      "/var/lib/troupe": dataOf(host),
      "/srv/troupe/workspace": workspace,
    });
    expect(started.env).toEqual({ TROUPE_CONFIG: configOf(host), TROUPE_DATA_DIR: dataOf(host) });
    return troupe(host, started.args, started.cwd);
  };

  // On the daemon's host: its config, the roles' seeds, and the nodes' authorization block from them.
  writeConfig("daemon", []);
  const auth = await runTroupe(["--config", configOf("daemon"), "credentials", "--server-config"], {
    cwd: workspace,
    env: envOf("daemon"),
  });
  expect(auth.code, auth.stderr).toBe(0);
  for (const [host, role] of Object.entries(ROLE) as Array<[keyof typeof ROLE, Role]>) {
    mkdirSync(configOf(host), { recursive: true });
    writeFileSync(join(configOf(host), `${role}.nk`), readFileSync(roleSeedFile(dataOf("daemon"), role)), {
      mode: 0o600,
    });
    writeConfig(host, [`  nkeySeedFile: ${role}.nk`, `  role: ${role}`]);
  }

  const nodes = startHostedNodes(hosts, join(dir, "nodes"), auth.stdout);
  cleanups.push(() => nodes.stop());
  // The daemon makes R3 streams: started before the three nodes have formed, it would exit (and
  // systemd start it again: the unit says Restart=always).
  await nodes.formed(readFileSync(roleSeedFile(dataOf("daemon"), "daemon"), "utf8").trim());
  const daemon = service("daemon", "troupe-daemon");
  await waitFor("the daemon", () => daemon.stderr().includes("troupe daemon ready"), 60_000).catch(
    (error) => {
      throw new Error(`${error.message}: ${daemon.stderr().slice(-2000)}`);
    },
  );
  const workers = {
    "worker-1": service("worker-1", "troupe-worker"),
    "worker-2": service("worker-2", "troupe-worker"),
  };
  const status = async (host: TroupeHost) => {
    const shown = troupe(host, ["status", "--json"]);
    const code = await shown.exit;
    if (code !== 0) throw new Error(`troupe status on ${host} exited ${code}: ${shown.stderr()}`);
    return JSON.parse(shown.stdout()) as Status;
  };
  await waitFor("two workers", async () => (await status("daemon")).workers?.length === 2, 30_000);
  // The daemon's host and the observer's on the node each lists first, as troupe status there says
  // (a worker's credentials may not ask the daemon's API).
  expect((await status("daemon")).cluster.server).toBe(FIRST_NODE.daemon);
  expect((await status("observer")).cluster.server).toBe(FIRST_NODE.observer);
  return {
    hosts,
    nodes,
    workspace,
    workers,
    troupe,
    status,
    effects: () =>
      existsSync(effectsFile) ? readFileSync(effectsFile, "utf8").trim().split("\n").sort() : [],
  };
}

const events = (output: string) =>
  output
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Event);

/** A run started from the daemon's host, followed by an observer on its own host from its first event. */
async function startRun(deployment: Deployment) {
  const client = deployment.troupe("daemon", ["run", "--json", "Have the explorers append their lines."]);
  await waitFor("the run's first event", () => client.stdout().includes("\n"), 30_000);
  const runId = events(client.stdout())[0]?.runId ?? "";
  const observer = deployment.troupe("observer", ["observe", runId, "--json"]);
  return { client, observer, runId };
}

/** What holds whatever the fault: the run done, each line once, every event seen in order by both. */
async function expectRunWhole(deployment: Deployment, run: Awaited<ReturnType<typeof startRun>>) {
  expect(await run.client.exit, run.client.stderr()).toBe(0);
  expect(await run.observer.exit, run.observer.stderr()).toBe(0);
  const seen = events(run.observer.stdout());
  const lead = seen.filter((event) => event.parentId === undefined);
  expect(lead.at(-1)).toMatchObject({ type: "agent.stopped", data: { reason: "done", result: "All done." } });
  for (const agentId of new Set(seen.map((event) => event.agentId))) {
    const own = seen.filter((event) => event.agentId === agentId);
    expect(own.map((event) => event.seq)).toEqual(own.map((_, i) => i));
  }
  // The client saw the same events (its order across agents may differ: it reads a subscription
  // first, and agents append at once).
  const ids = (list: Event[]) => list.map((event) => event.id).sort();
  expect(ids(seen)).toEqual(ids(events(run.client.stdout())));
  expect(deployment.effects()).toEqual(EXPECTED_LINES);
  return seen;
}

it("kill -9 of node A, the daemon's node, mid-run: the daemon goes on through B or C, and the run finishes whole", async () => {
  const deployment = await deploy({ replyMs: 600, holdMs: 200 });
  const run = await startRun(deployment);
  await waitFor(
    "an explorer's first line",
    () => deployment.effects().some((line) => /^child-.*-1$/.test(line)),
    30_000,
  );
  await deployment.nodes.kill("nats-1");
  await expectRunWhole(deployment, run);
  // The stream led from B or C, its lost replica behind. Asked until the daemon answers: its list is
  // a sweep of the runs bucket, whose consumer may still be placed anew this soon after the loss.
  let shown: Status | undefined;
  await waitFor(
    "troupe status on the observer's host",
    async () => {
      shown = await deployment.status("observer").catch(async () => {
        await new Promise((resolve) => setTimeout(resolve, 500));
        return undefined;
      });
      return shown !== undefined;
    },
    45_000,
  );
  const stream = shown?.cluster.stream;
  expect(stream?.leader).toMatch(/^nats-[23]$/);
  expect(stream?.followers).toContainEqual(expect.objectContaining({ name: "nats-1", current: false }));
}, 150_000);

it("kill -9 of a worker whose explorer is in the middle of a call: the other worker takes the explorer over, and the call is reported as of unknown outcome, not run again", async () => {
  const deployment = await deploy({ replyMs: 300, holdMs: 3000 });
  const run = await startRun(deployment);
  // Both explorers have written their second line; their appends hold their answers back.
  await waitFor(
    "the explorers' second lines",
    () => deployment.effects().filter((line) => line.endsWith("-2")).length === CHILDREN.length,
    30_000,
  );
  const workers = (await deployment.status("daemon")).workers ?? [];
  const host = workers.find((worker) => (worker.agents ?? []).length > 0);
  const victim = Object.values(deployment.workers).find((worker) => worker.child.pid === host?.pid);
  expect(victim, JSON.stringify(workers)).toBeDefined();
  victim?.child.kill("SIGKILL");

  const seen = await expectRunWhole(deployment, run);
  const taken = (host?.agents ?? []).map((key) => key.slice(run.runId.length + 1));
  for (const childId of taken) {
    const own = seen.filter((event) => event.agentId === childId);
    const started = own.filter((event) => event.type === "tool.started");
    const unknown = own.filter(
      (event) => event.type === "tool.finished" && String(event.data.error).includes("outcome is unknown"),
    );
    expect(started.map((event) => event.data.name)).toEqual(Array(TURNS_WITH_APPEND).fill("fixture__append"));
    expect(unknown).toHaveLength(1);
    expect(started.filter((event) => event.data.callId === unknown[0]?.data.callId)).toHaveLength(1);
    expect(own.filter((event) => event.type === "agent.started")).toHaveLength(1);
    expect(own.at(-1)).toMatchObject({ type: "agent.stopped", data: { reason: "done" } });
  }
}, 120_000);

it("a worker's host cut off past dead-after while its explorer waits on the model: the other worker takes the explorer over, and the cut-off one, back, lets it go at its first write", async () => {
  const deployment = await deploy({ replyMs: 2500, holdMs: 200 });
  const run = await startRun(deployment);
  // An explorer's first call is done: it is between calls, asking the model for its next.
  let childId = "";
  await waitFor(
    "an explorer's first call to finish",
    () => {
      const finished = events(run.observer.stdout()).find(
        (event) => event.type === "tool.finished" && event.data.name === "fixture__append",
      );
      childId = finished?.agentId ?? "";
      return finished !== undefined;
    },
    60_000,
  );
  const workers = (await deployment.status("daemon")).workers ?? [];
  const host = workers.find((worker) => worker.agents?.includes(`${run.runId}.${childId}`));
  const [name, cutOff] =
    Object.entries(deployment.workers).find(([, worker]) => worker.child.pid === host?.pid) ?? [];
  expect(cutOff, JSON.stringify(workers)).toBeDefined();
  // Cut for longer than the units' dead-after (5 s), then mended.
  deployment.hosts.link(name as string, "down");
  await new Promise((resolve) => setTimeout(resolve, 9000));
  deployment.hosts.link(name as string, "up");

  const seen = await expectRunWhole(deployment, run);
  const own = seen.filter((event) => event.agentId === childId);
  expect(own.filter((event) => event.type === "agent.started")).toHaveLength(1);
  expect(own.filter((event) => event.type === "agent.resumed")).toHaveLength(1);
  expect(own.at(-1)).toMatchObject({ type: "agent.stopped", data: { reason: "done" } });
  // The cut-off worker, back, let the explorer go rather than go on with its stale copy.
  await waitFor(
    "the cut-off worker to let its explorer go",
    () => cutOff?.stderr().includes("another host took this agent over") === true,
    30_000,
  ).catch((error) => {
    throw new Error(`${error.message}: ${cutOff?.stderr().slice(-2000)}`);
  });
  expect(deployment.effects()).toEqual(EXPECTED_LINES);
}, 150_000);

it("the observer's node lost with its disk mid-run comes back empty and catches up; the observer goes on through another, and nothing acknowledged is lost", async () => {
  const deployment = await deploy({ replyMs: 600, holdMs: 200 });
  const run = await startRun(deployment);
  await waitFor(
    "the explorers' first lines",
    () => deployment.effects().some((line) => /^child-.*-1$/.test(line)),
    30_000,
  );
  await deployment.nodes.kill("nats-3");
  deployment.nodes.start("nats-3", { emptyStore: true });
  const seen = await expectRunWhole(deployment, run);

  // The node is a current replica of the stream again, as troupe status says (asked again when it
  // times out: the daemon's API waits for buckets whose leader was lost, docs/deploy.md).
  await waitFor(
    "nats-3 to catch up",
    async () => {
      const stream = (await deployment.status("daemon").catch(() => undefined))?.cluster.stream;
      return (
        stream?.replicas === 3 &&
        [stream.leader, ...stream.followers.map((peer) => peer.name)].sort().join() ===
          "nats-1,nats-2,nats-3" &&
        stream.followers.every((peer) => peer.current && !peer.lag)
      );
    },
    60_000,
  );
  // And the run, read again from its start through that node, is all there.
  const late = deployment.troupe("observer", ["observe", run.runId, "--json"]);
  expect(await late.exit, late.stderr()).toBe(0);
  expect(events(late.stdout()).map((event) => event.id)).toEqual(seen.map((event) => event.id));
}, 120_000);
