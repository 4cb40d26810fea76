import type { IncomingMessage, ServerResponse } from "node:http";
import { listApprovals } from "../approvals/answer-approval.js";
import type { Bus } from "../bus/bus.js";
import type { RunRecord } from "../daemon/api.js";
import type { Daemon } from "../daemon/daemon.js";
import { isEvent } from "../events/agent-events.js";
import type { Logger } from "../log.js";
import type { Usage } from "../model/types.js";
import { type EventStream, openEventStream } from "./server-events.js";

/** One line of the runs list: the run's record, what it has spent, and who waits on a person. */
export type RunSummary = Omit<RunRecord, "result"> & {
  result?: string;
  usage?: Usage;
  pendingApprovals: number;
};

/** The list is sent again at most this often, however busy the runs are. */
const COALESCE_MS = 200;
/** A list the daemon could not make is tried again after this long, while a page is open. */
const RETRY_MS = 1000;
/**
 * The list is sent again this often while a page is open, whatever was heard: a watch of the
 * bus can end or miss a change (its consumer lost under load), and a page must not keep a stale list.
 */
const REFRESH_MS = 3000;

/**
 * The runs list, live: sent whole to each page when it opens and whenever a run's record, its
 * spend or its approvals change (coalesced). Nothing is watched while no page is open: a daemon's
 * every event is not read for nobody. Spend comes from the run's record once it has stopped,
 * and from its top agent's `usage.updated` while it runs.
 */
export class RunsFeed {
  #pages = new Set<EventStream>();
  #usage = new Map<string, Usage>();
  #pending = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  #failing = false;
  #watching: AbortController | undefined;

  constructor(
    private readonly daemon: Daemon,
    private readonly bus: Bus,
    private readonly log: Logger,
    private readonly closing: AbortSignal,
  ) {}

  /** Sends the list to a page, now and as it changes; the bus is watched while any page is open. */
  async serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const page = openEventStream(request, response, this.closing);
    this.#pages.add(page);
    this.#watching ??= this.#watch();
    page.closed.addEventListener(
      "abort",
      () => {
        this.#pages.delete(page);
        if (this.#pages.size > 0) return;
        this.#watching?.abort();
        this.#watching = undefined;
      },
      { once: true },
    );
    page.send("runs", await this.#list());
  }

  /** Follows the runs' records, their approvals and their spend, until the controller it returns aborts. */
  #watch(): AbortController {
    const watching = new AbortController();
    const signal = AbortSignal.any([this.closing, watching.signal]);
    // A watch that ends while pages are open (refused, or its consumer lost) is made again.
    const watch = async (what: string, loop: () => Promise<void>) => {
      let warned = false;
      while (!signal.aborted) {
        await loop().catch((error) => {
          if (signal.aborted || warned) return;
          warned = true;
          this.log.warn({ err: error }, `web console: ${what} no longer followed; trying again`);
        });
        if (!signal.aborted) await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    };
    const refresh = setInterval(() => this.#changed(), REFRESH_MS);
    signal.addEventListener("abort", () => clearInterval(refresh), { once: true });
    void watch("runs", async () => {
      for await (const _ of (await this.bus.kv("runs")).watch({ signal })) this.#changed();
    });
    void watch("approvals", async () => {
      await this.#countApprovals();
      for await (const _ of (await this.bus.kv("approvals")).watch({ signal })) {
        await this.#countApprovals();
        this.#changed();
      }
    });
    void watch("spend", async () => {
      for await (const { envelope } of this.bus.eventLog.read({ from: "now", follow: true, signal })) {
        if (envelope.parentId === undefined && isEvent(envelope, "usage.updated")) {
          this.#usage.set(envelope.runId, envelope.data.usage);
          this.#changed();
        }
      }
    });
    return watching;
  }

  /**
   * Sends the list again soon. A list the daemon could not make is tried again until one is sent:
   * the change that asked for it may be the last for a long while, and a page must not miss it.
   */
  #changed(after = COALESCE_MS): void {
    if (this.#timer || this.#pages.size === 0) return;
    this.#timer = setTimeout(async () => {
      this.#timer = undefined;
      const runs = await this.#list().catch((error) => {
        if (!this.#failing) this.log.warn({ err: error }, "web console: runs not listed; trying again");
        this.#failing = true;
        return undefined;
      });
      if (!runs) return this.#changed(RETRY_MS);
      this.#failing = false;
      for (const page of this.#pages) page.send("runs", runs);
    }, after);
  }

  async #countApprovals(): Promise<void> {
    this.#pending.clear();
    for (const record of await listApprovals(this.bus))
      if (record.status === "pending")
        this.#pending.set(record.request.runId, (this.#pending.get(record.request.runId) ?? 0) + 1);
  }

  async #list(): Promise<RunSummary[]> {
    const { runs } = (await this.daemon.request("runs.list", {})) as {
      runs: Array<RunRecord & { usage?: Usage }>;
    };
    return runs
      .map((run) => {
        const usage = run.usage ?? this.#usage.get(run.runId);
        return { ...run, usage, pendingApprovals: this.#pending.get(run.runId) ?? 0 };
      })
      .sort((a, b) => b.startedAt - a.startedAt);
  }
}
