import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, closeSync, constants, mkdirSync, openSync, readFileSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import { delimiter, isAbsolute, join } from "node:path";
import { BusError } from "./bus.js";

/** Debian and others install the server under sbin, which is not always on a user's PATH. */
const EXTRA_DIRS = ["/usr/sbin", "/usr/local/sbin", "/usr/local/bin", "/opt/homebrew/bin"];

export const NATS_INSTALL_HINT =
  "install nats-server (Debian/Ubuntu: apt-get install nats-server; macOS: brew install nats-server) or set NATS_URL";

/** The `nats-server` executable from PATH (or the usual sbin dirs), or undefined. */
export function findNatsServer(env: NodeJS.ProcessEnv = process.env): string | undefined {
  // Absolute directories only: a relative one is looked up from where Troupe runs (a repository).
  const dirs = [...(env.PATH ?? "").split(delimiter).filter((dir) => isAbsolute(dir)), ...EXTRA_DIRS];
  for (const dir of dirs) {
    const candidate = join(dir, "nats-server");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {}
  }
  return undefined;
}

export interface NatsServerOptions {
  /** JetStream's store. */
  storeDir: string;
  /** Default: a free port on 127.0.0.1. */
  port?: number;
  /** Extra arguments, e.g. `["-c", "auth.conf"]`. */
  args?: string[];
  /** How long to wait for the server to accept connections. Default 10000. */
  readyTimeoutMs?: number;
  binary?: string;
  /**
   * Its own process group, its log in this file: a Ctrl-C at the terminal reaches only its owner,
   * which stops it after draining, and it outlives an owner that is killed (a broken log pipe would
   * end it), for the next owner to adopt.
   */
  detached?: { logFile: string };
}

/** A nats-server child process on loopback. */
export class NatsServerProcess {
  #child: ChildProcess;
  #exited: Promise<void>;

  private constructor(
    child: ChildProcess,
    readonly port: number,
    private readonly options: NatsServerOptions & { binary: string },
  ) {
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once("exit", () => resolve()));
  }

  static async start(options: NatsServerOptions): Promise<NatsServerProcess> {
    const binary = options.binary ?? findNatsServer();
    if (!binary) throw new BusError(`nats-server not found: ${NATS_INSTALL_HINT}`);
    const port = options.port ?? (await freePort());
    mkdirSync(options.storeDir, { recursive: true });
    const args = [
      "-a",
      "127.0.0.1",
      "-p",
      String(port),
      "-js",
      "-sd",
      options.storeDir,
      ...(options.args ?? []),
    ];
    const logFd = options.detached ? openSync(options.detached.logFile, "a", 0o600) : undefined;
    const child = spawn(binary, args, {
      stdio: ["ignore", "ignore", logFd ?? "pipe"],
      detached: options.detached !== undefined,
    });
    if (logFd !== undefined) closeSync(logFd);
    const server = new NatsServerProcess(child, port, { ...options, binary });
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      if (stderr.length < 8192) stderr += chunk.toString();
    });
    try {
      // A server with a large store (or many consumers) takes a while to read it back.
      await server.#waitReady(options.readyTimeoutMs ?? 60_000);
    } catch (error) {
      await server.kill();
      if (options.detached) stderr = readFileSync(options.detached.logFile, "utf8").slice(-8192);
      const detail = stderr.trim().split("\n").slice(-3).join(" | ");
      throw new BusError(`nats-server did not start on port ${port}: ${detail || (error as Error).message}`);
    }
    return server;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  get running(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** A graceful stop (SIGTERM), then SIGKILL if it lingers. */
  async stop(graceMs = 5000): Promise<void> {
    if (!this.running) return;
    this.#child.kill("SIGTERM");
    const timer = setTimeout(() => this.#child.kill("SIGKILL"), graceMs);
    await this.#exited;
    clearTimeout(timer);
  }

  /** Ends the process at once, as a crash would. */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    if (!this.running) return;
    this.#child.kill(signal);
    await this.#exited;
  }

  /** A new process on the same port and store, as after a crash and restart. */
  restart(): Promise<NatsServerProcess> {
    return NatsServerProcess.start({ ...this.options, port: this.port });
  }

  async #waitReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (!this.running) throw new Error("exited");
      if (await answersNats("127.0.0.1", this.port, 500)) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error("timed out");
  }
}

/** Whether something at host:port greets like a NATS server (`INFO {...}`). */
export function answersNats(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("error", () => done(false));
    socket.once("data", (chunk) => done(chunk.toString().startsWith("INFO")));
    // A listener that takes the connection and closes it at once says nothing, and is no server.
    socket.once("close", () => done(false));
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}
