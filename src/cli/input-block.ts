import { clearScreenDown, cursorTo, type Interface, moveCursor } from "node:readline";

/** What a renderer writes to: a terminal's stream, or one that keeps a chat's input below its output. */
export type Output = Pick<NodeJS.WriteStream, "write"> & { isTTY?: boolean; columns?: number };

/**
 * While a chat's turn runs, the bottom of the terminal is the person's: the run's status line (the
 * spinner), then the prompt and what they have typed so far. The run's output goes above it: the
 * block is taken off before each write and drawn again once the output's line has ended, so
 * neither draws over the other. What readline echoes reaches the terminal only while the block is
 * drawn; a key typed while the output's line is open ends that line, and the block comes back.
 */
export class InputBlock {
  #status: string | undefined;
  /** The block is on the terminal, the cursor in it (readline's idea of its rows holds). */
  #shown = false;
  /** Writing the block now: readline's writes go through. */
  #drawing = false;
  /** A turn runs: the block is kept; otherwise every write goes straight through. */
  #active = false;
  /** The last output left its line open: the block waits below a line that has ended. */
  #open = false;

  #rl: Interface | undefined;

  constructor(
    private readonly terminal: NodeJS.WriteStream,
    private readonly prompt: string,
    /** Whether the block may be drawn now: not while a question waits for its answer on its own line. */
    private readonly allowed: () => boolean,
  ) {}

  /**
   * Readline's output: its echo and prompts, held back while the block is off the terminal (but for
   * the answer to a question, typed on the question's line).
   */
  readlineOutput(): NodeJS.WriteStream {
    return this.#gated(this.terminal, (chunk) =>
      !this.#active || this.#shown || this.#drawing || !this.allowed() ? this.terminal.write(chunk) : true,
    );
  }

  /** The prompt whose line the block keeps: made on `readlineOutput()`. */
  attach(rl: Interface): void {
    this.#rl = rl;
  }

  get rl(): Interface {
    if (!this.#rl) throw new Error("InputBlock: attach(rl) first");
    return this.#rl;
  }

  /** `stream` for the run's output: the block taken off before each write, drawn again after a whole line. */
  around(stream: NodeJS.WriteStream): Output {
    return this.#gated(stream, (chunk) => {
      if (!this.#active) return stream.write(chunk);
      this.#hide();
      const written = stream.write(chunk);
      const text = String(chunk);
      if (text) this.#open = !text.endsWith("\n");
      this.#show();
      return written;
    });
  }

  /** A turn starts: the block is kept below its output from now on. */
  start(): void {
    this.#active = true;
    this.#open = false;
  }

  /** The turn ended: the block goes, and the prompt is the caller's again. */
  end(): void {
    this.#hide();
    this.#status = undefined;
    this.#active = false;
    this.rl.setPrompt(this.prompt);
  }

  /** The status line above the prompt (the spinner's frame), or none. */
  status(text: string | undefined): void {
    if (text === this.#status) return;
    this.#hide();
    this.#status = text;
    this.#show();
  }

  /** After a key: what it typed is shown, below an output line it ends if need be. */
  typed(): void {
    if (!this.#active || this.#shown || !this.rl.line || !this.allowed()) return;
    if (this.#open) this.terminal.write("\n");
    this.#open = false;
    this.#show();
  }

  /**
   * A line was entered while the block was drawn: readline has moved below it. The block is taken
   * off, the line kept above as the prompt and what was typed, and the block drawn again below.
   */
  entered(line: string): void {
    if (!this.#active || !this.#shown) return;
    const columns = this.terminal.columns || 100;
    const rows = (this.#status ? 1 : 0) + Math.floor((this.prompt.length + line.length) / columns) + 1;
    cursorTo(this.terminal, 0);
    moveCursor(this.terminal, 0, -rows);
    clearScreenDown(this.terminal);
    this.terminal.write(`${this.prompt}${line}\n`);
    this.#shown = false;
    this.#show();
  }

  #show(): void {
    if (this.#shown || this.#open || !this.allowed() || (!this.#status && !this.rl.line)) return;
    this.#drawing = true;
    try {
      this.rl.setPrompt(this.#status ? `${this.#status}\n${this.prompt}` : this.prompt);
      this.rl.prompt(true);
      this.#shown = true;
    } finally {
      this.#drawing = false;
    }
  }

  #hide(): void {
    if (!this.#shown) return;
    cursorTo(this.terminal, 0);
    moveCursor(this.terminal, 0, -this.rl.getCursorPos().rows);
    clearScreenDown(this.terminal);
    // Readline redraws from the row its cursor was on: it is at the top of where the block was.
    (this.rl as unknown as { prevRows: number }).prevRows = 0;
    this.#shown = false;
  }

  /** `stream` with its writes through `write`; everything else of it as it is. */
  #gated(stream: NodeJS.WriteStream, write: (chunk: string | Uint8Array) => boolean): NodeJS.WriteStream {
    return new Proxy(stream, {
      get(target, key) {
        if (key === "write") return write;
        const value = Reflect.get(target, key, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  }
}
