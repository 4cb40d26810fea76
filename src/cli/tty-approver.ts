import { createInterface } from "node:readline/promises";
import type { ApprovalAnswer, ApprovalRequest, Approver } from "../approvals/approver.js";
import { allowedBy, commandSubject } from "../approvals/permissions.js";
import { type Answers, fieldValue, formOf, type QuestionForm } from "../approvals/question-form.js";
import { type PermissionPattern, parsePattern } from "../config/permission-pattern.js";
import { TroupeError } from "../errors.js";
import { visibleLine } from "../util/visible.js";
import type { ProjectRules } from "./project-rules.js";
import { describeRequest } from "./request-text.js";

/** An approver at this terminal, whose question can be withdrawn when the request is decided elsewhere. */
export interface TtyApprover extends Approver {
  /**
   * The request of `callId` was decided somewhere else: the question is cleared if it is being
   * asked, and never asked if it waits its turn. Its `decide` rejects.
   */
  cancel(callId: string): void;
  /**
   * A status line (reconnecting, the daemon back): on a line of its own, never glued to an open
   * question, which is asked again below it.
   */
  say(line: string): void;
  /** A question is open: the next line typed is its answer. */
  asking(): boolean;
}

export class QuestionWithdrawnError extends TroupeError {
  override name = "QuestionWithdrawnError";
}

/**
 * Asks the person at the terminal: y (once), n (deny; anything after is the reason the model sees),
 * a (always: this tool's calls that stay in the sandbox, for the rest of the run), and with `project`
 * A (always, in this project: the allow rule `project.ruleFor` gives is saved in troupe.yaml, and
 * covers the rest of the run too). A call that would leave the sandbox (`escalation`) is asked every
 * time: no "always" covers it, `a` to it allows that call only, and `A` is not offered. Anything
 * else, Enter included, is asked again: there is no default. Requests are asked one at a time, each
 * once `shown(callId)` resolves: when the run's output has caught up with it, so the question comes
 * after everything that led to it.
 */
export function ttyApprover(
  shown: (callId: string) => Promise<void> = async () => {},
  input: NodeJS.ReadableStream = process.stdin,
  output: NodeJS.WritableStream = process.stderr,
  project?: ProjectRules,
): TtyApprover {
  const always = new Set<string>();
  const saved: PermissionPattern[] = [];
  const withdrawn = new Set<string>();
  // On a terminal, what was typed before a question is not its answer: a model's text can draw a
  // question of its own, and a `y` typed to that would otherwise answer the real one that follows.
  const person = (input as { isTTY?: boolean }).isTTY === true;
  const lines = lineReader(input, person);
  let asking: { callId: string; stop: AbortController; question: string } | undefined;
  let queue: Promise<unknown> = Promise.resolve();
  const ask = async (request: ApprovalRequest, signal: AbortSignal): Promise<ApprovalAnswer> => {
    await shown(request.callId);
    if (withdrawn.has(request.callId))
      throw new QuestionWithdrawnError(`${request.callId} was decided elsewhere`);
    const form = formOf(request);
    if (form) return askForm(request, form, signal);
    const escalation = request.escalation !== undefined;
    if (always.has(request.tool) && !escalation)
      return { approved: true, by: "user", reason: "always allowed in this run" };
    const rule = escalation ? undefined : project?.ruleFor(request);
    const covering =
      escalation || saved.length === 0 ? undefined : allowedBy(saved, request.tool, subjectOf(request));
    if (covering)
      return { approved: true, by: "user", reason: `always allowed in this project: "${covering.text}"` };
    const question = `? allow ${visibleLine(request.tool)} (${visibleLine(request.callId)})? y = yes, n [reason] = no, ${escalation ? "a = this once (it leaves the sandbox)" : "a = always"}${rule ? `, A = always in this project (${visibleLine(rule)})` : ""}: `;
    return prompted(request, question, signal, async (read) => {
      for (;;) {
        const [word = "", ...rest] = (await read()).trim().split(/\s+/);
        if (rule && project && word === "A") return saveRule(project, rule);
        switch (word.toLowerCase()) {
          case "y":
          case "yes":
            return { approved: true, by: "user" };
          case "n":
          case "no":
            return { approved: false, by: "user", reason: rest.join(" ") || "the user said no" };
          case "a":
          case "always":
            if (escalation)
              return { approved: true, by: "user", reason: "allowed once: it leaves the sandbox" };
            always.add(request.tool);
            return { approved: true, by: "user", reason: "always allowed in this run" };
        }
        output.write(
          `? ${word ? `"${visibleLine(word)}" is not an answer: ` : ""}y, n [reason]${rule ? ", a or A" : " or a"}: `,
        );
      }
    });
  };
  /**
   * Puts `question` about `request` at the terminal and runs `answer` with a reader of the lines
   * typed after it (what was typed before is dropped) and a way to say which line it asks now. A
   * question withdrawn (decided elsewhere) fails with QuestionWithdrawnError; one no longer waited
   * for (the agent stopped, its time for waiting ran out) is cleared, and the run's next line says why.
   */
  const prompted = async <T>(
    request: ApprovalRequest,
    question: string,
    signal: AbortSignal,
    answer: (read: () => Promise<string>, asks: (line: string) => void) => Promise<T>,
  ): Promise<T> => {
    const stop = new AbortController();
    const current = { callId: request.callId, stop, question };
    asking = current;
    const read = async () => {
      const line = await lines.next(AbortSignal.any([signal, stop.signal]));
      if (line === undefined) throw new Error("the terminal closed before an answer");
      return line;
    };
    try {
      output.write(`${describeRequest(request)}\n${question}`);
      if (person && lines.dropTyped() > 0)
        output.write(`\n(what was typed before this question was ignored: answer it now)\n${question}`);
      return await answer(read, (line) => {
        current.question = line;
      });
    } catch (error) {
      if (stop.signal.aborted) throw new QuestionWithdrawnError(`${request.callId} was decided elsewhere`);
      if (signal.aborted) output.write("\r\x1b[K");
      throw error;
    } finally {
      asking = undefined;
    }
  };
  /**
   * A server's question: y fills in its form, a field a line (each checked as it is typed, an optional
   * one left empty skipped), and answers it; n [reason] declines. No "always": each is asked.
   */
  const askForm = (request: ApprovalRequest, form: QuestionForm, signal: AbortSignal) =>
    prompted(
      request,
      `? answer it (${visibleLine(request.callId)})? y = fill in the form, n [reason] = decline: `,
      signal,
      async (read, asks): Promise<ApprovalAnswer> => {
        for (;;) {
          const [word = "", ...rest] = (await read()).trim().split(/\s+/);
          if (/^(n|no)$/i.test(word))
            return { approved: false, by: "user", reason: rest.join(" ") || "the user declined" };
          if (/^(y|yes)$/i.test(word)) break;
          output.write(`? ${word ? `"${visibleLine(word)}" is not an answer: ` : ""}y or n [reason]: `);
        }
        const answers: Answers = {};
        for (const field of form.fields) {
          const label = `  ${visibleLine(field.name)}${field.required ? "" : " (Enter to skip)"}: `;
          asks(label);
          output.write(label);
          for (;;) {
            const text = await read();
            if (text.trim() === "" && !field.required) break;
            const value = fieldValue(field, text);
            if ("value" in value) {
              answers[field.name] = value.value;
              break;
            }
            output.write(`  ${visibleLine(value.problem)}\n${label}`);
          }
        }
        return { approved: true, by: "user", reason: JSON.stringify(answers) };
      },
    );
  /** `A`: the rule saved in troupe.yaml and kept for the run; said when it could not be saved, and kept all the same. */
  const saveRule = (rules: ProjectRules, rule: string): ApprovalAnswer => {
    saved.push(parsePattern(rule));
    try {
      rules.save(rule);
      output.write(`(permissions.allow "${visibleLine(rule)}" saved in ${visibleLine(rules.file)})\n`);
      return { approved: true, by: "user", reason: `always allowed in this project: "${rule}"` };
    } catch (error) {
      if (!(error instanceof TroupeError)) throw error;
      output.write(`troupe: ${visibleLine(error.message)}; allowed for this run only\n`);
      return { approved: true, by: "user", reason: `always allowed in this run: "${rule}"` };
    }
  };
  return {
    decide(request, signal) {
      const next = queue.then(() => ask(request, signal));
      queue = next.catch(() => {});
      return next;
    },
    say(line) {
      if (asking) output.write(`\n${line}\n${asking.question}`);
      else output.write(`${line}\n`);
    },
    asking: () => asking !== undefined,
    cancel(callId) {
      withdrawn.add(callId);
      if (asking?.callId !== callId) return;
      // The question is the line the cursor is on: clear it, and what was typed on it.
      output.write("\r\x1b[K");
      asking.stop.abort();
    },
  };
}

/** What a saved rule is matched on: a shell call's command; another tool's rule is the tool whole. */
function subjectOf(request: ApprovalRequest) {
  if (request.tool !== "shell") return undefined;
  try {
    const { command } = JSON.parse(request.arguments) as { command?: unknown };
    return typeof command === "string" ? commandSubject(command) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The terminal's lines, one at a time, read from one readline for the approver's life; a wait given
 * up (the question withdrawn) leaves the next line to the next question. `eager` (a terminal): read
 * from the start, so that what was typed before a question is read by the time it is asked, and can
 * be dropped (`dropTyped`). Otherwise (a pipe: a script's answers, given ahead) read from the first
 * question on, every line kept.
 */
function lineReader(input: NodeJS.ReadableStream, eager: boolean) {
  const queue: string[] = [];
  let ended = false;
  let wake: (() => void) | undefined;
  let reading = false;
  const open = () => {
    if (reading) return;
    reading = true;
    const rl = createInterface({ input, terminal: false });
    rl.on("line", (text) => {
      queue.push(text);
      wake?.();
    });
    rl.on("close", () => {
      ended = true;
      wake?.();
    });
  };
  if (eager) open();
  return {
    /** Drops the lines read so far (typed before the question now asked); says how many. */
    dropTyped(): number {
      return queue.splice(0).length;
    },
    /** The next line; undefined once the input ends. */
    async next(signal: AbortSignal): Promise<string | undefined> {
      open();
      for (;;) {
        signal.throwIfAborted();
        const first = queue.shift();
        if (first !== undefined) return first;
        if (ended) return undefined;
        await new Promise<void>((resolve, reject) => {
          const abort = () => reject(signal.reason);
          signal.addEventListener("abort", abort, { once: true });
          wake = () => {
            signal.removeEventListener("abort", abort);
            wake = undefined;
            resolve();
          };
        });
      }
    },
  };
}
