import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { answerApproval, listApprovals } from "../approvals/answer-approval.js";
import type { ApprovalRecord } from "../approvals/approval-record.js";
import { type Bus, RequestRefusedError } from "../bus/bus.js";
import type { ListedRule } from "../config/permissions-listed.js";
import type { Daemon } from "../daemon/daemon.js";
import { UserError } from "../errors.js";
import { MAX_REASON } from "../limits.js";
import type { Logger } from "../log.js";
import { agentMachine } from "../machines/agent-machine.js";
import { machineGraph } from "../machines/diagram.js";
import type { Identity } from "../trust/approvers.js";
import { allowSessionIdle, consoleServer, listenAt } from "./console-server.js";
import { RunsFeed } from "./runs-feed.js";
import { crossSite, WebAuth } from "./web-auth.js";
import { streamEvents } from "./web-events.js";

/** What the console serves, once its daemon is ready. */
export interface WebConsoleParts {
  daemon: Daemon;
  bus: Bus;
  /** Where the page's approval answers are written: a connection as the approver role. */
  answerBus: Bus;
  /** Whose signature the page's approval answers carry: the daemon's local user. */
  identity: Identity;
  /** The built front end: index.html, app.js, app.css (`consoleAssets()`). */
  assets: string;
  /** The allow and deny rules of the daemon's troupe.yaml, as `troupe permissions` lists them. */
  permissions?: readonly ListedRule[];
}

type Served = WebConsoleParts & { feed: RunsFeed };

/** `HOST:PORT` (an IPv6 host in brackets) as the console listens on it; a user's error when it is not one. */
export function parseListen(listen: string): { host: string; port: number } {
  const match = /^(?:\[([0-9a-fA-F:]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(listen);
  const port = Number(match?.[3]);
  if (!match || port > 65535)
    throw new UserError(`web console: "${listen}" is not HOST:PORT; give one such as 127.0.0.1:7480`);
  return { host: (match[1] ?? match[2]) as string, port };
}

/** The front end's files (npm run build puts them in dist/console), by the path a page asks for. */
const ASSETS: Record<string, { file: string; type: string }> = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/app.css": { file: "app.css", type: "text/css; charset=utf-8" },
};

/** Where index.html takes the session a login gives (web/src/api.ts reads it from there). */
const sessionMeta = (session: string) => `<meta name="troupe-session" content="${session}" />`;

/** dist/console of the package this module is part of (run from dist/, or from a bench build beside it). */
export function consoleAssets(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir))
    if (existsSync(join(dir, "package.json"))) return join(dir, "dist/console");
  throw new Error("the web console's files are not where the package is: run npm run build");
}

/** Nothing but the console's own files, and no framing by another site. */
const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
};

const answerRequest = z.strictObject({
  runId: z.string().min(1),
  agentId: z.string().min(1),
  callId: z.string().min(1),
  requestId: z.string().min(1),
  approved: z.boolean(),
  reason: z.string().max(MAX_REASON).optional(),
});

/**
 * The web console a daemon serves (`troupe daemon --web`): its pages, a JSON API of what an observer
 * may see, live updates over Server-Sent Events read from the bus, and the few things a person
 * does (answer an approval, steer, follow up, abort), each as the daemon's API would take it.
 * It listens first (`listen`), answering 503, and serves once the daemon is ready (`serve`): the
 * daemon knows it has its port before it resumes a run.
 */
export class WebConsole {
  readonly auth = new WebAuth();
  #server: Server;
  #served: Served | undefined;
  #closing = new AbortController();

  private constructor(private readonly log: Logger) {
    this.#server = consoleServer((request, response) => this.#handle(request, response), log);
  }

  /**
   * Listens at `host` (default 127.0.0.1) and `port` (0: a free one), held to CONSOLE_LIMITS;
   * a `ConsoleListenError` when that address cannot be had.
   */
  static async listen(address: { host?: string; port?: number }, log: Logger): Promise<WebConsole> {
    const console = new WebConsole(log);
    await listenAt(console.#server, address.host ?? "127.0.0.1", address.port ?? 0);
    return console;
  }

  /** Serves the pages and the API from now on. */
  serve(parts: WebConsoleParts): void {
    const feed = new RunsFeed(parts.daemon, parts.bus, this.log, this.#closing.signal);
    this.#served = { ...parts, feed };
  }

  /** Where the console is, without a token. */
  get origin(): string {
    const { address, port } = this.#server.address() as AddressInfo;
    // Listening on every address: the URL names this machine, which a browser elsewhere can reach.
    const host = address === "0.0.0.0" || address === "::" ? hostname() : address;
    return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  }

  /** A URL that logs one browser in, once. */
  loginUrl(): string {
    return `${this.origin}/login?token=${this.auth.newLogin()}`;
  }

  async close(): Promise<void> {
    this.#closing.abort();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #handle(request: IncomingMessage, response: ServerResponse): void {
    const served = this.#served;
    if (!served) {
      json(response, 503, { error: "the daemon is starting: try again in a moment" });
      return;
    }
    this.#route(served, request, response).catch((error) => {
      // The path only: a page's EventSource carries its session in the query.
      const path = request.url?.split("?")[0];
      this.log.error({ err: error, path }, "web console request failed");
      if (!response.headersSent) json(response, 500, { error: "internal error" });
      else response.end();
    });
  }

  async #route(served: Served, request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? "/", "http://console");
    if (request.method === "GET" && url.pathname === "/login")
      return this.#login(served.assets, url, response);
    // The page's own files hold nothing of the runs: they are what a login loads, before it has a session.
    const asset = Object.hasOwn(ASSETS, url.pathname) ? ASSETS[url.pathname] : undefined;
    if (request.method === "GET" && asset) return this.#asset(served.assets, asset, url.pathname, response);
    if (!this.auth.allows(request, url))
      return json(response, 401, { error: "log in with the URL troupe web prints" });
    allowSessionIdle(request);
    if (request.method === "POST") {
      const refused = crossSite(request);
      if (refused) return json(response, 403, { error: `refused: ${refused}` });
      return this.#act(served, url.pathname, request, response);
    }
    if (request.method !== "GET") return json(response, 405, { error: "GET or POST" });
    const run = /^\/api\/runs\/([A-Za-z0-9_-]+)\/(events|approvals)$/.exec(url.pathname);
    if (run?.[2] === "events") return streamEvents(served.bus, run[1] as string, request, response);
    if (run?.[2] === "approvals")
      return json(response, 200, { approvals: (await listApprovals(served.bus, run[1])).map(shown) });
    if (url.pathname === "/api/runs/live") return served.feed.serve(request, response);
    if (url.pathname === "/api/machine") return json(response, 200, machineGraph(agentMachine));
    if (url.pathname === "/api/permissions") return json(response, 200, served.permissions ?? []);
    if (url.pathname === "/api/whoami") return json(response, 200, { name: served.identity.name });
    return json(response, 404, { error: `no ${url.pathname}` });
  }

  /** A login answers with the page itself, the session in it: the page keeps it in its origin's storage. */
  async #login(assets: string, url: URL, response: ServerResponse): Promise<void> {
    const session = this.auth.login(url.searchParams.get("token") ?? "");
    if (!session) {
      // A person's browser, not a script, opens a login: a page that says what to do.
      response.writeHead(401, { ...SECURITY_HEADERS, "content-type": "text/html; charset=utf-8" });
      response.end(USED_LOGIN_PAGE);
      return;
    }
    const page = await readFile(join(assets, "index.html"), "utf8");
    response.writeHead(200, { ...SECURITY_HEADERS, "content-type": "text/html; charset=utf-8" });
    response.end(page.replace(sessionMeta(""), sessionMeta(session)));
  }

  async #act(
    served: Served,
    path: string,
    request: IncomingMessage,
    response: ServerResponse,
  ): Promise<void> {
    try {
      const input = await body(request);
      if (path === "/api/approvals/answer") return json(response, 200, await this.#answer(served, input));
      // A run id is one subject token: anything else (`*`, `>`, dots) names no run.
      const command = /^\/api\/runs\/([A-Za-z0-9_-]+)\/(abort|steer|followUp)$/.exec(path);
      if (!command) return json(response, 404, { error: `no ${path}` });
      const verb = `runs.${command[2]}` as "runs.abort" | "runs.steer" | "runs.followUp";
      const fields = typeof input === "object" && input !== null ? input : {};
      return json(response, 200, await served.daemon.request(verb, { ...fields, runId: command[1] }));
    } catch (error) {
      if (error instanceof RequestRefusedError || error instanceof z.ZodError)
        return json(response, 400, { error: error.message });
      throw error;
    }
  }

  async #answer(served: Served, input: unknown): Promise<unknown> {
    const asked = answerRequest.parse(input);
    const shownRecord = (await listApprovals(served.bus, asked.runId)).find(
      (record) => record.request.callId === asked.callId && record.request.agentId === asked.agentId,
    );
    if (!shownRecord || shownRecord.requestId !== asked.requestId)
      throw new RequestRefusedError("that request has changed or is gone: look again");
    const { outcome, record, why } = await answerApproval(served.answerBus, served.identity, shownRecord, {
      approved: asked.approved,
      reason: asked.reason,
      via: "web",
    });
    return { outcome, ...(why ? { why } : {}), ...(record ? { approval: shown(record) } : {}) };
  }

  async #asset(
    assets: string,
    asset: { file: string; type: string },
    path: string,
    response: ServerResponse,
  ): Promise<void> {
    const content = await readFile(join(assets, asset.file)).catch(() => undefined);
    if (!content) return json(response, 404, { error: `no ${path}` });
    response.writeHead(200, { ...SECURITY_HEADERS, "content-type": asset.type });
    response.end(content);
  }
}

/** What the page is shown of an approval: the request as its host wrote it, and how it was decided. */
function shown(record: ApprovalRecord) {
  const { request, requestId, status, createdAt, expiresAt, reason, by } = record;
  return { request, requestId, status, createdAt, expiresAt, reason, by };
}

const USED_LOGIN_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Troupe: login used</title></head>
<body>
<h1>This login link was used already, or is not one</h1>
<p>Each link logs in once. Run <code>troupe web</code> on the daemon's machine for a new one.</p>
</body></html>
`;

export function json(response: ServerResponse, status: number, value: unknown): void {
  response.writeHead(status, { ...SECURITY_HEADERS, "content-type": "application/json" });
  response.end(JSON.stringify(value));
}

const MAX_BODY = 64 * 1024;

async function body(request: IncomingMessage): Promise<unknown> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) throw new RequestRefusedError("request too large");
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
  } catch {
    throw new RequestRefusedError("the body is not JSON");
  }
}
