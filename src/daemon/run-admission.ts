import type { RunGrants } from "../actors/runtime.js";
import { RequestRefusedError } from "../bus/bus.js";
import type { ApprovalPolicyName } from "../config/policies.js";
import { UserError } from "../errors.js";
import type { SandboxMode } from "../sandbox/plan.js";

/* What the daemon answers a client whose run it cannot start as asked, and the rights a run keeps. */

/**
 * Why a runs.start cannot have a run id already taken: the run exists and asked the same (its client
 * follows it), it asked something else, or what holds the id is no record of this daemon's.
 */
export function runIdTaken(runId: string, same: boolean | undefined): RequestRefusedError {
  const another = "start this one under another id (troupe run --id ANOTHER-KEY)";
  if (same) return new RequestRefusedError(`run ${runId} exists`);
  if (same === false)
    return new RequestRefusedError(`run ${runId} was started with another task or options: ${another}`);
  return new RequestRefusedError(
    `run id ${runId} is taken by a record this daemon did not write: ${another}`,
  );
}

/** The rights a run was started with, as its record keeps them. */
export function grantsOf(record: { approval?: string; mode?: string; sandbox?: string }): RunGrants {
  return {
    approval: record.approval as ApprovalPolicyName | undefined,
    mode: record.mode as "act" | "plan" | undefined,
    sandbox: record.sandbox as SandboxMode | undefined,
  };
}

/** A start the client's request made impossible (an unknown agent, a task too big) is its to mend. */
export function refusingUserErrors<T>(start: () => T): T {
  try {
    return start();
  } catch (error) {
    if (error instanceof UserError) throw new RequestRefusedError(error.message, { cause: error });
    throw error;
  }
}

/** A user's error (an unknown model) as the daemon's refusal, said as it said it; any other as it is. */
export function asRefusal(error: unknown): unknown {
  return error instanceof UserError ? new RequestRefusedError(error.message, { cause: error }) : error;
}
