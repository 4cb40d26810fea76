import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { answerApproval, readApproval } from "../../src/approvals/answer-approval.js";
import type { ApprovalRef } from "../../src/approvals/approval-record.js";
import type { Bus } from "../../src/bus/bus.js";
import { ApproverTrust, createKey, type Identity, identityFromFile } from "../../src/trust/approvers.js";

/** A key made as `troupe keys create NAME` makes it, in a data dir of its own. */
export function newIdentity(name: string): Identity {
  const dir = mkdtempSync(join(tmpdir(), "troupe-key-"));
  return identityFromFile(createKey(dir, name).file);
}

/** Trust in exactly these identities, as troupe.yaml's `approvers:` would list them. */
export function trusting(...identities: Identity[]): ApproverTrust {
  return new ApproverTrust(Object.fromEntries(identities.map((id) => [id.name, id.publicKey])), undefined);
}

/**
 * Answers the request of a call as a script would, with no one shown it: reads the record its host
 * wrote, then signs that. `unknown` when there is none.
 */
export async function answerRef(
  bus: Bus,
  identity: Identity,
  ref: ApprovalRef,
  answer: { approved: boolean; reason?: string; via?: string },
  waitMs?: number,
): ReturnType<typeof answerApproval> {
  const shown = await readApproval(bus, ref);
  return shown ? answerApproval(bus, identity, shown, answer, waitMs) : { outcome: "unknown" };
}
