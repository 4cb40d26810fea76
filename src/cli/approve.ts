import { answerApproval, findApprovals, listApprovals } from "../approvals/answer-approval.js";
import type { ApprovalRecord } from "../approvals/approval-record.js";
import { answersFromPairs, checkAnswers, formOf } from "../approvals/question-form.js";
import type { NatsBus } from "../bus/nats-bus.js";
import { type ConfigChoice, type LoadedConfig, loadConfig } from "../config/load.js";
import { dataDir } from "../config/paths.js";
import { UserError } from "../errors.js";
import type { Logger } from "../log.js";
import { localIdentity } from "../trust/approvers.js";
import { jsonVisible, visible, visibleLine } from "../util/visible.js";
import { APPROVER_ROLES, callApi, connectClient } from "./client.js";
import { describeRequest, quotedLines, requestText } from "./request-text.js";
import { table } from "./table.js";

export class ApproveUsageError extends UserError {
  override name = "ApproveUsageError";
}

/**
 * `troupe approve [CALL_ID] --allow|--deny [--reason TEXT] [--run RUN_ID]`, signed with this user's
 * key. Without a call id it answers the only pending request (of the run, with `--run`), and lists
 * them when there are several. It prints the request it answers (as the host wrote it) before the
 * outcome; a call id pending in more than one run needs `--run`. Exit 0 when this answer decided it
 * (or is recorded for a host that is away), 1 when it came too late or was refused.
 */
export async function runApprove(
  where: ConfigChoice,
  callId: string | undefined,
  flags: { allow?: boolean; deny?: boolean; reason?: string; field?: string[]; run?: string },
  log: Logger,
): Promise<number> {
  if (Boolean(flags.allow) === Boolean(flags.deny))
    throw new ApproveUsageError("say --allow or --deny (one of them)");
  if (flags.field?.length && !flags.allow)
    throw new ApproveUsageError("--field answers a question: give it with --allow");
  const config = loadConfig(where);
  const identity = localIdentity(dataDir(config.troupe.dataDir));
  const bus = await connectClient(config, "troupe-approve", log, 3000, APPROVER_ROLES);
  try {
    const found = callId ? await findApprovals(bus, callId, flags.run) : await listApprovals(bus, flags.run);
    const pending = found.filter((record) => record.status === "pending");
    const where = flags.run ? ` in run ${flags.run}` : "";
    if (pending.length > 1) {
      if (callId)
        throw new ApproveUsageError(
          `call ${callId} waits in ${pending.length} runs (${pending.map((r) => r.request.runId).join(", ")}): say which with --run RUN_ID`,
        );
      process.stderr.write(`${approvalsTable(pending)}\n`);
      throw new ApproveUsageError(
        `${pending.length} approvals wait${where}: say which with troupe approve CALL_ID (and --run RUN_ID)`,
      );
    }
    const shown = pending[0];
    if (!shown) {
      if (callId && found[0]) {
        process.stderr.write(
          `troupe: too late: ${visibleLine(callId)}${visibleLine(where)} was already ${describe(found[0])}\n`,
        );
        return 1;
      }
      throw new ApproveUsageError(
        callId
          ? `no approval request for call ${callId}${where}; troupe approvals lists the pending ones`
          : `no approval waits${where}`,
      );
    }
    const { request } = shown;
    process.stderr.write(
      `run ${visibleLine(request.runId)}, agent ${visibleLine(request.agentId)}: ${describeRequest(request)}\n`,
    );
    const ended = await endedRun(bus, config, request.runId);
    if (ended) {
      process.stderr.write(
        `troupe: run ${visibleLine(request.runId)} has ended (${visibleLine(ended)}); nothing waits for an answer to ${visibleLine(request.callId)}\n`,
      );
      return 1;
    }
    const { outcome, record, why } = await answerApproval(bus, identity, shown, {
      approved: Boolean(flags.allow),
      via: "troupe approve",
      reason: flags.allow ? answerReason(request, flags) : flags.reason,
    });
    const verb = flags.allow ? "allowed" : "denied";
    const call = `${visibleLine(request.tool)} (${visibleLine(request.callId)})`;
    switch (outcome) {
      case "decided":
        process.stdout.write(`${verb} ${call} as ${identity.name}\n`);
        return 0;
      case "sent":
        process.stdout.write(
          `${verb} ${call} as ${identity.name}: recorded; the run's host acts on it when it is back\n`,
        );
        return 0;
      case "rejected":
        process.stderr.write(
          `troupe: the run's host refused this answer: ${visible(why ?? "")}; add your key (${identity.publicKey}) to approvers in its troupe.yaml\n`,
        );
        return 1;
      case "closed":
        process.stderr.write(
          `troupe: ${visibleLine(request.callId)} was ${describe(record)}; nothing waits for an answer\n`,
        );
        return 1;
      case "changed":
        process.stderr.write(
          `troupe: ${visibleLine(request.callId)} was asked again with another request while this one was answered; run troupe approve again to see it\n`,
        );
        return 1;
      default:
        process.stderr.write(
          `troupe: too late: ${visibleLine(request.callId)} was already ${describe(record)}\n`,
        );
        return 1;
    }
  } finally {
    await bus.close();
  }
}

/**
 * What an allow says: for an MCP server's question, its answers as JSON (from `--field name=value`,
 * or a JSON object given as `--reason`), checked against the form before anything is signed;
 * otherwise the reason as given.
 */
function answerReason(
  request: ApprovalRecord["request"],
  flags: { reason?: string; field?: string[] },
): string | undefined {
  const form = formOf(request);
  if (!form) {
    if (flags.field?.length)
      throw new ApproveUsageError(
        `${request.callId} is a tool call, not a question: --field is for questions`,
      );
    return flags.reason;
  }
  let checked: ReturnType<typeof checkAnswers>;
  if (flags.field?.length) checked = answersFromPairs(form, flags.field);
  else {
    let given: unknown = {};
    try {
      if (flags.reason !== undefined) given = JSON.parse(flags.reason);
    } catch {
      throw new ApproveUsageError(
        "--reason of a question's answer is a JSON object: give each field with --field NAME=VALUE instead",
      );
    }
    checked = checkAnswers(form, given);
  }
  if ("problem" in checked)
    throw new ApproveUsageError(`${checked.problem}: answer with --field NAME=VALUE for each field it needs`);
  return JSON.stringify(checked.answers);
}

/**
 * How the run ended, when the daemon says it has: a request its host never closed (the host died
 * first) is not answered into the void. Undefined while it runs, or when no daemon says.
 */
async function endedRun(bus: NatsBus, config: LoadedConfig, runId: string): Promise<string | undefined> {
  try {
    const record = (await callApi(bus, config, "runs.get", { runId })) as { status?: string };
    return record.status && record.status !== "running" ? record.status : undefined;
  } catch {
    return undefined; // no daemon now, or none that knows the run: its host may yet act on the answer
  }
}

function describe(record: ApprovalRecord | undefined): string {
  if (!record) return "gone";
  if (record.status === "closed") return `closed: ${visible(record.reason ?? "its run ended")}`;
  return `${record.status} by ${visibleLine(record.by ?? "someone")}${record.reason ? ` (${visible(record.reason)})` : ""}`;
}

/** `troupe approvals [RUN_ID] [--json]`: the requests waiting for an answer, oldest first. */
export async function runApprovals(
  where: ConfigChoice,
  runId: string | undefined,
  flags: { json?: boolean },
  log: Logger,
): Promise<number> {
  const config = loadConfig(where);
  const bus = await connectClient(config, "troupe-approvals", log, 3000, APPROVER_ROLES);
  try {
    const pending = (await listApprovals(bus, runId)).filter((record) => record.status === "pending");
    if (flags.json) {
      const rows = pending.map(({ request, createdAt, expiresAt }) => ({ ...request, createdAt, expiresAt }));
      process.stdout.write(`${jsonVisible(JSON.stringify({ approvals: rows }))}\n`);
    } else if (pending.length === 0)
      process.stdout.write(`no approval waits${runId ? ` in run ${runId}` : ""}\n`);
    else process.stdout.write(`${approvalsTable(pending)}\n`);
    return 0;
  } finally {
    await bus.close();
  }
}

/** Pending requests as a table: what `troupe approve` needs (the call id), and what each would do. */
export function approvalsTable(records: ApprovalRecord[], now = Date.now()): string {
  const rows = records.map(({ request, createdAt }) => [
    request.callId,
    request.runId,
    request.agentId,
    request.tool,
    ago(now - createdAt),
    [
      ...(request.escalation !== undefined ? ["LEAVES THE SANDBOX"] : []),
      what(requestText(request)),
      ...(request.paths.length ? [`(${request.paths.join(", ")})`] : []),
    ].join(" "),
  ]);
  return table(["CALL", "RUN", "AGENT", "TOOL", "AGE", "WHAT"], rows);
}

/**
 * The command or diff's first line, quoted and every character seen, cut at `max` columns, with how
 * much is not shown (characters of the line, lines after it): the cell never ends where the text
 * seems to, and a cut one never reads as a whole command.
 */
function what(text: string, max = 60): string {
  const lines = quotedLines(text);
  const first = lines[0] ?? "";
  const hidden = [
    ...(first.length > max ? [`+${first.length - (max - 1)} chars`] : []),
    ...(lines.length > 1 ? [`+${lines.length - 1} line${lines.length === 2 ? "" : "s"}`] : []),
  ];
  const cut = first.length > max ? `${first.slice(0, max - 1)}…` : first;
  return hidden.length ? `${cut} (${hidden.join(", ")}: troupe approve CALL shows it whole)` : cut;
}

function ago(ms: number): string {
  if (ms < 60_000) return `${Math.max(0, Math.round(ms / 1000))}s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)}m`;
  return `${Math.round(ms / 3_600_000)}h`;
}
