import { type Bus, RemoteError } from "../bus/bus.js";
import type { NatsBus } from "../bus/nats-bus.js";
import type { LoadedConfig } from "../config/load.js";
import { BEAT_MS } from "../daemon/daemon.js";
import { TroupeError } from "../errors.js";
import { callApi } from "./client.js";

/** How long without a beat before a client says it lost the daemon. */
const LOST_AFTER_MS = 3 * BEAT_MS;

/**
 * Watches the daemon's beat (`<p>.beat.daemon`) for a client that follows a run: `lost(ms)` once no
 * beat has come for a few seconds (with how long since the last), `back()` when one comes again,
 * `started()` when a beat comes from a daemon not seen before, or first from one that started after
 * the watch began (one restarted, however quickly; a
 * standby beating beside the first is seen once). A daemon that is quiet and one that is gone look
 * alike in the event log; this tells them apart.
 */
export function watchDaemon(
  bus: Bus,
  on: { lost?(sinceMs: number): void; back?(): void; started?(): void },
): { stop(): void } {
  const began = Date.now();
  let last = began;
  let away = false;
  // Each daemon by its pid and start: the first beat's is the one the client began with.
  const seen = new Set<string>();
  const subscription = bus.subscribe(bus.subjects.daemonBeat(), (envelope) => {
    // A person's role can have the daemon's answer to its request sent here (its reply subject):
    // that is no beat.
    const { pid, since } = (envelope.data ?? {}) as { pid?: unknown; since?: unknown };
    if (envelope.type !== "daemon.beat" || typeof pid !== "number" || typeof since !== "number") return;
    last = Date.now();
    if (away) {
      away = false;
      on.back?.();
    }
    const beating = `${pid}@${since}`;
    if (seen.has(beating)) return;
    // A daemon other than the first one heard, or the first one heard when it started after this
    // watch began: the one the client asked went away before its first beat came.
    if (seen.size > 0 || since > began) on.started?.();
    seen.add(beating);
  });
  const check = setInterval(() => {
    const since = Date.now() - last;
    if (since < LOST_AFTER_MS) return;
    away = true;
    on.lost?.(since);
  }, BEAT_MS / 2);
  check.unref();
  return {
    stop: () => {
      clearInterval(check);
      subscription.unsubscribe();
    },
  };
}

/** A run the daemon does not know, followed by a client: nobody will finish it, so nothing is waited for. */
export class RunUnknownError extends TroupeError {
  override name = "RunUnknownError";
}

/**
 * For a client that follows a run through the daemon, given to `watchDaemon` as its `started`: each
 * daemon that starts meanwhile is asked whether it knows the run (it resumes the runs it finds before
 * it beats). When one does not, `reading` is aborted and `error()` says why, for the client to end on.
 */
export function endIfUnknown(
  bus: NatsBus,
  config: LoadedConfig,
  runId: string,
  reading: AbortController,
): { started(): void; error(): RunUnknownError | undefined } {
  let unknown: RunUnknownError | undefined;
  return {
    started: () =>
      void unknownRun(bus, config, runId).then((error) => {
        if (!error || unknown) return;
        unknown = error;
        reading.abort();
      }),
    error: () => unknown,
  };
}

/** The error to end on when the daemon that answers says it has no such run; undefined when it knows it, or cannot be asked now. */
async function unknownRun(
  bus: NatsBus,
  config: LoadedConfig,
  runId: string,
): Promise<RunUnknownError | undefined> {
  try {
    await callApi(bus, config, "runs.get", { runId });
    return undefined;
  } catch (error) {
    if (!(error instanceof RemoteError && error.remoteName === "RequestRefusedError")) return undefined;
    if (!error.message.endsWith(`: no run ${runId}`)) return undefined;
    return new RunUnknownError(
      `run ${runId}: the daemon restarted and has no record of it, so nothing will finish it here (troupe status lists the runs it has)`,
      { cause: error },
    );
  }
}
