import { createInterface } from "node:readline/promises";
import type { ApprovalAnswer, ApprovalRequest, Approver } from "../safety/approver.js";

/**
 * Asks the person at the terminal: y (once), n (deny; anything after is the reason the model sees),
 * a (always: this tool for the rest of the run). Requests are asked one at a time, each once
 * `shown(callId)` resolves: when the run's output has caught up with it, so the question comes
 * after everything that led to it.
 */
export function ttyApprover(
  shown: (callId: string) => Promise<void> = async () => {},
  input: NodeJS.ReadableStream = process.stdin,
  output: NodeJS.WritableStream = process.stderr,
): Approver {
  const always = new Set<string>();
  let queue: Promise<unknown> = Promise.resolve();
  const ask = async (request: ApprovalRequest, signal: AbortSignal): Promise<ApprovalAnswer> => {
    if (always.has(request.tool)) return { approved: true, by: "user", reason: "always allowed in this run" };
    await shown(request.callId);
    const rl = createInterface({ input, output, terminal: false });
    try {
      const answer = await rl.question(
        `${describeRequest(request)}
? allow ${request.tool}? [y]es / [n]o [reason] / [a]lways: `,
        { signal },
      );
      const [word = "", ...rest] = answer.trim().split(/\s+/);
      const choice = word.toLowerCase();
      if (choice === "a" || choice === "always") {
        always.add(request.tool);
        return { approved: true, by: "user", reason: "always allowed in this run" };
      }
      if (choice === "y" || choice === "yes") return { approved: true, by: "user" };
      return { approved: false, by: "user", reason: rest.join(" ") || "the user said no" };
    } finally {
      rl.close();
    }
  };
  return {
    decide(request, signal) {
      const next = queue.then(() => ask(request, signal));
      queue = next.catch(() => {});
      return next;
    },
  };
}

/** A request as a person reads it before deciding: the tool, its effect, the exact command or diff, the paths. */
export function describeRequest(request: ApprovalRequest): string {
  const paths = request.paths.length ? `\n  paths: ${request.paths.join(", ")}` : "";
  const detail = request.detail
    .split("\n")
    .map((line) => `  │ ${line}`)
    .join("\n");
  return `${request.tool} (${request.effect}) wants to:\n${detail}${paths}`;
}
