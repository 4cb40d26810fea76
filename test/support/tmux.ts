import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A program on a terminal of a given size, as a person sees it: tmux runs it on a server of its own
 * (its own socket, no ~/.tmux.conf), `screen()` is what is on the terminal now, `history()` that and
 * everything scrolled off above it.
 */
export class Tmux {
  readonly #dir = mkdtempSync(join(tmpdir(), "troupe-tmux-"));
  readonly #socket = join(this.#dir, "socket");

  private constructor(private readonly env: NodeJS.ProcessEnv) {}

  static start(
    command: string[],
    options: { cwd: string; env: NodeJS.ProcessEnv; columns: number; rows: number },
  ): Tmux {
    const tmux = new Tmux(options.env);
    const line = command.map((word) => `'${word.replaceAll("'", "'\\''")}'`).join(" ");
    tmux.#run(
      "new-session",
      "-d",
      "-x",
      String(options.columns),
      "-y",
      String(options.rows),
      "-c",
      options.cwd,
      `${line}; sleep 600`,
    );
    return tmux;
  }

  screen(): string {
    return this.#run("capture-pane", "-p");
  }

  /** What is on the terminal now with each cell's attributes as SGR sequences (hidden text is `8`). */
  styled(): string {
    return this.#run("capture-pane", "-p", "-e");
  }

  history(): string {
    return this.#run("capture-pane", "-p", "-S", "-");
  }

  keys(...keys: string[]): void {
    this.#run("send-keys", ...keys);
  }

  resize(columns: number, rows: number): void {
    this.#run("resize-window", "-x", String(columns), "-y", String(rows));
  }

  kill(): void {
    try {
      this.#run("kill-server");
    } catch {
      // Already gone.
    }
    rmSync(this.#dir, { recursive: true, force: true });
  }

  #run(...args: string[]): string {
    return execFileSync("tmux", ["-S", this.#socket, "-f", "/dev/null", ...args], {
      env: { ...this.env, TMUX: "" },
      encoding: "utf8",
    });
  }
}
