import type { ApprovalPolicy } from "../config/policy-schemas.js";
import type { Confinement, SandboxMode } from "../sandbox/plan.js";

export type PolicyDecision = "allow" | "ask" | "deny";

/** What a tool can say about one call before it runs (the shell tool judges its command). */
export interface CallJudgement {
  /** Known to only read. */
  safe: boolean;
  /** Destructive: denied under every policy but yolo. */
  dangerous?: string;
  /** False when the call could not be understood (a command that does not parse). */
  understood?: boolean;
  /** Why it is not safe, for the person asked. */
  reason?: string;
  /** The call asks to leave the sandbox: to reach the network, or to run unconfined. */
  escalate?: "network" | "unsandboxed";
}

/** What an agent's sandboxed calls start from, before each call's own judgement. */
export interface SandboxSettings {
  /** Why commands cannot be confined on this machine; undefined when they can. */
  unavailable?: string | undefined;
  /** The mode asked for (the run's, else the agent's, else troupe.yaml's); else the policy's own. */
  mode?: SandboxMode | undefined;
  /** Commands reach the network without asking (`sandbox.network` in troupe.yaml). */
  network: boolean;
  /** The agent only reads (a subagent, `readOnly`, plan mode): its commands run read-only, always. */
  readOnly: boolean;
}

export interface Decision {
  decision: PolicyDecision;
  reason?: string;
  /** For a denial: what the model can do instead, when there is something better than doing without. */
  next?: string;
  /** For a sandboxed tool: how the call runs if it runs. */
  sandbox?: Confinement;
}

/** The sandbox each policy runs commands in when nothing else is configured. */
export const POLICY_SANDBOX: Readonly<Record<ApprovalPolicy, SandboxMode>> = {
  "never-ask": "read-only",
  "auto-edit": "workspace-write",
  ask: "workspace-write",
  yolo: "off",
};

/**
 * Where a sandboxed call would run, and why that leaves the sandbox if it does: the mode asked for
 * (a read-only agent's limit, else the run's or config's, else the policy's own), widened by the
 * call's `escalate`, and `off` on a machine without a sandbox. A read-only agent's call is never
 * widened: `refused` says why it cannot run at all.
 */
export function whereItRuns(
  policy: ApprovalPolicy,
  judgement: CallJudgement | undefined,
  settings: SandboxSettings,
): { sandbox: Confinement; leaving: string[]; refused?: string; next?: string } {
  const limit = readOnlyLimit(settings);
  if (settings.readOnly && judgement?.escalate)
    return {
      sandbox: limit,
      leaving: [],
      refused: `denied: this agent only reads, so its commands never leave the read-only sandbox (it asked for ${judgement.escalate === "network" ? "network access" : "no sandbox"}), under every policy`,
      next: "run the command again without escalate, or report back what it needs and why",
    };
  if (settings.readOnly && settings.unavailable)
    return { sandbox: limit, leaving: [], refused: `this agent only reads, and ${settings.unavailable}` };
  let mode: SandboxMode = settings.readOnly ? limit.mode : (settings.mode ?? POLICY_SANDBOX[policy]);
  let network = settings.network;
  const leaving: string[] = [];
  if (judgement?.escalate === "network" && !network) {
    network = true;
    leaving.push("it asks for network access");
  }
  if (judgement?.escalate === "unsandboxed") {
    if (mode !== "off") leaving.push("it asks to run outside the sandbox");
    mode = "off";
  }
  if (mode !== "off" && settings.unavailable) {
    mode = "off";
    leaving.push(`it cannot be sandboxed: ${settings.unavailable}`);
  }
  if (mode === "off" && leaving.length === 0 && policy !== "yolo") leaving.push("the sandbox is off");
  return { sandbox: { mode, network: mode === "off" || network }, leaving };
}

/** The most a read-only agent's command is ever given: the read-only sandbox, the network only when configured on. */
export function readOnlyLimit(settings: Pick<SandboxSettings, "network">): Confinement {
  return { mode: "read-only", network: settings.network };
}
