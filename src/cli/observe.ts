import { emitKeypressEvents } from "node:readline";
import { RunTreeBuilder, type TreeNode } from "../actors/run-tree.js";
import { loadConfig } from "../config/load.js";
import { dataDir } from "../config/paths.js";
import type { Logger } from "../log.js";
import { answerApproval, awaitApproval } from "../safety/answer-approval.js";
import { type ApprovalRecord, type ApprovalRef, approvalKey } from "../safety/bus-approver.js";
import { localIdentity } from "../trust/approvers.js";
import { APPROVER_ROLES, connectClient } from "./client.js";
import { firstPending, renderTree, type ShownRequests } from "./tree-view.js";

export interface ObserveFlags {
  fromStart?: boolean;
  json?: boolean;
}

/**
 * `troupe observe [RUN_ID]`: follows one run, or every run, from another terminal or host. On a
 * terminal it shows the live tree and answers approvals with a key; otherwise (or with --json) it
 * prints one event per line. Ends when the run ends (with a RUN_ID), or on q / Ctrl-C.
 */
export async function runObserve(
  configPath: string | undefined,
  runId: string | undefined,
  flags: ObserveFlags,
  log: Logger,
): Promise<number> {
  const config = loadConfig({ config: configPath });
  const bus = await connectClient(config, "troupe-observe", log, 3000, APPROVER_ROLES);
  const identity = () => localIdentity(dataDir(config.troupe.dataDir));
  const live = !flags.json && process.stdout.isTTY === true;
  const reading = new AbortController();
  const builder = new RunTreeBuilder();
  let focus: TreeNode | undefined;
  let drawn = 0;
  let dirty = false;
  // The requests behind pending approvals, read from the bucket their hosts write.
  const records = new Map<string, ApprovalRecord>();
  const requests: ShownRequests = {
    record: (ref) => records.get(approvalKey(ref)),
    watchOnly: !(live && process.stdin.isTTY),
  };
  const readRequest = (ref: ApprovalRef) =>
    void awaitApproval(bus, ref, reading.signal).then(
      (record) => {
        if (record) records.set(approvalKey(ref), record);
        dirty = true;
      },
      () => {
        requests.watchOnly = true;
        dirty = true;
      },
    );
  const draw = () => {
    if (!dirty) return;
    dirty = false;
    const lines = renderTree(builder, focus, process.stdout.columns ?? 100, requests);
    process.stdout.write(`${drawn > 0 ? `\x1b[${drawn}A` : ""}\x1b[0J${lines.join("\n")}\n`);
    drawn = lines.length;
  };
  const timer = live ? setInterval(draw, 100) : undefined;
  const lines = new LineWriter(process.stdout);
  const quit = () => reading.abort();
  process.once("SIGINT", quit);
  if (live && process.stdin.isTTY) {
    emitKeypressEvents(process.stdin);
    process.stdin.setRawMode(true);
    process.stdin.on("keypress", (key: string | undefined, info: { ctrl?: boolean; name?: string }) => {
      if (key === "q" || (info.ctrl && info.name === "c")) return quit();
      const pending = firstPending(builder);
      const shown = pending && records.get(approvalKey(pending));
      if (!shown || requests.watchOnly || (key !== "a" && key !== "d")) return;
      void answerApproval(bus, identity(), shown, {
        approved: key === "a",
        via: "troupe observe",
        ...(key === "d" ? { reason: "denied from an observer" } : {}),
      }).catch((error) => log.warn({ err: error }, "could not answer"));
    });
  }
  try {
    const options = {
      ...(runId ? { runId } : {}),
      from: flags.fromStart || runId ? ("start" as const) : ("now" as const),
      follow: true,
      signal: reading.signal,
    };
    for await (const { envelope } of bus.log.read(options)) {
      if (live) {
        const node = builder.apply(envelope);
        if (envelope.type === "approval.requested" && !requests.watchOnly)
          readRequest({ ...envelope, callId: (envelope.data as { callId: string }).callId });
        if (envelope.type === "model.delta" && node) focus = node;
        dirty = true;
      } else {
        lines.print(`${JSON.stringify(envelope)}\n`);
      }
      if (runId && envelope.type === "agent.stopped" && envelope.parentId === undefined) break;
    }
  } finally {
    lines.flush();
    clearInterval(timer);
    if (live) {
      dirty = true;
      draw();
      if (process.stdin.isTTY) process.stdin.setRawMode(false);
      process.stdin.pause();
    }
    process.off("SIGINT", quit);
    await bus.close();
  }
  return 0;
}

/**
 * Lines out in few writes: a run streaming thousands of events a second would otherwise cost a
 * system call per event (writes to a pipe are synchronous). What is gathered goes out when 64 KB
 * have built up or once the events at hand are handled.
 */
class LineWriter {
  #pending: string[] = [];
  #size = 0;
  #scheduled = false;

  constructor(private readonly out: NodeJS.WritableStream) {}

  print(line: string): void {
    this.#pending.push(line);
    this.#size += line.length;
    if (this.#size >= 65_536) this.flush();
    else if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  flush(): void {
    this.#scheduled = false;
    if (this.#pending.length === 0) return;
    this.out.write(this.#pending.join(""));
    this.#pending = [];
    this.#size = 0;
  }
}
