import type { ApprovalPolicy } from "../config/policy-schemas.js";
import type { Logger } from "../log.js";
import type { SandboxMode } from "../sandbox/plan.js";
import type { StartAgentOptions } from "./agent-deps.js";
import type { AgentRecord } from "./agent-store.js";

/** What the run was started with: its first agent's rights. */
export interface RunGrants {
  approval?: ApprovalPolicy | undefined;
  mode?: "act" | "plan" | undefined;
  sandbox?: SandboxMode | undefined;
}

/**
 * Who a resumed agent is, which sets its rights: the run's first agent with the grants of its run
 * (kept where only the daemon writes), a subagent (read-only, whatever its record says), or an
 * agent whose record only this process writes (a local run's files), taken at its word.
 */
export type ResumeAs = { root: RunGrants; agent?: string } | "child" | "own-record";

/**
 * Whose definition (tools, policy, sandbox) an agent resumes with: never its snapshot's word alone,
 * which a host's seed can write. The run's first agent is the one its sealed run record names; a
 * subagent the one its id was made from (`childIdOf`); a local run's own record is taken at its word.
 */
export function trustedName(record: AgentRecord, as: ResumeAs, agentId: string, log: Logger): string {
  const child = /^(.+)-[0-9a-f]{10}$/.exec(agentId)?.[1];
  const trusted = typeof as === "object" ? as.agent : as === "child" ? child : undefined;
  if (trusted === undefined || trusted === record.name) return record.name;
  log.warn(
    { agentId, snapshot: record.name, agent: trusted },
    "a snapshot names another agent than its run or id: resumed as the one they name",
  );
  return trusted;
}

export function rightsOf(
  record: AgentRecord,
  as: ResumeAs,
): Pick<StartAgentOptions, "depth" | "mode" | "approval" | "sandbox"> {
  const given = ({ approval, mode, sandbox }: RunGrants) => ({ approval, mode, sandbox });
  if (as === "child") return { depth: Math.max(1, record.depth), mode: record.mode };
  if (as === "own-record") return { depth: record.depth, ...given(record) };
  return { depth: 0, ...given(as.root) };
}
