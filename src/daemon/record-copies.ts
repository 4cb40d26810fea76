import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { assertToken, isToken } from "../bus/subjects.js";
import { privateDir } from "../util/secret-files.js";

/**
 * The daemon's own copy of each run record, sealed as in the bucket, one file a run in its data dir
 * (`<dataDir>/run-records/<prefix>/<runId>.json`): whoever may read a stream can have the server
 * write over a record in the bucket (a reply aimed at its key), and nobody but the daemon writes
 * here. Each is written to a temporary file, fsynced and renamed, so a crash leaves the old copy or
 * the new one; the directory is 0700 and the files 0600.
 */
export class RecordCopies {
  readonly #dir: string;

  constructor(dir: string) {
    this.#dir = privateDir(dir);
  }

  write(runId: string, value: unknown): void {
    const file = this.#file(runId);
    const temporary = `${file}.${process.pid}.tmp`;
    const fd = openSync(temporary, "w", 0o600);
    try {
      writeSync(fd, JSON.stringify(value));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temporary, file);
  }

  /** The copy's value as it was written, or undefined when there is none (or it is not JSON). */
  read(runId: string): unknown {
    if (!isToken(runId)) return undefined;
    try {
      return JSON.parse(readFileSync(this.#file(runId), "utf8"));
    } catch {
      return undefined;
    }
  }

  remove(runId: string): void {
    rmSync(this.#file(runId), { force: true });
  }

  /** A run id is a plain name (the API's checks, and the bucket's keys), never a path out of the directory. */
  #file(runId: string): string {
    return join(this.#dir, `${assertToken("run id", runId)}.json`);
  }
}
