import type { McpServerConfig } from "../../config/mcp-server-schema.js";
import type { ToolEffect } from "../../config/tool-catalog.js";
import { type Logger, silentLogger } from "../../log.js";
import { clientFactory } from "./mcp-client.js";
import { type LaunchScope, McpLaunchRefusedError } from "./mcp-launch.js";
import { mcpToolEffect, mcpToolName, mcpToolUnusable } from "./mcp-tool.js";
import { type Confine, failureReason, openClient, StderrTail } from "./mcp-transport.js";

/** What starting one server once showed. */
export interface ServerProbe {
  server: string;
  ok: boolean;
  /** One line: its tool count and transport, or why it did not start. */
  says: string;
  /** Its tools, as agents name them, with what each may do; absent when it did not start. */
  tools?: Array<{ name: string; effect: ToolEffect }>;
}

export interface ProbeOptions {
  /** Where each server starts, and what it may not come from: as a run on the same config starts it. */
  launch: LaunchScope;
  confine?: Confine | undefined;
  /** How long each server may take to start and list its tools. Default 20000. */
  timeoutMs?: number;
  log?: Logger;
}

/**
 * Starts each server once, all at a time, lists its tools and stops it: what `troupe doctor` and
 * `troupe agents validate --check-servers` report, in the order of the config. A disabled one is
 * never started, as a run never starts it.
 */
export function probeServers(
  servers: Record<string, McpServerConfig>,
  options: ProbeOptions,
): Promise<ServerProbe[]> {
  return Promise.all(
    Object.entries(servers).map(([server, config]) =>
      config.disabled
        ? { server, ok: true, says: "disabled (disabled: true in its entry): not started" }
        : probeServer(server, config, options),
    ),
  );
}

async function probeServer(
  server: string,
  config: McpServerConfig,
  options: ProbeOptions,
): Promise<ServerProbe> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const stderr = new StderrTail(2);
  const log = (options.log ?? silentLogger).child({ component: "mcp", server });
  let opened: Awaited<ReturnType<typeof openClient>> | undefined;
  try {
    opened = await openClient(server, config, {
      client: await clientFactory(options.launch.workspace),
      timeoutMs,
      log,
      launch: options.launch,
      confine: options.confine,
      stderr,
      onclose: () => {},
    });
    const listed = (await opened.client.listTools(undefined, { timeout: timeoutMs })).tools;
    const tools = listed.filter((tool) => mcpToolUnusable(tool) === undefined);
    const over = opened.kind === "sse" ? "the legacy HTTP+SSE transport" : opened.kind;
    const hidden = listed.length - tools.length;
    const unusable = hidden > 0 ? ` (${hidden} more not offered: they require task-based execution)` : "";
    return {
      server,
      ok: true,
      says: `${tools.length} tool${tools.length === 1 ? "" : "s"} over ${over}${unusable}`,
      tools: tools.map((tool) => ({
        name: mcpToolName(server, tool.name),
        effect: mcpToolEffect(config, tool),
      })),
    };
  } catch (error) {
    if (error instanceof McpLaunchRefusedError)
      return { server, ok: false, says: `not started: ${error.why}` };
    await stderr.settled();
    return { server, ok: false, says: `did not start: ${failureReason(error)}${stderr.describe()}` };
  } finally {
    await opened?.client.close().catch(() => {});
  }
}
