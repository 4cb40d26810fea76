import type { McpServerConfig } from "../../config/mcp-server-schema.js";
import { MCP_SEPARATOR, splitMcpToolName } from "../../config/tool-catalog.js";
import { type Logger, silentLogger } from "../../log.js";
import type { ToolRegistry } from "../tool.js";
import { type ConnectionState, McpConnection, McpToolCollisionError } from "./mcp-connection.js";
import { defaultLaunchScope, type LaunchScope } from "./mcp-launch.js";
import type { Confine } from "./mcp-transport.js";

export { McpToolCollisionError } from "./mcp-connection.js";
export { McpServerDownError } from "./mcp-transport.js";

export interface McpManagerOptions {
  workspace: string;
  /**
   * Where stdio servers start and what they may not come from (`launchScope` of the config); default:
   * only the workspace is writable, and servers are from the working directory.
   */
  launch?: LaunchScope;
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
  confine?: Confine;
  /**
   * The tools agents list (`server__tool`, `server__*`): a server that does not start still has the
   * ones named in full, whose calls say why it is not running.
   */
  agentTools?: readonly string[];
}

/**
 * One long-lived client per configured MCP server, shared by every agent of the process. Tools are
 * registered as `server__tool`; a `tools/list_changed` refreshes them; a server that exits or does not
 * start is restarted with backoff, and its tools (the last it listed, or the ones agents name) fail
 * meanwhile with why and when it is tried next.
 */
export class McpManager {
  readonly #connections = new Map<string, McpConnection>();

  constructor(servers: Record<string, McpServerConfig>, registry: ToolRegistry, options: McpManagerOptions) {
    for (const [name, config] of Object.entries(servers)) {
      if (config.disabled) {
        // Cline's meaning: not started, its tools absent; a call of one is told why.
        registry.explainUnavailable(
          `${name}${MCP_SEPARATOR}`,
          () => `MCP server "${name}" is disabled (disabled: true in its entry)`,
        );
        continue;
      }
      const expectedTools = (options.agentTools ?? [])
        .map(splitMcpToolName)
        .filter((tool) => tool?.server === name && tool.tool !== "*")
        .map((tool) => tool?.tool as string);
      const connection = new McpConnection(name, config, registry, {
        ...options,
        launch: options.launch ?? defaultLaunchScope(options.workspace),
        log: options.log ?? silentLogger,
        expectedTools: [...new Set(expectedTools)],
      });
      this.#connections.set(name, connection);
      // Any `name__…` call while the server is away (even of a tool it never listed), or of a tool
      // it lists that troupe cannot call, is told why.
      registry.explainUnavailable(`${name}${MCP_SEPARATOR}`, (tool) => connection.unavailable(tool));
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

  state(server: string): ConnectionState | undefined {
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
