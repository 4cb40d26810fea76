import { useEffect, useState } from "preact/hooks";
import type { ApprovalRequest } from "../../src/approvals/approver.js";
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

function Approval(props: { approval: Shown }) {
  const { request, status, by, reason } = props.approval;
  const [why, setWhy] = useState("");
  const [outcome, setOutcome] = useState<string | undefined>(undefined);
  const answer = async (approved: boolean) => {
    try {
      const said = await post<{ outcome: string; why?: string }>("/api/approvals/answer", {
        runId: request.runId,
        agentId: request.agentId,
        callId: request.callId,
        requestId: props.approval.requestId,
        approved,
        ...(why ? { reason: why } : {}),
      });
      setOutcome(said.why ? `${said.outcome}: ${said.why}` : said.outcome);
    } catch (error) {
      setOutcome((error as Error).message);
    }
  };
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
          <button type="button" data-testid="allow" onClick={() => void answer(true)}>
            Allow
          </button>
          <button type="button" class="danger" data-testid="deny" onClick={() => void answer(false)}>
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
