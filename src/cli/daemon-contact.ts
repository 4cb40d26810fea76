import type { Bus } from "../bus/bus.js";
import { BEAT_MS } from "../daemon/daemon.js";

/** How long without a beat before a client says it lost the daemon. */
const LOST_AFTER_MS = 3 * BEAT_MS;

/**
 * Watches the daemon's beat (`<p>.beat.daemon`) for a client that follows a run: `lost(ms)` once no
 * beat has come for a few seconds (with how long since the last), `back()` when one comes again.
 * A daemon that is quiet and one that is gone look alike in the event log; this tells them apart.
 */
export function watchDaemon(bus: Bus, on: { lost(sinceMs: number): void; back(): void }): { stop(): void } {
  let last = Date.now();
  let away = false;
  const subscription = bus.subscribe(bus.subjects.daemonBeat(), () => {
    last = Date.now();
    if (away) {
      away = false;
      on.back();
    }
  });
  const check = setInterval(() => {
    const since = Date.now() - last;
    if (since < LOST_AFTER_MS) return;
    away = true;
    on.lost(since);
  }, BEAT_MS / 2);
  check.unref();
  return {
    stop: () => {
      clearInterval(check);
      subscription.unsubscribe();
    },
  };
}
