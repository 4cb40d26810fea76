import type { ApprovalRequest } from "../approvals/approver.js";
import { fieldLine, formOf, QUESTION_TOOL, type QuestionForm } from "../approvals/question-form.js";
import { quoted, visibleLine } from "../util/visible.js";

/** What every terminal that asks shows of a request: the parts of it a person decides on. */
type Shown = Pick<ApprovalRequest, "tool" | "effect" | "detail" | "paths" | "escalation"> & {
  arguments?: string;
};

/**
 * The command or diff the call would run or make, without the `(asked because …)` line its host
 * ended the detail with: that is Troupe's, and shown on a line of its own (`becauseLine`). Only a request
 * that names its reason has it taken off; anything else in the detail is the call's.
 */
export function requestText(request: Pick<ApprovalRequest, "detail" | "escalation">): string {
  if (request.escalation === undefined) return request.detail;
  const suffix = `\n(asked because ${request.escalation})`;
  return request.detail.endsWith(suffix) ? request.detail.slice(0, -suffix.length) : request.detail;
}

/** `command (3 lines)`: what the quoted text is, and how many lines it has. */
export function textLabel(request: Pick<ApprovalRequest, "effect">, text: string): string {
  const lines = text.split("\n").length;
  const what = request.effect === "execute" ? "command" : request.effect === "write" ? "change" : "arguments";
  return `${what} (${lines} line${lines === 1 ? "" : "s"})`;
}

/**
 * The text as a quoted string, line by line: every character seen (escapes, carriage returns, bidi
 * controls as `\e`, `\r`, `\u202e`), a quote at its start and its end, so what is shown is exactly
 * what runs and where it ends.
 */
export function quotedLines(text: string): string[] {
  return quoted(text).split("\n");
}

/** `(asked because …)`, when the request says: after the text, on a line nothing in the text can reach. */
export function becauseLine(request: Pick<ApprovalRequest, "escalation">): string | undefined {
  return request.escalation === undefined ? undefined : `(asked because ${visibleLine(request.escalation)})`;
}

/**
 * The quoted text under its label: `command (1 line): "ls"` on one line, a longer one's lines below
 * the label, each after a `│`.
 */
export function textLines(request: Pick<ApprovalRequest, "effect">, text: string): string[] {
  const lines = quotedLines(text);
  const label = textLabel(request, text);
  return lines.length === 1 ? [`${label}: ${lines[0]}`] : [`${label}:`, ...lines.map((line) => `│ ${line}`)];
}

/**
 * A request as a person reads it before deciding: the tool and its effect, the exact command or diff
 * quoted with its line count, the paths, and why it is asked. Everything the call chose is shown
 * through the visible renderer, so nothing in it moves the cursor or hides a line.
 */
export function describeRequest(request: Shown): string {
  const form =
    request.arguments === undefined ? undefined : formOf({ ...request, arguments: request.arguments });
  if (form) return describeQuestion(request.tool, form);
  const text = requestText(request);
  const because = becauseLine(request);
  return [
    `${visibleLine(request.tool)} (${request.effect}) wants to:`,
    ...textLines(request, text).map((line) => `  ${line}`),
    ...(request.paths.length ? [`  paths: ${request.paths.map(visibleLine).join(", ")}`] : []),
    ...(because ? [`  ${because}`] : []),
  ].join("\n");
}

/**
 * An MCP server's question (a request of `SERVER__elicitation`): who asks, its message quoted as a
 * call's text is (it is the server's), and the form's fields, one a line.
 */
export function describeQuestion(tool: string, form: QuestionForm): string {
  const server = tool.slice(0, -QUESTION_TOOL.length);
  const message = quotedLines(form.message);
  return [
    `the MCP server ${visibleLine(server)} asks you:`,
    ...(message.length === 1 ? [`  ${message[0]}`] : message.map((line) => `  │ ${line}`)),
    ...(form.fields.length
      ? ["  fields:", ...form.fields.map((field) => `    ${visibleLine(fieldLine(field))}`)]
      : ["  (no fields: a yes or no)"]),
  ].join("\n");
}
