import { existsSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { BusApprover } from "../approvals/bus-approver.js";
import { answersNats, findNatsServer, NATS_INSTALL_HINT, NatsServerProcess } from "../bus/embedded-nats.js";
import { NatsBus } from "../bus/nats-bus.js";
import { acceptsAnonymous, answersAnonymously } from "../bus/nats-connect.js";
import { accountNames, accountsBlock } from "../bus/permissions.js";
import { natsOptionsFromConfig } from "../compose/nats-options.js";
import { openRuntime } from "../compose/runtime.js";
import { processTelemetry } from "../compose/telemetry.js";
import { type ConfigChoice, loadConfig } from "../config/load.js";
import { dataDir } from "../config/paths.js";
import { type ListedRule, permissionsInEffect } from "../config/permissions-listed.js";
import { Daemon } from "../daemon/daemon.js";
import { holdDataDir } from "../daemon/data-dir-lock.js";
import { RecordCopies } from "../daemon/record-copies.js";
import { UserError } from "../errors.js";
import type { Logger } from "../log.js";
import { ApproverTrust, localIdentity } from "../trust/approvers.js";
import { RecordSeal } from "../trust/record-seal.js";
import { ensureRoleCredentials } from "../trust/role-credentials.js";
import { ensureServerTls, serverTlsBlock } from "../trust/server-tls.js";
import { privateDir, writePrivateFile } from "../util/secret-files.js";
import { ConsoleListenError } from "../web/console-server.js";
import { consoleAssets, parseListen, WebConsole } from "../web/web-console.js";
import { webLoginFile } from "../web/web-login.js";
import { stopSignal } from "./stop-signal.js";

export class NoNatsError extends UserError {
  override name = "NoNatsError";
}

/**
 * `troupe daemon`: connects to NATS (starting a nats-server child, with one user per role, when
 * nothing answers and one is installed), serves the API and hosts runs until SIGINT or SIGTERM,
 * then drains in order.
 */
export async function runDaemon(where: ConfigChoice, log: Logger, web?: string | true): Promise<number> {
  const stopped = stopSignal();
  const config = loadConfig(where);
  const { nats } = config.troupe;
  const data = dataDir(config.troupe.dataDir);
  const listen = web ?? config.troupe.web?.listen;
  // A --web that is not HOST:PORT is refused before anything starts.
  const webAddress = listen === undefined ? undefined : listen === true ? {} : parseListen(listen);
  const held = holdDataDir(data);
  process.once("exit", () => held.release());
  const embedded = await embeddedServer(nats.url, nats.embedded, nats.prefix, data, log);
  if (!embedded) await refuseSquatter(nats.url, config.natsUrlChosen === true);
  const connection = natsOptionsFromConfig(nats, config.dir, process.env, {
    dataDir: data,
    roles: ["daemon"],
  });
  const storage = { stream: nats.stream, kv: nats.kv };
  // The daemon alone makes and changes the stream and the buckets (the other roles may not).
  const bus = await NatsBus.connect({ ...connection, name: "troupe-daemon", log, storage });
  const trust = new ApproverTrust(config.troupe.approvers, data);
  // Approvals are records on the bus: any terminal may answer them, with a signed answer.
  const approver = new BusApprover(bus, config.troupe.approval.timeoutMs, trust, log);
  // What the daemon writes that a worker's seed could write over carries this, and is checked.
  const seal = RecordSeal.forDataDir(data);
  const telemetry = await processTelemetry(config, "daemon", log);
  const runtime = await openRuntime({ config, bus, log, approver, seal, telemetry });
  const { workspaces } = config.troupe.daemon;
  const daemon = new Daemon(runtime, log, {
    maxApproval: config.troupe.daemon.maxApproval,
    keepFinishedMs: config.troupe.daemon.keepFinished,
    ...(nats.kv?.ttl ? { keepRecordsMs: nats.kv.ttl } : {}),
    seal,
    // Its own copy of each run record, which no reply aimed at the bucket can write over.
    copies: new RecordCopies(join(data, "run-records", nats.prefix)),
    // A run's own workspace (troupe run -w DIR) gets a runtime of its own, with its sandbox scope,
    // while it has runs.
    runtimeFor: (workspace) => openRuntime({ config, bus, log, approver, workspace, seal, telemetry }),
    maxWorkspaces: config.troupe.daemon.maxWorkspaces,
    ...(workspaces.length ? { workspaces: workspaces.map((root) => resolve(config.dir, root)) } : {}),
  });
  // The console's port is had before any run is resumed or anyone is told ready: a port another
  // process holds leaves the daemon without a console (said in one line), hosting its runs.
  const webPort = await listenWeb(webAddress, data, log);
  await daemon.start();
  process.stderr.write(
    `troupe daemon ready on ${nats.url} (prefix ${nats.prefix}${embedded ? `, nats-server pid ${embedded.pid}${embedded.adopted ? " adopted" : ""}` : ""})\n`,
  );
  const webConsole = await serveWeb(webPort, {
    daemon,
    bus,
    data,
    permissions: permissionsInEffect(config),
    // The page's answers go as a person's do, as the approver: the daemon may not write answers.
    approverBus: () =>
      NatsBus.connect({
        ...natsOptionsFromConfig(nats, config.dir, process.env, { dataDir: data, roles: ["approver"] }),
        name: "troupe-web-console",
        log,
      }),
  });
  if (await answersAnonymously(nats.url, bus.subjects.api("runs.start")))
    process.stderr.write(
      `troupe: warning: bus: open to anyone who reaches ${nats.url} (no credentials needed to start runs); see docs/nats-permissions.md\n`,
    );
  await stopped;
  log.info("stopping: no new runs, then drain");
  await webConsole?.close();
  await daemon.stop();
  await daemon.close();
  await runtime.close();
  await telemetry?.shutdown();
  await bus.close();
  await embedded?.stop();
  held.release();
  process.stderr.write("troupe daemon stopped\n");
  return 0;
}

/**
 * The web console's port, when one is asked for (`--web`, or `web:` in troupe.yaml), listened on
 * before the daemon resumes a run. Another process may hold it (any local user can take a fixed port
 * while the daemon is down): then the daemon says so in one line and hosts its runs without a console.
 */
async function listenWeb(
  address: { host?: string; port?: number } | undefined,
  data: string,
  log: Logger,
): Promise<WebConsole | undefined> {
  // A login a killed daemon left names a console that is gone, on a port another process may hold now.
  rmSync(webLoginFile(data), { force: true });
  if (address === undefined) return undefined;
  try {
    return await WebConsole.listen(address, log);
  } catch (error) {
    if (!(error instanceof ConsoleListenError)) throw error;
    process.stderr.write(
      `troupe: warning: web console: not served: ${error.message}; the daemon hosts runs without it; restart it once that address is free, or set web.listen (or --web) to another\n`,
    );
    return undefined;
  }
}

/**
 * Serves the console once the daemon is ready, and says where in the ready output: a login URL,
 * good once, on a terminal; else the file in the data dir that holds one, where `troupe web` finds
 * it (0600, remade after each use). No login exists before.
 */
async function serveWeb(
  web: WebConsole | undefined,
  parts: {
    daemon: Daemon;
    bus: NatsBus;
    data: string;
    permissions: ListedRule[];
    approverBus: () => Promise<NatsBus>;
  },
): Promise<{ close(): Promise<void> } | undefined> {
  if (!web) return undefined;
  const assets = consoleAssets();
  const approverBus = await parts.approverBus();
  web.serve({
    daemon: parts.daemon,
    bus: parts.bus,
    answerBus: approverBus,
    identity: localIdentity(parts.data),
    assets,
    permissions: parts.permissions,
  });
  const loginFile = webLoginFile(parts.data);
  const keepLogin = () => writePrivateFile(loginFile, `${web.loginUrl()}\n`);
  web.auth.onLogin = keepLogin;
  keepLogin();
  // A login is good until used: it goes to a person's terminal, never to a log or the journal
  // (a service's stderr); there only the file that holds one is named.
  if (process.stderr.isTTY) process.stderr.write(`troupe web console: ${web.loginUrl()}\n`);
  else
    process.stderr.write(
      `troupe web console: ${web.origin} (a login URL, good once, is in ${loginFile}; troupe web prints it)\n`,
    );
  if (!isLoopback(new URL(web.origin).hostname))
    process.stderr.write(
      `troupe: warning: web console: served over plain HTTP on ${web.origin}: logins and sessions cross the network in the clear; listen on 127.0.0.1 and reach it through an SSH tunnel or a TLS proxy\n`,
    );
  return {
    close: async () => {
      rmSync(loginFile, { force: true });
      await web.close();
      await approverBus.close();
    },
  };
}

/**
 * The default URL is where this daemon starts its own server; an open server already there is not
 * that one. Another local user can start it first, and everything on it (runs, approvals, events)
 * would be theirs to read and write. Refused unless the URL was chosen (troupe.yaml or NATS_URL):
 * a server you name is yours to vouch for (the daemon then warns that it is open).
 */
export async function refuseSquatter(url: string, chosen: boolean): Promise<void> {
  if (chosen || !(await acceptsAnonymous(url))) return;
  throw new NoNatsError(
    `a nats-server that asks no credentials already answers at ${url}, where this daemon would start its own: stop it, or set nats.url in troupe.yaml (or NATS_URL) to use it on purpose`,
  );
}

/** The nats-server this daemon owns: started by it, or adopted from a daemon that was killed. */
interface OwnedServer {
  pid: number | undefined;
  adopted: boolean;
  stop(): Promise<void>;
}

/**
 * Starts nats-server when nothing answers at a loopback URL and embedding is on. It refuses
 * anonymous connections: one nkey user per role, the seeds in `<dataDir>/credentials`. One server per
 * data dir, named in `<dataDir>/nats/server.json`: a daemon that finds the server an earlier one
 * started (it was killed, the server lived on) adopts it, and stops it when it stops.
 */
async function embeddedServer(
  url: string,
  enabled: boolean,
  prefix: string,
  data: string,
  log: Logger,
): Promise<OwnedServer | undefined> {
  const target = new URL(
    url
      .split(",")[0]
      ?.trim()
      .replace(/^nats:/, "http:") ?? "http://127.0.0.1:4222",
  );
  const port = Number(target.port || 4222);
  const dir = privateDir(join(data, "nats"));
  const conf = join(dir, "auth.conf");
  const record = join(dir, "server.json");
  if (await answersNats(target.hostname, port)) {
    const earlier = ourServer(record, conf, port);
    if (earlier === undefined) return undefined;
    log.info({ pid: earlier, port }, "adopted the nats-server an earlier daemon of this data dir started");
    return { pid: earlier, adopted: true, stop: () => stopPid(earlier, record) };
  }
  const loopback = ["127.0.0.1", "localhost", "::1"].includes(target.hostname);
  if (!enabled || !loopback)
    throw new NoNatsError(
      `nothing answers at ${url}: start NATS there, or point nats.url (or NATS_URL) at one`,
    );
  if (!findNatsServer())
    throw new NoNatsError(`nothing answers at ${url} and nats-server is not installed: ${NATS_INSTALL_HINT}`);
  const keys = ensureRoleCredentials(data);
  writePrivateFile(
    conf,
    accountsBlock(
      Object.entries(keys).map(([role, nkey]) => ({ role: role as keyof typeof keys, nkey })),
      prefix,
    ) + serverTlsBlock(ensureServerTls(data)),
  );
  moveStoreIntoAccount(dir, accountNames(prefix).hosts, log);
  dropPeoplesCopies(dir, accountNames(prefix).users, log);
  // JetStream keeps its files under <dir>/jetstream, where earlier versions had them too.
  const server = await NatsServerProcess.start({
    storeDir: dir,
    port,
    args: ["-c", conf],
    detached: { logFile: join(dir, "server.log") },
  });
  writePrivateFile(record, JSON.stringify({ pid: server.pid, port }));
  log.info(
    { pid: server.pid, port, storeDir: dir },
    "started an embedded nats-server (one user per role, TLS on a certificate of its data dir's CA)",
  );
  return {
    pid: server.pid,
    adopted: false,
    stop: async () => {
      await server.stop();
      rmSync(record, { force: true });
    },
  };
}

/**
 * Streams an earlier Troupe kept in the server's one account (`$G`) go to the hosts' account, where
 * this config keeps them: JetStream stores each account's streams in a directory of its name, and
 * the server is not running yet.
 */
function moveStoreIntoAccount(dir: string, account: string, log: Logger): void {
  const from = join(dir, "jetstream", "$G");
  const to = join(dir, "jetstream", account);
  if (!existsSync(from) || existsSync(to)) return;
  renameSync(from, to);
  log.info({ from, to }, "moved the streams of the one-account server into the hosts' account");
}

/**
 * The people's account keeps no JetStream (permissions.ts): the read-only copies an earlier Troupe
 * kept there are removed, files and all, before the server starts.
 */
function dropPeoplesCopies(dir: string, account: string, log: Logger): void {
  const copies = join(dir, "jetstream", account);
  if (!existsSync(copies)) return;
  rmSync(copies, { recursive: true, force: true });
  log.info({ dir: copies }, "removed the people's copies an earlier Troupe kept");
}

/** The pid of the server `server.json` names, when it is alive, on that port, with this data dir's config. */
function ourServer(record: string, conf: string, port: number): number | undefined {
  try {
    const { pid, port: recorded } = JSON.parse(readFileSync(record, "utf8")) as { pid: number; port: number };
    if (recorded !== port || !Number.isInteger(pid)) return undefined;
    const command = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    return command.some((word) => word.endsWith("nats-server")) && command.includes(conf) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Stops an adopted server (not a child of this process): SIGTERM, then SIGKILL if it lingers. */
async function stopPid(pid: number, record: string, graceMs = 5000): Promise<void> {
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (alive()) process.kill(pid, "SIGTERM");
  const deadline = Date.now() + graceMs;
  while (alive() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  if (alive()) process.kill(pid, "SIGKILL");
  rmSync(record, { force: true });
}

/** 127.0.0.0/8, ::1 or localhost: a listener only this machine reaches. */
function isLoopback(host: string): boolean {
  return host === "localhost" || host === "[::1]" || host === "::1" || /^127\./.test(host);
}
