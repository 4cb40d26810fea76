import { closeSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { UserError } from "../errors.js";
import { privateDir } from "../util/secret-files.js";

/** Another live daemon holds the data dir: one line naming it, and how to go on. */
export class DataDirHeldError extends UserError {
  override name = "DataDirHeldError";
}

interface Holder {
  pid: number;
  /** When the process started (/proc's field 22): a pid used again by another process is not the holder. */
  started: string;
}

/**
 * One daemon per data dir: `<dataDir>/daemon.pid` is made exclusively and names the daemon holding
 * it. A second daemon would share the first one's nats-server, adopt it as its own and stop it when
 * it stopped, leaving the first reconnecting for good; it is refused instead. A file whose process is
 * gone (a daemon killed) is taken over.
 */
export function holdDataDir(data: string): { release(): void } {
  const file = join(privateDir(data), "daemon.pid");
  const me: Holder = { pid: process.pid, started: startTime(process.pid) ?? "" };
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, "wx", 0o600);
      writeSync(fd, JSON.stringify(me));
      closeSync(fd);
      return { release: () => releaseIfMine(file, me) };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const holder = readHolder(file);
    if (holder && isAlive(holder))
      throw new DataDirHeldError(
        `another troupe daemon (pid ${holder.pid}) uses the data dir ${data}: stop it first (kill ${holder.pid}), or give this one a data dir of its own (TROUPE_DATA_DIR or dataDir in troupe.yaml)`,
      );
    rmSync(file, { force: true });
  }
  throw new DataDirHeldError(`another troupe daemon is starting on the data dir ${data}: try again`);
}

function readHolder(file: string): Holder | undefined {
  try {
    const holder = JSON.parse(readFileSync(file, "utf8")) as Holder;
    return Number.isInteger(holder.pid) && typeof holder.started === "string" ? holder : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(holder: Holder): boolean {
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
  const started = startTime(holder.pid);
  return started === undefined || holder.started === "" || started === holder.started;
}

/** A process's start time in clock ticks since boot, where /proc has it. */
function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name, field 2, is in parentheses and may hold spaces: count from after it.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

function releaseIfMine(file: string, me: Holder): void {
  const holder = readHolder(file);
  if (holder?.pid === me.pid && holder.started === me.started) rmSync(file, { force: true });
}
