import type { ApprovalPolicy } from "../config/schema.js";
import type { ToolEffect } from "../tools/catalog.js";

export type PolicyDecision = "allow" | "ask" | "deny";

/**
 * The approval policy by a tool's effect: reads are always allowed; `ask` asks for every write and
 * execute, `auto-edit` allows writes and asks for execute, `never-ask` denies what it would ask
 * about, `yolo` allows everything.
 */
export function decideByEffect(policy: ApprovalPolicy, effect: ToolEffect): PolicyDecision {
  if (effect === "read" || policy === "yolo") return "allow";
  switch (policy) {
    case "ask":
      return "ask";
    case "auto-edit":
      return effect === "write" ? "allow" : "ask";
    case "never-ask":
      return "deny";
  }
}
