import { loadConfig } from "../config/load.js";
import { dataDir } from "../config/paths.js";
import type { Logger } from "../log.js";
import { answerApproval, findApprovals } from "../safety/answer-approval.js";
import type { ApprovalRecord } from "../safety/bus-approver.js";
import { localIdentity } from "../trust/approvers.js";
import { APPROVER_ROLES, connectClient } from "./client.js";
import { describeRequest } from "./tty-approver.js";

export class ApproveUsageError extends Error {
  override name = "ApproveUsageError";
}

/**
 * `troupe approve CALL_ID --allow|--deny [--reason TEXT] [--run RUN_ID]`, signed with this user's
 * key. It prints the request it answers (as the host wrote it) before the outcome; a call id
 * pending in more than one run needs `--run`. Exit 0 when this answer decided it (or is recorded
 * for a host that is away), 1 when it came too late or was refused.
 */
export async function runApprove(
  configPath: string | undefined,
  callId: string,
  flags: { allow?: boolean; deny?: boolean; reason?: string; run?: string },
  log: Logger,
): Promise<number> {
  if (Boolean(flags.allow) === Boolean(flags.deny))
    throw new ApproveUsageError("say --allow or --deny (one of them)");
  const config = loadConfig({ config: configPath });
  const identity = localIdentity(dataDir(config.troupe.dataDir));
  const bus = await connectClient(config, "troupe-approve", log, 3000, APPROVER_ROLES);
  try {
    const found = await findApprovals(bus, callId, flags.run);
    const pending = found.filter((record) => record.status === "pending");
    const where = flags.run ? ` in run ${flags.run}` : "";
    if (pending.length > 1)
      throw new ApproveUsageError(
        `call ${callId} waits in ${pending.length} runs (${pending.map((r) => r.request.runId).join(", ")}): say which with --run RUN_ID`,
      );
    const shown = pending[0];
    if (!shown) {
      if (found[0]) {
        process.stderr.write(`troupe: too late: ${callId}${where} was already ${describe(found[0])}\n`);
        return 1;
      }
      throw new ApproveUsageError(
        `no approval request for call ${callId}${where}; the ids are in approval.requested events`,
      );
    }
    const { request } = shown;
    process.stderr.write(`run ${request.runId}, agent ${request.agentId}: ${describeRequest(request)}\n`);
    const { outcome, record, why } = await answerApproval(bus, identity, shown, {
      approved: Boolean(flags.allow),
      via: "troupe approve",
      ...(flags.reason ? { reason: flags.reason } : {}),
    });
    const verb = flags.allow ? "allowed" : "denied";
    switch (outcome) {
      case "decided":
        process.stdout.write(`${verb} ${request.tool} (${callId}) as ${identity.name}\n`);
        return 0;
      case "sent":
        process.stdout.write(
          `${verb} ${request.tool} (${callId}) as ${identity.name}: recorded; the run's host acts on it when it is back\n`,
        );
        return 0;
      case "rejected":
        process.stderr.write(
          `troupe: the run's host refused this answer: ${why}; add your key (${identity.publicKey}) to approvers in its troupe.yaml\n`,
        );
        return 1;
      case "changed":
        process.stderr.write(
          `troupe: ${callId} was asked again with another request while this one was answered; run troupe approve again to see it\n`,
        );
        return 1;
      default:
        process.stderr.write(`troupe: too late: ${callId} was already ${describe(record)}\n`);
        return 1;
    }
  } finally {
    await bus.close();
  }
}

function describe(record: ApprovalRecord | undefined): string {
  if (!record) return "gone";
  return `${record.status} by ${record.by ?? "someone"}${record.reason ? ` (${record.reason})` : ""}`;
}
