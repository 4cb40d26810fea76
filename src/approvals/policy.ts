import type { ApprovalPolicy } from "../config/schema.js";
import type { ToolEffect } from "../config/tool-catalog.js";
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
  /**
   * The operator allowed this tool to run without asking, where the policy would ask or deny (an MCP
   * server's `autoApprove`): says where. Not for sandboxed tools, whose calls are judged by where they run.
   */
  preApproved?: string;
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
 * The approval policy's decision on one call. Reads are always allowed, and under every policy but
 * yolo a dangerous call is denied. A tool that runs in the sandbox is decided by `decideConfined`.
 * For the others (MCP and library tools, judged by what they say of a call): `ask` asks for every
 * write and execute; `auto-edit` allows writes and asks for execute unless it is known safe;
 * `never-ask` allows what is known safe and denies the rest; `yolo` allows everything; a call that
 * could not be understood is never allowed unasked. A tool the operator allowed in advance
 * (`preApproved`) is allowed under every policy.
 */
export function decide(
  policy: ApprovalPolicy,
  effect: ToolEffect,
  judgement?: CallJudgement,
  sandbox?: SandboxSettings,
): Decision {
  if (effect === "read") return { decision: "allow" };
  if (judgement?.dangerous && policy !== "yolo")
    return {
      decision: "deny",
      reason: `denied: ${judgement.dangerous} is never allowed under the "${policy}" policy`,
    };
  if (sandbox) return decideConfined(policy, judgement, sandbox);
  if (judgement?.preApproved) return { decision: "allow" };
  if (judgement?.understood === false) {
    return policy === "never-ask"
      ? { decision: "deny", reason: `denied: ${judgement.reason ?? "it could not be understood"}` }
      : { decision: "ask" };
  }
  if (policy === "yolo") return { decision: "allow" };
  const safe = effect === "execute" && judgement?.safe === true;
  switch (policy) {
    case "ask":
      return { decision: "ask" };
    case "auto-edit":
      return { decision: effect === "write" || safe ? "allow" : "ask" };
    case "never-ask":
      return safe
        ? { decision: "allow" }
        : {
            decision: "deny",
            reason: `denied: ${judgement?.reason ?? `${effect} tools`} under the "never-ask" policy`,
          };
  }
}

/**
 * A call that runs in the sandbox is judged by where it runs, not by what its text seems to do:
 * `never-ask` runs it read-only and `auto-edit` workspace-write without asking, `ask` asks and then
 * runs it workspace-write, `yolo` runs it unconfined unless a sandbox mode is configured. Leaving
 * the sandbox (the network, no sandbox at all, or a machine without one) is always asked about
 * (denied under `never-ask`, where nobody is asked), except under yolo. A read-only agent's calls
 * run read-only without asking and can never leave the sandbox: its escalation is refused under every
 * policy, yolo included, and nobody is asked.
 */
function decideConfined(
  policy: ApprovalPolicy,
  judgement: CallJudgement | undefined,
  settings: SandboxSettings,
): Decision {
  if (settings.readOnly && judgement?.escalate)
    return {
      decision: "deny",
      reason: `denied: this agent only reads, so its commands never leave the read-only sandbox (it asked for ${judgement.escalate === "network" ? "network access" : "no sandbox"}), under every policy`,
      next: "run the command again without escalate, or report back what it needs and why",
    };
  let mode: SandboxMode = settings.readOnly
    ? readOnlyLimit(settings).mode
    : (settings.mode ?? POLICY_SANDBOX[policy]);
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
    if (settings.readOnly) return deny(`this agent only reads, and ${settings.unavailable}`);
    mode = "off";
    leaving.push(`it cannot be sandboxed: ${settings.unavailable}`);
  }
  if (mode === "off" && leaving.length === 0 && policy !== "yolo") leaving.push("the sandbox is off");
  const sandbox: Confinement = { mode, network: mode === "off" || network };
  if (policy === "yolo") return { decision: "allow", sandbox };
  if (leaving.length > 0) {
    return policy === "never-ask"
      ? deny(`denied: ${leaving.join("; ")}, and the "never-ask" policy asks nobody`)
      : { decision: "ask", reason: leaving.join("; "), sandbox };
  }
  if (settings.readOnly || policy !== "ask") return { decision: "allow", sandbox };
  return { decision: "ask", sandbox };
}

/** The most a read-only agent's command is ever given: the read-only sandbox, the network only when configured on. */
export function readOnlyLimit(settings: Pick<SandboxSettings, "network">): Confinement {
  return { mode: "read-only", network: settings.network };
}

function deny(reason: string): Decision {
  return { decision: "deny", reason };
}

/** The decision by effect alone, for a tool that has nothing to say about its calls. */
export function decideByEffect(policy: ApprovalPolicy, effect: ToolEffect): PolicyDecision {
  return decide(policy, effect).decision;
}
