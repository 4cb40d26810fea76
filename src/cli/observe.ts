import { emitKeypressEvents } from "node:readline";
import { RunTreeBuilder } from "../actors/run-tree.js";
import { answerApproval, awaitApproval, listApprovals } from "../approvals/answer-approval.js";
import { type ApprovalRecord, type ApprovalRef, approvalKey } from "../approvals/approval-record.js";
import { formOf } from "../approvals/question-form.js";
import type { NatsBus } from "../bus/nats-bus.js";
import { type ConfigChoice, loadConfig } from "../config/load.js";
import { dataDir } from "../config/paths.js";
import { isEvent } from "../events/agent-events.js";
import type { Envelope } from "../events/envelope.js";
import type { Logger } from "../log.js";
import { localIdentity } from "../trust/approvers.js";
import { jsonVisible } from "../util/visible.js";
import { APPROVER_ROLES, connectClient } from "./client.js";
import { endIfUnknown, watchDaemon } from "./daemon-contact.js";
import { Screen, viewLogger } from "./screen.js";
import {
  agentOrder,
  nodeKey,
  pendingApprovals,
  renderFrame,
  type ShownRequests,
  type ViewState,
} from "./tree-view.js";

export interface ObserveFlags {
  fromStart?: boolean;
  json?: boolean;
}

/**
 * Applies a run's events from its start up to `until` (not included), or to the end of its log: what
 * an observer that came in while it ran missed. Each is also handed to `seen`.
 */
async function catchUp(
  bus: Pick<NatsBus, "eventLog">,
  builder: RunTreeBuilder,
  run: { runId: string; until?: Envelope | undefined; signal: AbortSignal },
  seen: (earlier: Envelope) => void,
): Promise<void> {
  const { runId, until, signal } = run;
  for await (const { envelope } of bus.eventLog.read({ runId, from: "start", signal })) {
    if (envelope.id === until?.id) break;
    builder.apply(envelope);
    seen(envelope);
  }
}

/**
 * `troupe observe [RUN_ID]`: follows one run, or every run, from another terminal or host. On a
 * terminal it shows the live tree and answers approvals with a key; otherwise (or with --json) it
 * prints one event per line. Ends when the run ends (with a RUN_ID), or on q / Ctrl-C.
 */
export async function runObserve(
  where: ConfigChoice,
  runId: string | undefined,
  flags: ObserveFlags,
  log: Logger,
): Promise<number> {
  const config = loadConfig(where);
  const live = !flags.json && process.stdout.isTTY === true;
  // On a terminal the view owns it: what would be logged becomes its status line.
  const say = (text: string) => {
    view.status = text;
    dirty = true;
  };
  const bus = await connectClient(
    config,
    "troupe-observe",
    live ? viewLogger(log.level, say) : log,
    3000,
    APPROVER_ROLES,
  );
  const identity = () => localIdentity(dataDir(config.troupe.dataDir));
  const keys = live && process.stdin.isTTY === true;
  const reading = new AbortController();
  const builder = new RunTreeBuilder();
  const { url, prefix } = config.troupe.nats;
  let dirty = true;
  const view: ViewState = {
    header: `troupe observe · ${url} · prefix ${prefix}${runId ? ` · run ${runId}` : ""}`,
    selected: undefined,
    speaker: undefined,
    status: undefined,
  };
  // The requests behind pending approvals, read from the bucket their hosts write.
  const records = new Map<string, ApprovalRecord>();
  const requests: ShownRequests = {
    record: (ref) => records.get(approvalKey(ref)),
    watchOnly: !keys,
  };
  const screen = live ? new Screen(process.stdout) : undefined;
  const draw = () => {
    if (!screen || !dirty) return;
    dirty = false;
    screen.draw(renderFrame(builder, view, screen.size, requests));
  };
  const redraw = () => {
    dirty = true;
    draw();
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
  const timer = live ? setInterval(draw, 100) : undefined;
  // One run followed to its end: a daemon that restarts without it will not end it, said, not waited for.
  const unknown = runId ? endIfUnknown(bus, config, runId, reading) : undefined;
  const contact =
    live || unknown
      ? watchDaemon(bus, {
          ...(live && {
            lost: (ms: number) => {
              view.status = `lost contact with the daemon (last seen ${Math.round(ms / 1000)} s ago); waiting…`;
              dirty = true;
            },
            back: () => {
              view.status = undefined;
              dirty = true;
            },
          }),
          ...(unknown && { started: unknown.started }),
        })
      : undefined;
  if (live) process.stdout.on("resize", redraw);
  const lines = new LineWriter(process.stdout);
  const quit = () => reading.abort();
  process.once("SIGINT", quit);
  if (keys) {
    emitKeypressEvents(process.stdin);
    process.stdin.setRawMode(true);
    process.stdin.on("keypress", (key: string | undefined, info: { ctrl?: boolean; name?: string }) => {
      if (key === "q" || (info.ctrl && info.name === "c")) return quit();
      if (info.name === "up" || info.name === "down" || key === "k" || key === "j") {
        view.selected = step(builder, view, info.name === "up" || key === "k" ? -1 : 1);
        return redraw();
      }
      if (key !== "a" && key !== "d") return;
      const pending = pendingApprovals(builder);
      const picked = view.selected ?? (view.speaker && nodeKey(view.speaker));
      const target = pending.find((p) => nodeKey(p.node) === picked) ?? pending[0];
      const asked = target && approvalKey({ ...target.node, callId: target.callId });
      const shown = asked && records.get(asked);
      if (!shown || requests.watchOnly) return;
      // A server's question with fields is answered where they can be typed; `d` declines it here.
      const form = formOf(shown.request);
      if (key === "a" && form && form.fields.length > 0) {
        view.status = `a question with a form: answer it with troupe approve ${shown.request.callId} --allow --field NAME=VALUE (one for each field), or d to decline`;
        return redraw();
      }
      // Allowed only as shown whole on the screen: a request seen in part is denied or read elsewhere.
      if (key === "a" && view.allowable !== asked) {
        view.status = `not all of this request is on the screen: see it whole with troupe approve ${shown.request.callId}`;
        return redraw();
      }
      void answerApproval(bus, identity(), shown, {
        approved: key === "a",
        via: "troupe observe",
        reason: key === "d" ? (form ? "declined from an observer" : "denied from an observer") : undefined,
      }).then(
        ({ outcome, why }) => {
          if (outcome === "rejected") view.status = `the run's host refused the answer: ${why}`;
          if (outcome === "closed") view.status = "too late: the agent stopped before anyone answered";
          dirty = true;
        },
        (error) => {
          view.status = `could not answer: ${(error as Error).message}`;
          dirty = true;
        },
      );
    });
  }
  try {
    const options = {
      ...(runId ? { runId } : {}),
      from: flags.fromStart || runId ? ("start" as const) : ("now" as const),
      follow: true,
      signal: reading.signal,
    };
    // Following from now, a run already going shows whole: one that waits on a person is read from
    // its start at once, any other the first time it says anything. An event read twice (in the
    // catch-up and live) is applied once.
    const caughtUp = new Set<string>();
    const applied = new Set<string>();
    const events = bus.eventLog.read(options)[Symbol.asyncIterator]();
    const catchUpRun = async (runId: string, until?: Envelope) => {
      caughtUp.add(runId);
      await catchUp(bus, builder, { runId, until, signal: reading.signal }, (earlier) => {
        applied.add(earlier.id);
        if (isEvent(earlier, "approval.requested") && !requests.watchOnly)
          readRequest({ ...earlier, callId: earlier.data.callId });
      });
      dirty = true;
    };
    // Asked first, so that the live read has begun before the catch-up reads to the log's end.
    let first: ReturnType<typeof events.next> | undefined = events.next();
    if (live && options.from === "now")
      for (const record of await listApprovals(bus).catch(() => []))
        if (record.status === "pending" && !caughtUp.has(record.request.runId))
          await catchUpRun(record.request.runId);
    for (;;) {
      const next = await (first ?? events.next());
      first = undefined;
      if (next.done) break;
      const { envelope, json } = next.value;
      if (applied.delete(envelope.id)) continue;
      if (live && options.from === "now" && !caughtUp.has(envelope.runId)) {
        const begins = envelope.type === "agent.started" && envelope.parentId === undefined;
        if (begins) caughtUp.add(envelope.runId);
        else await catchUpRun(envelope.runId, envelope);
      }
      if (live) {
        const node = builder.apply(envelope);
        const spoke =
          envelope.type === "model.delta" ||
          envelope.type === "model.reasoning" ||
          (isEvent(envelope, "agent.stopped") && envelope.data.reason === "refused");
        if (spoke && node) view.speaker = node;
        if (isEvent(envelope, "model.retrying") && node) {
          const { error, attempt, maxRetries } = envelope.data;
          view.status = `${node.name}: ${error}; retrying (${attempt}/${maxRetries})`;
        }
        if (envelope.type === "model.completed" && view.status?.startsWith(`${node?.name}: `))
          view.status = undefined;
        if (isEvent(envelope, "approval.requested") && !requests.watchOnly)
          readRequest({ ...envelope, callId: envelope.data.callId });
        dirty = true;
      } else {
        lines.print(`${jsonVisible(json ?? JSON.stringify(envelope))}\n`);
      }
      if (runId && envelope.type === "agent.stopped" && envelope.parentId === undefined) break;
    }
  } finally {
    lines.flush();
    clearInterval(timer);
    contact?.stop();
    if (screen) {
      redraw();
      screen.close();
      process.stdout.off("resize", redraw);
    }
    if (keys) {
      process.stdin.setRawMode(false);
      process.stdin.pause();
    }
    process.off("SIGINT", quit);
    await bus.close();
  }
  const lost = unknown?.error();
  if (lost) throw lost;
  return 0;
}

/** The agent one up or down the tree from the picked one (the first or last when none is). */
function step(builder: RunTreeBuilder, view: ViewState, by: -1 | 1): string | undefined {
  const order = agentOrder(builder);
  if (order.length === 0) return undefined;
  const current = view.selected ?? (view.speaker && nodeKey(view.speaker));
  const at = order.findIndex((node) => nodeKey(node) === current);
  const next =
    at === -1 ? (by === 1 ? 0 : order.length - 1) : Math.min(order.length - 1, Math.max(0, at + by));
  const node = order[next];
  return node && nodeKey(node);
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
