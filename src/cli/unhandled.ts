import type { Logger } from "../log.js";
import { visible } from "../util/visible.js";

/**
 * For the processes that host runs (the daemon, a worker): a promise rejected with no one to catch
 * it is a bug of Troupe's, said in one line on stderr and in the log, and the process goes on (its
 * runs are on the bus; dying would take every other run down with it). Tests look for the line.
 */
export function reportUnhandledRejections(log: Logger): void {
  process.on("unhandledRejection", (reason) => {
    const message = reason instanceof Error ? `${reason.name}: ${reason.message}` : String(reason);
    log.error({ err: reason }, "unhandled rejection");
    process.stderr.write(
      `troupe: unhandled rejection (a bug in Troupe; please report it): ${visible(message)}\n`,
    );
  });
}
