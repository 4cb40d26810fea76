import { userInfo } from "node:os";
import { natsOptionsFromConfig } from "../bus/from-config.js";
import { NatsBus } from "../bus/nats-bus.js";
import { loadConfig } from "../config/load.js";
import type { Logger } from "../log.js";
import { answerApproval, findApproval } from "../safety/bus-approver.js";

export class ApproveUsageError extends Error {
  override name = "ApproveUsageError";
}

/** `troupe approve CALL_ID --allow|--deny [--reason TEXT]`. Exit 0 when this answer decided it, 1 when it came too late. */
export async function runApprove(
  configPath: string | undefined,
  callId: string,
  flags: { allow?: boolean; deny?: boolean; reason?: string },
  log: Logger,
): Promise<number> {
  if (Boolean(flags.allow) === Boolean(flags.deny))
    throw new ApproveUsageError("say --allow or --deny (one of them)");
  const config = loadConfig({ config: configPath });
  const bus = await NatsBus.connect({
    ...natsOptionsFromConfig(config.troupe.nats, config.dir),
    name: "troupe-approve",
    log,
    connectTimeoutMs: 3000,
  });
  try {
    const pending = await findApproval(bus, callId);
    if (!pending)
      throw new ApproveUsageError(
        `no approval request for call ${callId}; the ids are in approval.requested events`,
      );
    const by = `${userInfo().username} (troupe approve)`;
    const { outcome, record } = await answerApproval(bus, pending.request.runId, callId, {
      approved: Boolean(flags.allow),
      by,
      ...(flags.reason ? { reason: flags.reason } : {}),
    });
    if (outcome === "decided") {
      process.stdout.write(`${flags.allow ? "allowed" : "denied"} ${pending.request.tool} (${callId})\n`);
      return 0;
    }
    process.stderr.write(
      `troupe: too late: ${callId} was already ${record?.status} by ${record?.by ?? "someone"}${record?.reason ? ` (${record.reason})` : ""}\n`,
    );
    return 1;
  } finally {
    await bus.close();
  }
}
