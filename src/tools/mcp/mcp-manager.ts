import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { McpServerConfig } from "../../config/schema.js";
import { type Logger, silentLogger } from "../../log.js";
import type { ToolRegistry } from "../tool.js";
import { type McpCaller, type McpCallResult, type McpToolInfo, mcpTool } from "./mcp-tool.js";

export class McpToolCollisionError extends Error {
  override name = "McpToolCollisionError";
}

export class McpServerDownError extends Error {
  override name = "McpServerDownError";
}

export interface McpManagerOptions {
  workspace: string;
  log?: Logger;
  /** First wait before restarting a crashed server; doubles up to `maxRestartDelayMs`. */
  restartDelayMs?: number;
  maxRestartDelayMs?: number;
  /** How long the first connection of each server may take at start. Default 20000. */
  startTimeoutMs?: number;
  /**
   * Runs a stdio server's command in the sandbox, for a server whose entry says `sandbox:`: the program
   * and arguments that do so, and the environment to start them with. Throws when it cannot.
   */
  confine?: (
    mode: "read-only" | "workspace-write",
    command: readonly string[],
    env: Record<string, string>,
  ) => { file: string; args: string[]; env: Record<string, string> };
}

type State = "connecting" | "ready" | "down" | "closed";

/**
 * One long-lived client per configured MCP server, shared by every agent of the process. Tools are
 * registered as `server__tool`; a `tools/list_changed` refreshes them; a server that exits is
 * restarted with backoff, and its tools fail with a clear error meanwhile.
 */
export class McpManager {
  readonly #connections = new Map<string, McpConnection>();

  constructor(servers: Record<string, McpServerConfig>, registry: ToolRegistry, options: McpManagerOptions) {
    for (const [name, config] of Object.entries(servers)) {
      this.#connections.set(name, new McpConnection(name, config, registry, options));
    }
  }

  /** Connects every server. Tool name collisions throw; a server that will not start is retried in the background. */
  async start(): Promise<void> {
    const results = await Promise.allSettled([...this.#connections.values()].map((c) => c.start()));
    const collision = results.find(
      (r) => r.status === "rejected" && r.reason instanceof McpToolCollisionError,
    );
    if (collision?.status === "rejected") {
      await this.close();
      throw collision.reason;
    }
  }

  state(server: string): State | undefined {
    return this.#connections.get(server)?.state;
  }

  /** The child process of a stdio server, while it runs. */
  pid(server: string): number | undefined {
    return this.#connections.get(server)?.pid;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#connections.values()].map((c) => c.close()));
  }
}

/** The SDK takes a few hundred ms to load: loaded when a server is first connected, not at start. */
let sdk:
  | Promise<
      [
        typeof import("@modelcontextprotocol/sdk/client/index.js"),
        typeof import("@modelcontextprotocol/sdk/client/stdio.js"),
        typeof import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
      ]
    >
  | undefined;
const loadSdk = () => {
  sdk ??= Promise.all([
    import("@modelcontextprotocol/sdk/client/index.js"),
    import("@modelcontextprotocol/sdk/client/stdio.js"),
    import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
  ]);
  return sdk;
};

class McpConnection implements McpCaller {
  state: State = "connecting";
  #client: Client | undefined;
  #transport: Transport | undefined;
  #tools = new Set<string>();
  #restartDelay: number;
  #restartTimer: NodeJS.Timeout | undefined;
  readonly #log: Logger;

  constructor(
    readonly server: string,
    readonly config: McpServerConfig,
    private readonly registry: ToolRegistry,
    private readonly options: McpManagerOptions,
  ) {
    this.#log = (options.log ?? silentLogger).child({ component: "mcp", server });
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
      this.#log.error(
        { err: (error as Error).message },
        "MCP server did not start; retrying in the background",
      );
      this.#scheduleRestart();
    }
  }

  async call(name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<McpCallResult> {
    const client = this.#client;
    if (this.state !== "ready" || !client) {
      throw new McpServerDownError(
        `the MCP server "${this.server}" is not running (${this.state === "closed" ? "closed" : "restarting"})`,
      );
    }
    return (await client.callTool({ name, arguments: args }, undefined, {
      timeout: this.config.timeoutMs,
      signal,
    })) as McpCallResult;
  }

  async close(): Promise<void> {
    this.state = "closed";
    clearTimeout(this.#restartTimer);
    await this.#client?.close().catch(() => {});
  }

  async #connect(first: boolean): Promise<void> {
    this.state = "connecting";
    const [{ Client }, stdio, http] = await loadSdk();
    const client = new Client(
      { name: "troupe", version: "0.1.0" },
      {
        capabilities: {},
        listChanged: {
          tools: {
            debounceMs: 50,
            onChanged: (error, tools) => {
              if (error) this.#log.warn({ err: error.message }, "could not refresh the tool list");
              else if (tools) this.#register(tools as McpToolInfo[], false);
            },
          },
        },
      },
    );
    const transport = this.config.url
      ? new http.StreamableHTTPClientTransport(new URL(this.config.url), {
          requestInit: { headers: this.config.headers },
        })
      : new stdio.StdioClientTransport({
          ...this.#command({ ...stdio.getDefaultEnvironment(), ...this.config.env }),
          ...(this.config.cwd ? { cwd: this.config.cwd } : {}),
          stderr: "ignore",
        });
    transport.onclose = () => this.#closed(transport);
    const timeout = this.options.startTimeoutMs ?? 20_000;
    await client.connect(transport, { timeout });
    if ((this.state as State) === "closed") {
      await client.close();
      return;
    }
    this.#client = client;
    this.#transport = transport;
    const { tools } = await client.listTools(undefined, { timeout });
    this.#register(tools as McpToolInfo[], first);
    this.state = "ready";
    this.#restartDelay = this.options.restartDelayMs ?? 250;
    this.#log.info({ tools: tools.length, pid: this.pid }, "MCP server ready");
  }

  /** The stdio server's command line, inside the sandbox when its entry says so. */
  #command(env: Record<string, string>): { command: string; args: string[]; env: Record<string, string> } {
    const argv = [this.config.command as string, ...this.config.args];
    if (!this.config.sandbox) return { command: argv[0] as string, args: argv.slice(1), env };
    if (!this.options.confine)
      throw new McpServerDownError(
        `the MCP server "${this.server}" asks for the sandbox, and there is none here`,
      );
    const confined = this.options.confine(this.config.sandbox, argv, env);
    return { command: confined.file, args: confined.args, env: confined.env };
  }

  /** Registers the server's tools, replacing its earlier ones; a name another source owns is a collision. */
  #register(tools: McpToolInfo[], strict: boolean): void {
    const next = new Set<string>();
    for (const info of tools) {
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
    this.#log.debug({ tools: [...next] }, "registered MCP tools");
  }

  #closed(transport: Transport): void {
    if (this.state === "closed" || transport !== this.#transport) return;
    this.state = "down";
    this.#client = undefined;
    this.#log.warn({ delayMs: this.#restartDelay }, "MCP server exited; restarting");
    this.#scheduleRestart();
  }

  #scheduleRestart(): void {
    if (this.state === "closed") return;
    this.state = "down";
    const delay = this.#restartDelay;
    this.#restartDelay = Math.min(delay * 2, this.options.maxRestartDelayMs ?? 30_000);
    this.#restartTimer = setTimeout(() => {
      this.#connect(false).catch((error) => {
        this.#log.error({ err: (error as Error).message }, "MCP server restart failed");
        this.#scheduleRestart();
      });
    }, delay);
    this.#restartTimer.unref();
  }
}
