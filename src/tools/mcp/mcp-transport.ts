import { createInterface } from "node:readline";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { McpServerConfig } from "../../config/mcp-server-schema.js";
import { TroupeError } from "../../errors.js";
import type { Logger } from "../../log.js";
import { cleanOutput } from "../../safety/hygiene.js";
import { type Launch, type LaunchScope, McpLaunchRefusedError, planLaunch } from "./mcp-launch.js";

/** How a client reaches its server: a child process, Streamable HTTP, or the legacy HTTP+SSE transport. */
export type TransportKind = "stdio" | "streamable-http" | "sse";

/** Runs a stdio server's command in the sandbox: the program, arguments and environment that do so. */
export type Confine = (
  mode: "read-only" | "workspace-write",
  command: readonly string[],
  env: Record<string, string>,
) => { file: string; args: string[]; env: Record<string, string> };

export class McpServerDownError extends TroupeError {
  override name = "McpServerDownError";
}

/** The SDK takes a few hundred ms to load: loaded when a server is first connected, not at start. */
let sdk:
  | Promise<
      [
        typeof import("@modelcontextprotocol/sdk/client/index.js"),
        typeof import("@modelcontextprotocol/sdk/client/stdio.js"),
        typeof import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
        typeof import("@modelcontextprotocol/sdk/client/sse.js"),
        typeof import("@modelcontextprotocol/sdk/types.js"),
      ]
    >
  | undefined;
export const loadSdk = () => {
  sdk ??= Promise.all([
    import("@modelcontextprotocol/sdk/client/index.js"),
    import("@modelcontextprotocol/sdk/client/stdio.js"),
    import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
    import("@modelcontextprotocol/sdk/client/sse.js"),
    import("@modelcontextprotocol/sdk/types.js"),
  ]);
  return sdk;
};

/** The last lines a server wrote to stderr, for saying why it did not start. */
export class StderrTail {
  readonly #lines: string[] = [];
  #ended: Promise<void> = Promise.resolve();
  constructor(private readonly keep = 5) {}

  /** Follows a new process's stderr: its lines are kept from now on. */
  follow(ended: Promise<void>): void {
    this.#lines.length = 0;
    this.#ended = ended;
  }

  /** Waits until the process's stderr has ended (its last lines are in), at most `ms`. */
  async settled(ms = 300): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.#ended, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
  }

  push(line: string): void {
    this.#lines.push(line.length > 300 ? `${line.slice(0, 300)}…` : line);
    if (this.#lines.length > this.keep) this.#lines.shift();
  }

  /** `; its stderr ended: "…" / "…"`, or nothing when it wrote none. */
  describe(): string {
    if (this.#lines.length === 0) return "";
    return `; its stderr ended: ${this.#lines.map((line) => JSON.stringify(line)).join(" / ")}`;
  }
}

export interface OpenOptions {
  /** A client not yet connected (with its capabilities and handlers). */
  client: () => Client;
  timeoutMs: number;
  log: Logger;
  /** Where a stdio server starts, and what it may not come from. */
  launch: LaunchScope;
  confine?: Confine | undefined;
  /** Keeps a stdio server's last stderr lines (each line is logged too). */
  stderr: StderrTail;
  /** Called once when the transport closes after connecting (the process exited). */
  onclose: (transport: Transport) => void;
  /** The transport that worked last time: a restart does not try Streamable HTTP again. */
  prefer?: TransportKind | undefined;
}

export interface OpenedClient {
  client: Client;
  transport: Transport;
  kind: TransportKind;
}

/**
 * Connects a client to the server as its entry says. A server at a `url` is asked over Streamable HTTP
 * first; when it refuses that (a 4xx, or an answer that is not JSON: an HTML page), over the legacy
 * HTTP+SSE transport, as VS Code does; `type: sse` goes to the legacy one at once.
 */
export async function openClient(
  server: string,
  config: McpServerConfig,
  options: OpenOptions,
): Promise<OpenedClient> {
  const [, stdio, http, sse] = await loadSdk();
  if (!config.url) {
    const launch = planLaunch(server, config, options.launch, stdio.getDefaultEnvironment());
    if (launch.leftOut.length > 0)
      options.log.info(
        { leftOut: launch.leftOut },
        "PATH entries an agent may write are left out of its PATH",
      );
    const transport = new stdio.StdioClientTransport({
      ...command(server, config.sandbox, launch, options.confine),
      cwd: launch.cwd,
      stderr: "pipe",
    });
    logLines(transport.stderr as NodeJS.ReadableStream | null, options);
    return { ...(await connect(transport, options)), kind: "stdio" };
  }
  const url = new URL(config.url);
  const requestInit = { headers: config.headers };
  const legacy = () => new sse.SSEClientTransport(url, { requestInit });
  if (config.transport === "sse" || options.prefer === "sse")
    return { ...(await connect(legacy(), options)), kind: "sse" };
  try {
    const streamable = new http.StreamableHTTPClientTransport(url, { requestInit });
    return { ...(await connect(streamable, options)), kind: "streamable-http" };
  } catch (error) {
    const refusal = refusedStreamable(error, http.StreamableHTTPError);
    if (refusal === undefined) throw error;
    let opened: { client: Client; transport: Transport };
    try {
      opened = await connect(legacy(), options);
    } catch (second) {
      throw new McpServerDownError(
        `${config.url} answers neither Streamable HTTP (${refusal}) nor the legacy HTTP+SSE transport (${oneLine(second)}); check the url`,
        { cause: second },
      );
    }
    options.log.info(
      { transport: "sse", refused: refusal },
      `${config.url} refused Streamable HTTP (${refusal}): connected over the legacy HTTP+SSE transport`,
    );
    return { ...opened, kind: "sse" };
  }
}

async function connect(
  transport: Transport,
  options: OpenOptions,
): Promise<{ client: Client; transport: Transport }> {
  const client = options.client();
  let connected = false;
  transport.onclose = () => {
    if (connected) options.onclose(transport);
  };
  try {
    await client.connect(transport, { timeout: options.timeoutMs });
  } catch (error) {
    await client.close().catch(() => {});
    throw error;
  }
  connected = true;
  return { client, transport };
}

/** Why a server at a url is no Streamable HTTP server, in a few words; undefined when it may be one that failed. */
function refusedStreamable(
  error: unknown,
  StreamableHTTPError: abstract new (...args: never[]) => Error,
): string | undefined {
  if (!(error instanceof StreamableHTTPError)) return undefined;
  const code = (error as Error & { code?: number }).code;
  if (code === -1)
    return `it answered ${error.message.replace(/^.*Unexpected content type: /, "")}, not JSON`;
  // 401 asks for credentials: the legacy transport would be refused the same.
  if (code !== undefined && code >= 400 && code < 500 && code !== 401) return `HTTP ${code}`;
  return undefined;
}

/** The stdio server's command line, inside the sandbox when its entry says so. */
function command(
  server: string,
  sandbox: McpServerConfig["sandbox"],
  launch: Launch,
  confine: Confine | undefined,
): { command: string; args: string[]; env: Record<string, string> } {
  if (!sandbox) return { command: launch.command, args: launch.args, env: launch.env };
  if (!confine)
    throw new McpServerDownError(`the MCP server "${server}" asks for the sandbox, and there is none here`);
  const confined = confine(sandbox, [launch.command, ...launch.args], launch.env);
  return { command: confined.file, args: confined.args, env: confined.env };
}

/** Characters of one stderr line the log keeps. */
const MAX_LOGGED_LINE = 2000;

/**
 * Each line a server writes to stderr goes to the log (at info, with the server's name from the
 * connection's logger): what it says it does, or why it failed. Never to the terminal as it came: its
 * escape and control characters are taken out (a pretty log on a terminal would play them) and a
 * long line is cut.
 */
function logLines(stream: NodeJS.ReadableStream | null, options: OpenOptions): void {
  if (!stream) return;
  const lines = createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY });
  options.stderr.follow(new Promise((resolve) => lines.once("close", () => resolve())));
  lines.on("line", (raw) => {
    const clean = cleanOutput(raw, Number.POSITIVE_INFINITY);
    if (clean.trim() === "") return;
    const line = clean.length > MAX_LOGGED_LINE ? `${clean.slice(0, MAX_LOGGED_LINE)}…` : clean;
    options.stderr.push(line);
    options.log.info({ stream: "stderr" }, line);
  });
}

/** Why a server did not start, as a person reads it: the SDK's "Connection closed" is the process exiting. */
export function failureReason(error: unknown): string {
  // Troupe's own words are already one line, and say how to mend it at their end.
  if (error instanceof McpLaunchRefusedError) return error.why;
  if (error instanceof McpServerDownError) return error.message;
  const line = oneLine(error);
  return /Connection closed/i.test(line) ? "it exited as it started" : line;
}

/** An error's message as one short line: a server's HTML page is not repeated. */
export function oneLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const first = (message.split("\n")[0] ?? "")
    .replace(/<[^>]*>/g, " ")
    .replace(/\s+/g, " ")
    .trim();
  return first.length > 200 ? `${first.slice(0, 200)}…` : first;
}
