import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { McpServerConfig } from "../../config/mcp-server-schema.js";
import { UserError } from "../../errors.js";
import type { Logger } from "../../log.js";
import type { ToolRegistry } from "../tool.js";
import { clientFactory } from "./mcp-client.js";
import { type LaunchScope, McpLaunchRefusedError } from "./mcp-launch.js";
import type { McpCallResult } from "./mcp-result.js";
import { McpServerRequests } from "./mcp-server-requests.js";
import {
  type McpCaller,
  type McpCallOptions,
  type McpToolInfo,
  mcpTool,
  mcpToolName,
  mcpToolUnusable,
} from "./mcp-tool.js";
import {
  type Confine,
  failureReason,
  loadSdk,
  McpServerDownError,
  oneLine,
  openClient,
  StderrTail,
  type TransportKind,
} from "./mcp-transport.js";

/** The SDK's `ErrorCode.ConnectionClosed`: a call pending when its client closed. */
const MCP_CONNECTION_CLOSED = -32000;

export class McpToolCollisionError extends UserError {
  override name = "McpToolCollisionError";
}

export type ConnectionState = "connecting" | "ready" | "down" | "closed";

export interface ConnectionOptions {
  workspace: string;
  /** Where a stdio server starts, and what it may not come from. */
  launch: LaunchScope;
  log: Logger;
  /** First wait before restarting a crashed server; doubles up to `maxRestartDelayMs`. */
  restartDelayMs?: number;
  maxRestartDelayMs?: number;
  /** How long connecting (and listing the tools) may take. Default 20000. */
  startTimeoutMs?: number;
  confine?: Confine | undefined;
  /** Tools of this server that agents name (`x` of `server__x`): known before it ever lists them. */
  expectedTools?: readonly string[];
}

/**
 * One long-lived client of one MCP server: its tools in the registry as `server__tool`, refreshed on
 * `tools/list_changed`; restarted with backoff when it exits or does not start, its tools failing
 * meanwhile with why and when it is tried next; a new session when the server (over HTTP) no longer
 * knows the one it had.
 */
export class McpConnection implements McpCaller {
  state: ConnectionState = "connecting";
  #client: Client | undefined;
  #transport: Transport | undefined;
  #tools = new Set<string>();
  /** Tools it lists that Troupe cannot call, by name as agents would name them: why. */
  #unusable = new Map<string, string>();
  /** Whether the server has listed its tools once: until then, the tools agents name stand in. */
  #listed = false;
  #restartDelay: number;
  #restartTimer: NodeJS.Timeout | undefined;
  #nextAttemptAt = 0;
  /** Why it is not running, in a few words; undefined before it ever failed. */
  #reason: string | undefined;
  /** Why it is never started in this process: it would run what an agent may have written. */
  #refused: McpLaunchRefusedError | undefined;
  #renewing: Promise<void> | undefined;
  /** A connection being made again, after the server exited or could not be reached. */
  #attempting: Promise<void> | undefined;
  /** The transport that worked: a server that refused Streamable HTTP once is not asked over it again. */
  #kind: TransportKind | undefined;
  readonly #stderr = new StderrTail();
  /** The server's sampling requests and questions, answered for the calls of it that run. */
  readonly #requests: McpServerRequests;
  readonly #log: Logger;

  constructor(
    readonly server: string,
    readonly config: McpServerConfig,
    private readonly registry: ToolRegistry,
    private readonly options: ConnectionOptions,
  ) {
    this.#log = options.log.child({ component: "mcp", server });
    this.#requests = new McpServerRequests(server, config, this.#log);
    this.#restartDelay = options.restartDelayMs ?? 250;
  }

  get pid(): number | undefined {
    return (this.#transport as { pid?: number | null } | undefined)?.pid ?? undefined;
  }

  async start(): Promise<void> {
    try {
      await this.#connect(true);
    } catch (error) {
      if (error instanceof McpToolCollisionError) throw error;
      await this.#failed(error, "MCP server did not start");
      // Agents that name its tools still have them: their calls say why the server is not there.
      if (!this.#listed)
        this.#register(
          (this.options.expectedTools ?? []).map((name) => ({
            name,
            description: `${name} from the ${this.server} MCP server (not running when troupe started: a call says why)`,
            inputSchema: { type: "object" },
          })),
          false,
        );
    }
  }

  call(name: string, args: Record<string, unknown>, options: McpCallOptions): Promise<McpCallResult> {
    return this.#requests.during(options, () => this.#call(name, args, options));
  }

  async #call(name: string, args: Record<string, unknown>, options: McpCallOptions): Promise<McpCallResult> {
    if (this.#renewing) await this.#renewing.catch(() => {});
    await this.#reconnectNow();
    const client = this.#ready();
    const { onProgress } = options;
    const call = (on: Client) =>
      on.callTool({ name, arguments: args }, undefined, {
        timeout: this.config.timeoutMs,
        signal: options.signal,
        // Asks the server for progress (the SDK sends a progress token when this is set).
        onprogress: ({ progress, total, message }) => onProgress?.({ progress, total, message }),
        resetTimeoutOnProgress: true,
        maxTotalTimeout: this.config.maxTotalTimeoutMs,
      }) as Promise<McpCallResult>;
    try {
      return await call(client);
    } catch (error) {
      if (this.config.url && unreachable(error)) {
        await this.#dropped(client, error, "MCP server is not reachable");
        throw new McpServerDownError(this.#notRunning() ?? `${this.server} is not running`, { cause: error });
      }
      if (this.#client !== client && (error as { code?: unknown }).code === MCP_CONNECTION_CLOSED)
        throw new McpServerDownError(
          `${this.#notRunning() ?? `${this.server} is not running`} (the call was cut short: it may or may not have run)`,
          { cause: error },
        );
      if (!(await sessionLost(error))) throw error;
      // The server refused the call before running it: asking again in a new session runs it once.
      await this.#renewSession(client, error);
      return await call(this.#ready());
    }
  }

  /**
   * Why the server cannot take a call now (and when it is tried again), or cannot take one of this
   * tool at all; undefined when it can.
   */
  unavailable(tool?: string): string | undefined {
    const unusable = tool === undefined ? undefined : this.#unusable.get(tool);
    if (unusable) return `MCP tool "${tool}" is not offered: ${unusable}`;
    if (this.state === "ready" && this.#client) return undefined;
    // A tool of a server at a url that went away is tried again by the call itself: it may be back.
    const retried =
      this.config.url && this.state !== "closed" && !this.#refused && this.#reason !== undefined;
    if (retried && tool !== undefined && this.#tools.has(tool)) return undefined;
    return this.#notRunning();
  }

  /** Why it is not running, and when it is tried again. */
  #notRunning(): string | undefined {
    if (this.state === "ready" && this.#client) return undefined;
    const name = `MCP server "${this.server}"`;
    if (this.state === "closed") return `${name} is closed: troupe is stopping`;
    if (this.#refused) return this.#refused.message;
    if (this.#reason === undefined) return `${name} is starting`;
    if (this.state === "connecting") return `${name} is not running: ${this.#reason}; starting it now`;
    const seconds = Math.max(1, Math.ceil((this.#nextAttemptAt - Date.now()) / 1000));
    return `${name} is not running: ${this.#reason}; retrying in ${seconds} s`;
  }

  async close(): Promise<void> {
    this.state = "closed";
    clearTimeout(this.#restartTimer);
    await this.#client?.close().catch(() => {});
  }

  #ready(): Client {
    const why = this.#notRunning();
    if (why !== undefined || !this.#client)
      throw new McpServerDownError(why ?? `${this.server} is not running`);
    return this.#client;
  }

  /**
   * A server that restarted knows no session of before (over Streamable HTTP it answers 404, or 400
   * "No valid session ID"): initialise a new one, once for all the calls that found the old one gone.
   */
  async #renewSession(stale: Client, error: unknown): Promise<void> {
    if (this.#client !== stale && this.state === "ready") return;
    this.#renewing ??= (async () => {
      this.#log.warn(
        { err: oneLine(error) },
        "the MCP server no longer knows this session (it restarted?); starting a new session",
      );
      this.#client = undefined;
      this.#transport = undefined;
      await stale.close().catch(() => {});
      try {
        await this.#connect(false);
        this.#log.info("new MCP session started; calling again");
      } catch (failure) {
        await this.#failed(failure, "could not start a new MCP session");
        throw new McpServerDownError(this.#notRunning() ?? `${this.server} is not running`);
      }
    })().finally(() => {
      this.#renewing = undefined;
    });
    await this.#renewing;
  }

  /**
   * A server at a url that is down is tried at once when a call comes, not only when its backoff
   * ends: it may be back (restarted), and the call then goes to it without waiting. A call that
   * comes while it is being tried waits for that try, and tries again when that one failed.
   */
  async #reconnectNow(): Promise<void> {
    if (this.#attempting) await this.#attempting;
    if (!this.config.url || this.state !== "down" || this.#refused) return;
    clearTimeout(this.#restartTimer);
    await this.#attempt("MCP server still not reachable");
  }

  /** Connects again (once for all who ask meanwhile); when it fails, says why and tries later. */
  #attempt(what: string): Promise<void> {
    this.#attempting ??= this.#connect(false)
      .catch((failure) => this.#failed(failure, what))
      .finally(() => {
        this.#attempting = undefined;
      });
    return this.#attempting;
  }

  /** The session `stale` is of is gone (its stream broke, its server cannot be reached): connect again. */
  async #dropped(stale: Client, error: unknown, what: string): Promise<void> {
    if (this.#client !== stale || this.state !== "ready") return;
    this.#client = undefined;
    this.#transport = undefined;
    this.state = "down";
    // Said before the client closes: its pending calls fail as it closes, and say why.
    this.#reason = this.#why(error);
    this.#nextAttemptAt = Date.now() + this.#restartDelay;
    await stale.close().catch(() => {});
    await this.#failed(error, what);
  }

  async #connect(first: boolean): Promise<void> {
    this.state = "connecting";
    const timeout = this.options.startTimeoutMs ?? 20_000;
    const opened = await openClient(this.server, this.config, {
      client: await clientFactory(this.options.workspace, {
        listChanged: {
          tools: {
            debounceMs: 50,
            onChanged: (error, tools) => {
              if (error) this.#log.warn({ err: error.message }, "could not refresh the tool list");
              else if (tools) this.#register(tools as McpToolInfo[], false);
            },
          },
        },
        sample: (params, signal) => this.#requests.sample(params, signal),
        elicit: (params, signal) => this.#requests.elicit(params, signal),
      }),
      timeoutMs: timeout,
      log: this.#log,
      launch: this.options.launch,
      confine: this.options.confine,
      stderr: this.#stderr,
      onclose: (transport) => this.#closed(transport),
      prefer: this.#kind,
    });
    this.#kind = opened.kind;
    if (opened.kind === "sse") {
      // The legacy transport's session lives as long as its event stream: when the stream breaks
      // (the server stopped or restarted), the session is gone, and calls on it would wait in vain.
      const [, , , { SseError }] = await loadSdk();
      opened.client.onerror = (error) => {
        if (error instanceof SseError)
          void this.#dropped(opened.client, error, "the MCP server's event stream broke");
      };
    }
    if ((this.state as ConnectionState) === "closed") {
      await opened.client.close();
      return;
    }
    this.#client = opened.client;
    this.#transport = opened.transport;
    const { tools } = await opened.client.listTools(undefined, { timeout });
    this.#register(tools as McpToolInfo[], first);
    this.#listed = true;
    this.state = "ready";
    this.#restartDelay = this.options.restartDelayMs ?? 250;
    this.#log.info({ tools: tools.length, pid: this.pid, transport: opened.kind }, "MCP server ready");
  }

  /** Registers the server's tools, replacing its earlier ones; a name another source owns is a collision. */
  #register(tools: McpToolInfo[], strict: boolean): void {
    const next = new Set<string>();
    const unusable = new Map<string, string>();
    for (const info of tools) {
      const why = mcpToolUnusable(info);
      if (why !== undefined) {
        const name = mcpToolName(this.server, info.name);
        if (!this.#unusable.has(name)) this.#log.info({ tool: name }, `MCP tool not offered: ${why}`);
        unusable.set(name, why);
        continue;
      }
      const tool = mcpTool(this, info, this.options.workspace);
      const existing = this.registry.get(tool.name);
      if ((existing && !this.#tools.has(tool.name)) || next.has(tool.name)) {
        const message = `MCP tool "${tool.name}" of server "${this.server}" collides with another tool of that name; rename the server in troupe.yaml`;
        if (strict) throw new McpToolCollisionError(message);
        this.#log.error({ tool: tool.name }, message);
        continue;
      }
      this.registry.replace(tool);
      next.add(tool.name);
    }
    for (const name of this.#tools) if (!next.has(name)) this.registry.unregister(name);
    this.#tools = next;
    this.#unusable = unusable;
    this.#log.debug({ tools: [...next] }, "registered MCP tools");
  }

  #closed(transport: Transport): void {
    if (this.state === "closed" || transport !== this.#transport) return;
    this.#client = undefined;
    this.state = "down";
    void this.#failed(undefined, "MCP server exited");
  }

  /** Why it is not running, in a few words: a server at a url that cannot be reached says its url. */
  #why(error: unknown): string {
    if (error === undefined) return "it exited";
    const cause = this.config.url ? unreachable(error) : undefined;
    if (cause) return `${this.config.url} is not reachable (${cause})`;
    const message = error instanceof Error ? error.message : "";
    if (this.config.url && message.startsWith("SSE error: "))
      return `the event stream of ${this.config.url} broke (${oneLine(message.replace(/^SSE error: (TypeError: )?/, ""))})`;
    return failureReason(error);
  }

  /**
   * It is not running: says why (with the last it wrote to stderr) and tries again after a while;
   * one Troupe refused to start is not tried again.
   */
  async #failed(error: unknown, what: string): Promise<void> {
    this.#reason = this.#why(error);
    if (error instanceof McpLaunchRefusedError) {
      this.#refused = error;
      if (this.state !== "closed") this.state = "down";
      this.#log.error(error.message);
      return;
    }
    await this.#stderr.settled();
    if (this.state === "closed") return;
    this.state = "down";
    const delay = this.#restartDelay;
    this.#restartDelay = Math.min(delay * 2, this.options.maxRestartDelayMs ?? 30_000);
    this.#nextAttemptAt = Date.now() + delay;
    this.#log.error(
      { err: this.#reason, retryInMs: delay },
      `${what}: ${this.#reason}${this.#stderr.describe()}; retrying in ${Math.ceil(delay / 1000)} s`,
    );
    clearTimeout(this.#restartTimer);
    this.#restartTimer = setTimeout(() => void this.#attempt("MCP server restart failed"), delay);
    this.#restartTimer.unref();
  }
}

/**
 * Whether a call failed because the server no longer knows the session: 404 (the spec's word for it),
 * or 400 that says so (what the SDK's own servers answer).
 */
async function sessionLost(error: unknown): Promise<boolean> {
  const [, , http] = await loadSdk();
  if (!(error instanceof http.StreamableHTTPError)) return false;
  return error.code === 404 || (error.code === 400 && /session/i.test(error.message));
}

/**
 * Why a server over HTTP could not be reached, in a word (`ECONNREFUSED`, `fetch failed`): fetch's
 * own failure (a `TypeError`, its cause the socket's error), or the event stream's that says so.
 * Undefined for any other error: one the server answered may mention a refused connection of its own.
 */
function unreachable(error: unknown): string | undefined {
  const fetchFailure =
    (error instanceof TypeError && error.message === "fetch failed") ||
    (error instanceof Error && error.message.startsWith("SSE error: TypeError: fetch failed"));
  if (!fetchFailure) return undefined;
  for (let at: unknown = error.cause, depth = 0; at instanceof Error && depth < 5; at = at.cause, depth++) {
    const code = (at as NodeJS.ErrnoException).code;
    if (typeof code === "string" && /^E[A-Z]+$/.test(code)) return code;
  }
  return (
    error.message.match(/\bE(?:CONNREFUSED|CONNRESET|NOTFOUND|HOSTUNREACH|TIMEDOUT)\b/)?.[0] ?? "fetch failed"
  );
}
