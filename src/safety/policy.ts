import type { ApprovalPolicy } from "../config/schema.js";
import type { ToolEffect } from "../tools/catalog.js";

export type PolicyDecision = "allow" | "ask" | "deny";

/** What a tool can say about one call before it runs (the shell tool judges its command). */
export interface CallJudgement {
  /** Known to only read. */
  safe: boolean;
  /** Destructive: denied under every policy but yolo. */
  dangerous?: string;
  /** False when the call could not be understood (a command that does not parse): never allowed unasked. */
  understood?: boolean;
  /** Why it is not safe, for the person asked. */
  reason?: string;
}

export interface Decision {
  decision: PolicyDecision;
  reason?: string;
}

/**
 * The approval policy's decision on one call. Reads are always allowed. `ask` asks for every write and
 * execute; `auto-edit` allows writes and asks for execute unless it is known safe; `never-ask` allows
 * what is known safe and denies the rest; `yolo` allows everything. Under every policy but yolo a
 * dangerous call is denied; under every policy a call that could not be understood is asked about.
 */
export function decide(policy: ApprovalPolicy, effect: ToolEffect, judgement?: CallJudgement): Decision {
  if (effect === "read") return { decision: "allow" };
  if (judgement?.dangerous && policy !== "yolo")
    return {
      decision: "deny",
      reason: `denied: ${judgement.dangerous} is never allowed under the "${policy}" policy`,
    };
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

/** The decision by effect alone, for a tool that has nothing to say about its calls. */
export function decideByEffect(policy: ApprovalPolicy, effect: ToolEffect): PolicyDecision {
  return decide(policy, effect).decision;
}
