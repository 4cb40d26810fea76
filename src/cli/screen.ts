import { Writable } from "node:stream";
import pino from "pino";
import type { Logger } from "../log.js";

/**
 * The whole terminal for a live view, as `top` and `less` have it: the alternate screen, each frame
 * drawn from the top left over the last (every line cleared to its end, the rest of the screen
 * below it), so a resize or a shorter frame leaves nothing behind and nothing scrolls into the
 * history. On `close` the normal screen comes back with the last frame printed on it.
 */
export class Screen {
  #last: string[] = [];
  #open = false;

  constructor(private readonly out: NodeJS.WriteStream) {}

  /** Its size; a terminal that gives none (a pty nobody sized says 0×0) is taken for 100×24. */
  get size(): { columns: number; rows: number } {
    return { columns: this.out.columns || 100, rows: this.out.rows || 24 };
  }

  draw(lines: string[]): void {
    if (!this.#open) {
      this.#open = true;
      this.out.write("\x1b[?1049h\x1b[?25l");
    }
    this.#last = lines;
    this.out.write(`\x1b[?2026h\x1b[H${lines.map((line) => `${line}\x1b[K`).join("\r\n")}\x1b[J\x1b[?2026l`);
  }

  close(): void {
    if (!this.#open) return;
    this.#open = false;
    this.out.write(`\x1b[?25h\x1b[?1049l${this.#last.join("\n")}\n`);
  }
}

/**
 * A logger for a command whose view owns the terminal: lines at `level` or above become one status
 * line (`say(text)`) instead of being written over the view.
 */
export function viewLogger(level: string, say: (text: string) => void): Logger {
  const sink = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n")) {
        if (!line) continue;
        try {
          const record = JSON.parse(line) as { level?: number; msg?: string };
          say(`${(record.level ?? 40) >= 50 ? "error" : "warning"}: ${record.msg ?? line}`);
        } catch {
          say(line);
        }
      }
      done();
    },
  });
  return pino({ level, base: undefined }, sink);
}
