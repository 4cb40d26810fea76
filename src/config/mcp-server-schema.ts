/* One MCP server of troupe.yaml (or of another client's file that it reads), and the names servers may take. */
import { z } from "zod";
import { positiveInt } from "./units.js";

/** How long a call that keeps reporting progress may run, unless its entry says. */
const DEFAULT_MAX_TOTAL_TIMEOUT_MS = 600_000;

/** The `server` of `server__tool`: no "__" inside, so a tool name says which server it is of. */
export const mcpServerNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$/, 'must be letters, digits, "-" or single "_"');

/**
 * One MCP server, in the shape Claude Desktop, Cursor, Claude Code (`.mcp.json`), VS Code, Cline and
 * Windsurf write it, so an entry can be pasted in: each client's own keys mean what they mean there.
 */
export const mcpServerSchema = z
  .strictObject({
    /**
     * How to reach it (Claude Code, VS Code, Cline): `stdio` is `command`; `http`, `streamable-http`
     * and `streamableHttp` are Streamable HTTP at `url` (falling back to SSE, as VS Code does); `sse`
     * is the legacy HTTP+SSE transport. Absent: `command` or `url` says.
     */
    type: z.enum(["stdio", "http", "streamable-http", "streamableHttp", "sse"]).optional(),
    command: z.string().min(1).optional(),
    args: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).default({}),
    /**
     * Cursor: a dotenv file of more variables, relative to the directory of the file that defined the
     * server; `env` wins over it. Its values are kept out of what agents and logs see.
     */
    envFile: z.string().min(1).optional(),
    cwd: z.string().optional(),
    /** A server over HTTP, instead of `command`. */
    url: z.url().optional(),
    /** Windsurf's name for `url`. */
    serverUrl: z.url().optional(),
    headers: z.record(z.string(), z.string()).default({}),
    /** Cline: the server is not started, and its tools are absent. */
    disabled: z.boolean().default(false),
    /** Cline: these tools (as the server names them) run without asking, under every approval policy. */
    autoApprove: z.array(z.string().min(1)).default([]),
    /** Every tool of this server only reads. */
    readOnly: z.boolean().default(false),
    timeoutMs: positiveInt.optional(),
    /**
     * A call that reports progress has its timeout started again at each report, up to this in all.
     * Default 10 minutes, and never less than the call timeout.
     */
    maxTotalTimeoutMs: positiveInt.optional(),
    /** Cline's call timeout, in seconds. */
    timeout: positiveInt.optional(),
    /** Run this (stdio) server in the sandbox too, as its commands would be. */
    sandbox: z.enum(["read-only", "workspace-write"]).optional(),
  })
  .refine((server) => server.url === undefined || server.serverUrl === undefined, {
    message: '"serverUrl" is Windsurf\'s name for "url": keep one of them',
    path: ["serverUrl"],
  })
  .refine((server) => server.timeout === undefined || server.timeoutMs === undefined, {
    message: '"timeout" is Cline\'s "timeoutMs" in seconds: keep one of them',
    path: ["timeout"],
  })
  .refine(
    (server) =>
      (server.command === undefined) !== (server.url === undefined && server.serverUrl === undefined),
    {
      message: 'needs exactly one of "command" (a local process) or "url" (a server over HTTP)',
    },
  )
  .refine((server) => server.type !== "stdio" || server.command !== undefined, {
    message: '"type: stdio" is a local process: it needs "command", not "url"',
    path: ["type"],
  })
  .refine((server) => server.type === undefined || server.type === "stdio" || server.command === undefined, {
    message: 'this "type" is a server over HTTP: it needs "url", not "command"',
    path: ["type"],
  })
  .refine((server) => server.sandbox === undefined || server.command !== undefined, {
    message: '"sandbox" applies to a local process ("command"), not to a server at a "url"',
  })
  .transform(({ type, serverUrl, timeout, timeoutMs, maxTotalTimeoutMs, ...server }) => {
    const callTimeout = timeoutMs ?? (timeout === undefined ? 60_000 : timeout * 1000);
    return {
      ...server,
      url: server.url ?? serverUrl,
      /** `http`: Streamable HTTP, falling back to the legacy SSE transport; `sse`: only that one. */
      transport: (type === "sse" ? "sse" : server.command === undefined ? "http" : "stdio") as
        | "stdio"
        | "http"
        | "sse",
      timeoutMs: callTimeout,
      maxTotalTimeoutMs: Math.max(maxTotalTimeoutMs ?? DEFAULT_MAX_TOTAL_TIMEOUT_MS, callTimeout),
    };
  });
export type McpServerConfig = z.infer<typeof mcpServerSchema> & {
  /** The directory of the file that defined it (troupe.yaml's, or an `mcpServersFrom` file's), set by the loader: where it starts. */
  dir?: string;
};
