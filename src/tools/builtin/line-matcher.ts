import { Worker } from "node:worker_threads";

/** How long one grep call's pattern may run in all, across its files. */
export const PATTERN_BUDGET_MS = 5000;

/** The pattern took longer than the budget: the worker running it was ended. */
export class PatternTooSlowError extends Error {
  override name = "PatternTooSlowError";
}

// The matching, on a thread of its own: a pattern that backtracks without end (`(a+)+$`) would
// otherwise hold the agent's thread, and with it Ctrl-C, budgets and heartbeats.
const SOURCE = `
const { parentPort } = require("node:worker_threads");
parentPort.on("message", ({ pattern, flags, text, max }) => {
  const regex = new RegExp(pattern, flags);
  const lines = text.split("\\n");
  const found = [];
  for (let i = 0; i < lines.length && found.length < max; i++) if (regex.test(lines[i])) found.push(i);
  parentPort.postMessage(found);
});
`;

/**
 * Matches a model's regular expression against files' lines in a worker thread, within one budget
 * for the whole call; past it the worker is ended and `PatternTooSlowError` thrown. The pattern is
 * checked (compiled) on the caller's thread first, where a bad one fails at once.
 */
export class LineMatcher {
  #worker: Worker | undefined;
  readonly #deadline: number;

  constructor(
    private readonly pattern: string,
    private readonly flags: string,
    budgetMs = PATTERN_BUDGET_MS,
  ) {
    this.#deadline = Date.now() + budgetMs;
  }

  /** The indices of the lines of `text` that match, at most `max`. */
  match(text: string, max: number, signal?: AbortSignal): Promise<number[]> {
    this.#worker ??= new Worker(SOURCE, { eval: true });
    const worker = this.#worker;
    return new Promise((resolve, reject) => {
      const done = (end: () => void) => {
        clearTimeout(timer);
        worker.off("message", answered);
        worker.off("error", failed);
        signal?.removeEventListener("abort", aborted);
        end();
      };
      const answered = (found: number[]) => done(() => resolve(found));
      const failed = (error: Error) => done(() => reject(error));
      const stop = (error: Error) => {
        this.close();
        failed(error);
      };
      const aborted = () => stop(new Error("aborted"));
      const timer = setTimeout(
        () => stop(new PatternTooSlowError(`the pattern took longer than ${PATTERN_BUDGET_MS / 1000} s`)),
        Math.max(0, this.#deadline - Date.now()),
      );
      worker.on("message", answered);
      worker.on("error", failed);
      signal?.addEventListener("abort", aborted, { once: true });
      worker.postMessage({ pattern: this.pattern, flags: this.flags, text, max });
    });
  }

  close(): void {
    void this.#worker?.terminate();
    this.#worker = undefined;
  }
}
