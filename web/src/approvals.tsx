import { useEffect, useState } from "preact/hooks";
import type { ApprovalRequest } from "../../src/approvals/approver.js";
import {
  checkAnswers,
  fieldLine,
  fieldValue,
  formOf,
  QUESTION_TOOL,
  type QuestionForm,
} from "../../src/approvals/question-form.js";
import { requestText } from "../../src/cli/request-text.js";
import { spacesSeen, visible } from "../../src/util/visible.js";
import { get, post } from "./api.js";

interface Shown {
  request: ApprovalRequest;
  requestId: string;
  status: "pending" | "approved" | "denied" | "closed";
  reason?: string;
  by?: string;
}

/** The run's approvals: pending ones to allow or deny (with a reason), decided ones with who decided. */
export function Approvals(props: { runId: string; version: number }) {
  const [approvals, setApprovals] = useState<Shown[]>([]);
  // Asked again when an approval event of the run comes (`version` counts them): an approval's events
  // are in the log before and after its record changes.
  useEffect(() => {
    void get<{ approvals: Shown[] }>(`/api/runs/${props.runId}/approvals`).then((r) =>
      setApprovals(r.approvals),
    );
  }, [props.runId, props.version]);
  if (approvals.length === 0) return null;
  return (
    <section class="approvals" data-testid="approvals">
      <h2>Approvals</h2>
      {approvals.map((approval) => (
        <Approval approval={approval} />
      ))}
    </section>
  );
}

/** Sends an answer to an approval: the first answer, from anywhere, wins. */
function useAnswer(approval: Shown) {
  const [outcome, setOutcome] = useState<string | undefined>(undefined);
  const answer = async (approved: boolean, reason: string) => {
    const { request } = approval;
    try {
      const said = await post<{ outcome: string; why?: string }>("/api/approvals/answer", {
        runId: request.runId,
        agentId: request.agentId,
        callId: request.callId,
        requestId: approval.requestId,
        approved,
        ...(reason ? { reason } : {}),
      });
      setOutcome(said.why ? `${said.outcome}: ${said.why}` : said.outcome);
    } catch (error) {
      setOutcome((error as Error).message);
    }
  };
  return { outcome, setOutcome, answer };
}

function Approval(props: { approval: Shown }) {
  const { request, status, by, reason } = props.approval;
  const form = formOf(request);
  const [why, setWhy] = useState("");
  const { outcome, answer } = useAnswer(props.approval);
  if (form) return <Question approval={props.approval} form={form} />;
  return (
    <article
      class={`approval ${status}`}
      data-testid="approval"
      data-status={status}
      data-call={request.callId}
    >
      <header>
        <strong>{visible(request.tool)}</strong> <span class="quiet">{request.effect}</span>
        {request.paths.length > 0 && <span class="paths"> {visible(request.paths.join(", "))}</span>}
      </header>
      {request.escalation !== undefined && (
        <p class="escalation" data-testid="escalation">
          Leaves the sandbox: asked because {visible(request.escalation)}
        </p>
      )}
      <Detail text={requestText(request)} />
      {status === "pending" ? (
        <div class="answer">
          <input
            placeholder="Reason (optional)"
            value={why}
            onInput={(e) => setWhy((e.target as HTMLInputElement).value)}
          />
          <button type="button" data-testid="allow" onClick={() => void answer(true, why)}>
            Allow
          </button>
          <button type="button" class="danger" data-testid="deny" onClick={() => void answer(false, why)}>
            Deny
          </button>
        </div>
      ) : (
        <p class="decided" data-testid="decided">
          {status}
          {by ? ` by ${by}` : ""}
          {reason ? `: ${reason}` : ""}
        </p>
      )}
      {outcome && <p class="quiet">{outcome}</p>}
    </article>
  );
}

/**
 * An MCP server's question: its message as the server wrote it (every character seen), a field for
 * each of the form's, checked before the answers are sent; or declined.
 */
function Question(props: { approval: Shown; form: QuestionForm }) {
  const { request, status, by } = props.approval;
  const { form } = props;
  const [values, setValues] = useState<Record<string, string | boolean>>({});
  const { outcome, setOutcome, answer } = useAnswer(props.approval);
  const server = request.tool.slice(0, -QUESTION_TOOL.length);
  const send = () => {
    const typed: Record<string, unknown> = {};
    for (const field of form.fields) {
      const value = values[field.name];
      // A box left unticked is a no.
      if (field.type === "boolean") typed[field.name] = value === true;
      else if (value === undefined || value === "") continue;
      else {
        const parsed = fieldValue(field, String(value));
        if ("problem" in parsed) return setOutcome(parsed.problem);
        typed[field.name] = parsed.value;
      }
    }
    const checked = checkAnswers(form, typed);
    if ("problem" in checked) return setOutcome(checked.problem);
    void answer(true, JSON.stringify(checked.answers));
  };
  const set = (name: string, value: string | boolean) => setValues({ ...values, [name]: value });
  return (
    <article
      class={`approval question ${status}`}
      data-testid="question"
      data-status={status}
      data-call={request.callId}
    >
      <header>
        <strong>{visible(server)}</strong> <span class="quiet">asks you</span>
      </header>
      <Detail text={form.message} />
      {status === "pending" ? (
        <form
          class="fields"
          onSubmit={(e) => {
            e.preventDefault();
            send();
          }}
        >
          {form.fields.map((field) => (
            <div class="field" data-testid={`field-${field.name}`}>
              <label for={`${request.callId}-${field.name}`}>{visible(fieldLine(field))}</label>
              {field.type === "boolean" ? (
                <input
                  type="checkbox"
                  id={`${request.callId}-${field.name}`}
                  name={field.name}
                  onChange={(e) => set(field.name, (e.target as HTMLInputElement).checked)}
                />
              ) : field.options ? (
                <select
                  id={`${request.callId}-${field.name}`}
                  name={field.name}
                  multiple={field.type === "choices"}
                  onChange={(e) =>
                    set(
                      field.name,
                      [...(e.target as HTMLSelectElement).selectedOptions]
                        .map((o) => o.value)
                        .filter(Boolean)
                        .join(","),
                    )
                  }
                >
                  <option value="">—</option>
                  {field.options.map((option) => (
                    <option value={option}>{visible(option)}</option>
                  ))}
                </select>
              ) : (
                <input
                  id={`${request.callId}-${field.name}`}
                  name={field.name}
                  inputMode={field.type === "string" ? "text" : "decimal"}
                  onInput={(e) => set(field.name, (e.target as HTMLInputElement).value)}
                />
              )}
            </div>
          ))}
          <div class="answer">
            <button type="submit" data-testid="send">
              Answer
            </button>
            <button
              type="button"
              class="danger"
              data-testid="decline"
              onClick={() => void answer(false, "declined in the web console")}
            >
              Decline
            </button>
          </div>
        </form>
      ) : (
        <p class="decided" data-testid="decided">
          {status === "approved" ? "answered" : status === "denied" ? "declined" : status}
          {by ? ` by ${by}` : ""}
        </p>
      )}
      {outcome && (
        <p class="quiet" data-testid="outcome">
          {outcome}
        </p>
      )}
    </article>
  );
}

/**
 * A command as it is, a diff with its added and removed lines marked; every character seen, as a
 * terminal shows it (`visible`, tabs and long runs of spaces counted), so nothing of what runs is
 * hidden, reordered or pushed out of the box.
 */
function Detail(props: { text: string }) {
  const lines = props.text.split("\n").map((line) => spacesSeen(visible(line)));
  const diff = lines.some((line) => line.startsWith("@@") || line.startsWith("+++"));
  if (!diff) return <pre class="detail">{lines.join("\n")}</pre>;
  return (
    <pre class="detail diff">
      {lines.map((line) => (
        <div class={diffClass(line)}>{line || " "}</div>
      ))}
    </pre>
  );
}

function diffClass(line: string): string {
  if (/^(\+\+\+|---|@@|===)/.test(line)) return "hunk";
  return line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
}
