/* `troupe follow-up RUN "…"` and `troupe run --continue [RUN]`: a run goes on with the user's next message. */
import { realpathSync } from "node:fs";
import { resolve as resolvePath } from "node:path";
import type { LoadedConfig } from "../config/load.js";
import type { RunList } from "../daemon/run-index.js";
import type { Logger } from "../log.js";
import { visibleLine } from "../util/visible.js";
import { callApi, connectClient } from "./client.js";
import type { Conversation, ConversationOptions } from "./conversation.js";
import { localRow, storeOf } from "./history.js";
import { ConversationError } from "./local-conversation.js";
import { RUN_EXIT, type RunFlags, sayHowToGoOn } from "./run.js";
import { ttyApprover } from "./tty-approver.js";

const RUN_ID = /^run-[0-9a-z]{26}$/;

/**
 * A conversation with `runId` (or a new run when undefined): with the local run of that id when the
 * data dir has one, else with the daemon's (as `troupe resume` chooses); `--local` keeps it here.
 */
export async function openConversation(
  config: LoadedConfig,
  runId: string | undefined,
  options: ConversationOptions & { local?: boolean | undefined },
  log: Logger,
): Promise<Conversation> {
  if (runId !== undefined && !RUN_ID.test(runId))
    throw new ConversationError(
      `"${visibleLine(runId)}" is no run id: one is run- and 26 letters or digits (troupe runs lists them)`,
    );
  const local = runId === undefined ? options.local : storeOf(config).eventLines(runId) !== undefined;
  if (local || options.local) {
    const { openLocalConversation } = await import("./local-conversation.js");
    return openLocalConversation(config, { ...options, runId }, log);
  }
  const { openDaemonConversation } = await import("./daemon-conversation.js");
  return openDaemonConversation(config, { ...options, runId }, log);
}

/** A directory as its real path, so that two names of one directory compare equal. */
function realPath(dir: string): string {
  try {
    return realpathSync(dir);
  } catch {
    return dir; // gone: it matches nothing that exists
  }
}

/**
 * The newest run of this config that worked in this workspace (`workspace`, else the config's, from
 * the working directory, as a run started here would): its local runs (in the data dir) and, unless
 * `local`, the daemon's when one answers (a daemon run without a workspace of its own works in the
 * daemon's). Said in one line on stderr; a `ConversationError` when there is none.
 */
export async function newestRun(
  config: LoadedConfig,
  where: { local?: boolean | undefined; workspace?: string | undefined },
  log: Logger,
): Promise<string> {
  const here = realPath(resolvePath(where.workspace ?? config.troupe.workspace));
  const store = storeOf(config);
  const rows: Array<{ runId: string; where: string; startedAt: number; task: string; workspace?: string }> =
    [];
  for (const runId of store.runs()) {
    const row = (() => {
      try {
        return localRow(store, runId, log);
      } catch {
        return undefined; // a log that cannot be read is no run to go on with
      }
    })();
    if (row) rows.push(row);
  }
  if (!where.local) {
    const bus = await connectClient(config, "troupe-runs", log, 1000).catch(() => undefined);
    try {
      const list = bus && ((await callApi(bus, config, "runs.list", {}).catch(() => undefined)) as RunList);
      for (const run of list?.runs ?? [])
        rows.push({ ...run, where: "daemon", workspace: run.workspace ?? list?.workspace });
    } finally {
      await bus?.close();
    }
  }
  const newest = rows
    .filter((row) => row.workspace !== undefined && realPath(row.workspace) === here)
    .reduce<(typeof rows)[number] | undefined>(
      (best, row) => (best && best.startedAt >= row.startedAt ? best : row),
      undefined,
    );
  if (!newest)
    throw new ConversationError(
      `no run of this workspace (${visibleLine(here)}) to continue: name one (troupe runs lists them), or start one with troupe run "TASK"`,
    );
  process.stderr.write(
    `troupe: continuing ${newest.where === "local" ? "local " : ""}run ${newest.runId} (the newest in ${visibleLine(here)}): ${visibleLine(newest.task).slice(0, 60)}\n`,
  );
  return newest.runId;
}

/**
 * One turn of `runId` from a script or a terminal, shown as `troupe run` shows a run; its exit code
 * as `troupe run`'s. Ctrl-C aborts the turn (the run stays, to be gone on with again).
 */
export async function followUp(
  config: LoadedConfig,
  runId: string,
  text: string,
  flags: RunFlags,
  log: Logger,
): Promise<number> {
  const interactive = process.stdin.isTTY === true && process.stderr.isTTY === true;
  const conversation = await openConversation(
    config,
    runId,
    {
      local: flags.local,
      json: flags.json,
      waitDaemon: flags.waitDaemon,
      approval: flags.approval,
      asker: interactive ? (shown) => ttyApprover(shown) : undefined,
    },
    log,
  );
  if (flags.approval) conversation.setApproval(flags.approval);
  let interrupts = 0;
  const onSigint = () => {
    interrupts++;
    if (interrupts > 1) process.exit(RUN_EXIT.aborted);
    process.stderr.write("\naborting this turn… (Ctrl-C again to leave at once)\n");
    void conversation.abort().catch(() => {});
  };
  process.on("SIGINT", onSigint);
  try {
    const reason = await conversation.turn(text);
    sayHowToGoOn(runId, reason, flags.json);
    return RUN_EXIT[reason];
  } finally {
    process.off("SIGINT", onSigint);
    await conversation.close();
  }
}
