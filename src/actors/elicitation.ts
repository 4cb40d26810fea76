import { checkAnswers, formDetail, QUESTION_TOOL, type QuestionForm } from "../approvals/question-form.js";
import type { ApprovalDecision } from "../machines/agent-types.js";
import type { PlannedCall } from "../tools/plan.js";
import type { CallPreview, ElicitationAnswer, Elicitor } from "../tools/tool.js";
import type { EventPublisher } from "./event-publisher.js";

/** What an agent puts an MCP server's questions to the user with. */
export interface QuestionSetup {
  events: EventPublisher;
  /** Set when nobody is asked (the `never-ask` policy): why. */
  unasked?: string | undefined;
  /** Asks whoever answers the agent's approvals, showing `preview`. */
  ask(call: PlannedCall, preview: CallPreview, signal: AbortSignal): Promise<ApprovalDecision>;
}

/**
 * How one tool call's agent puts its server's questions (MCP's elicitation, form mode) to the user:
 * each as an approval request of `SERVER__elicitation` (call id `<tool call>-question-<n>`), its form
 * as the arguments, so it reaches every place approvals do and the first answer wins. Allowed with
 * the answers as a JSON object in the reason is `accept`, if they fit the form; denied by the user is
 * `decline`; anything else (nobody asked, the wait ran out, the run stopped, answers that do not fit)
 * is `cancel`. Told in `elicitation.finished`, without the answers.
 */
export function elicitorFor(setup: QuestionSetup, call: Pick<PlannedCall, "id">): Elicitor {
  let questions = 0;
  return async ({ server, form }, signal) => {
    const id = `${call.id}-question-${++questions}`;
    const answer = await answerOf(setup, { id, tool: `${server}${QUESTION_TOOL}` }, form, signal);
    setup.events.emit("elicitation.finished", {
      callId: call.id,
      questionId: id,
      server,
      action: answer.action,
      ...(answer.why ? { why: answer.why } : {}),
    });
    return answer;
  };
}

async function answerOf(
  setup: QuestionSetup,
  ids: { id: string; tool: string },
  form: QuestionForm,
  signal: AbortSignal,
): Promise<ElicitationAnswer> {
  if (setup.unasked) return { action: "cancel", why: setup.unasked };
  const decision = await setup.ask(
    { id: ids.id, name: ids.tool, arguments: JSON.stringify(form), effect: "read", decision: "ask" },
    { detail: formDetail(form), paths: [] },
    signal,
  );
  if (!decision.approved) {
    const why = decision.reason ?? `denied by ${decision.by}`;
    return decision.by === "user" ? { action: "decline", why } : { action: "cancel", why };
  }
  let given: unknown = {};
  try {
    if (decision.reason?.trim().startsWith("{")) given = JSON.parse(decision.reason);
  } catch {
    return { action: "cancel", why: "the answers were not JSON" };
  }
  const checked = checkAnswers(form, given);
  if ("problem" in checked)
    return { action: "cancel", why: `the answers do not fit the form: ${checked.problem}` };
  return { action: "accept", content: checked.answers };
}
