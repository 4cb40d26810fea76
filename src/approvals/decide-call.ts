import type { ApprovalPolicy } from "../config/policy-schemas.js";
import type { ToolEffect } from "../config/tool-catalog.js";
import { UnreachableError } from "../errors.js";
import type { Confinement } from "../sandbox/plan.js";
import { allowedBy, type CallSubject, deniedBy, type PermissionRules } from "./permissions.js";
import { type CallJudgement, type Decision, type SandboxSettings, whereItRuns } from "./policy.js";

/** What is known of one call when it is decided: its tool's facts and the tool's judgement of it. */
export interface CallFacts {
  tool: string;
  effect: ToolEffect;
  /** The tool runs in the sandbox: its calls are decided by where they run. */
  sandboxed: boolean;
  judgement?: CallJudgement | undefined;
  /** What the permissions' argument patterns are matched on (a command, a path), for the tools they are for. */
  subject?: CallSubject | undefined;
}

/**
 * Everything that may let a call run, or stop it, each with its scope. The terminal's `a` is not
 * here: it is an answer to a question (`ttyApprover`), given after `ask`, and never to one that
 * leaves the sandbox; its `A` saves a `permissions` allow rule, a grant from the next run on.
 */
export interface Grants {
  /** The run's approval policy (the agent's own `approval` when it has one). */
  policy: ApprovalPolicy;
  /** For sandboxed tools: what this machine can do and what is configured; `readOnly` for an agent that only reads. */
  sandbox: SandboxSettings;
  /**
   * The operator's, in troupe.yaml (an MCP server's `autoApprove`): where, by tool. Every call of the
   * tool, under every policy; no sandboxed tool has one.
   */
  autoApproved?: (tool: string) => string | undefined;
  /**
   * A skill this agent loaded (its `allowed-tools`): which, by tool. From the load on, for this agent
   * only; it turns an ask into an allow and nothing else.
   */
  skillAllowed?: (tool: string) => string | undefined;
  /**
   * The user's, in troupe.yaml (`permissions`): which, by tool and argument. A deny rule denies under
   * every policy, `yolo` included, and wins over every allow; an allow rule turns an ask into an
   * allow, as a skill's `allowed-tools` does: never one that leaves the sandbox.
   */
  permissions?: PermissionRules | undefined;
}

/** A sandboxed call's place, worked out once for the rules that need it. */
type Where = ReturnType<typeof whereItRuns>;

/** One step of the decision: a decision when it applies to the call, else undefined (the next one decides). */
export interface CallRule {
  id: string;
  /** What it decides, in a line: docs/tools-and-safety.md's table says the same (a test holds them equal). */
  says: string;
  decide(call: CallFacts, grants: Grants, where: Where | undefined): Decision | undefined;
}

const allow = (sandbox?: Confinement): Decision => ({ decision: "allow", sandbox });
const deny = (reason: string, next?: string): Decision => ({ decision: "deny", reason, next });
const ask = (sandbox?: Confinement, reason?: string): Decision => ({ decision: "ask", reason, sandbox });

/** Rules for a tool that runs in the sandbox: `where` is known. */
const sandboxed =
  (rule: CallRule["decide"]): CallRule["decide"] =>
  (call, grants, where) =>
    call.sandboxed && where ? rule(call, grants, where) : undefined;
/** Rules for a tool that does not (MCP and library tools): judged by what they say of the call. */
const unconfined =
  (rule: CallRule["decide"]): CallRule["decide"] =>
  (call, grants, where) =>
    call.sandboxed ? undefined : rule(call, grants, where);

/** The decision on a call, in order: the first rule that applies decides. */
export const CALL_RULES: readonly CallRule[] = [
  {
    id: "permission-deny",
    says: "a `permissions.deny` rule (troupe.yaml) matches the call: denied, under every policy, `yolo` included",
    decide: ({ tool, subject }, { permissions }) => {
      const rule = permissions && deniedBy(permissions.deny, tool, subject);
      return rule
        ? deny(
            `denied by permissions.deny "${rule.text}" in ${permissions.source}`,
            "do without this call: the user's permissions deny it",
          )
        : undefined;
    },
  },
  {
    id: "read",
    says: "a read tool's call is allowed",
    decide: (call) => (call.effect === "read" ? allow() : undefined),
  },
  {
    id: "dangerous",
    says: "a dangerous call (`rm -r /`, `mkfs`, a download piped into a shell…) is denied, under every policy but `yolo`",
    decide: ({ judgement }, { policy }) =>
      judgement?.dangerous && policy !== "yolo"
        ? deny(`denied: ${judgement.dangerous} is never allowed under the "${policy}" policy`)
        : undefined,
  },
  {
    id: "read-only-leaves",
    says: "sandboxed, of an agent that only reads: asking to leave the sandbox, or no sandbox on this machine, is denied, under every policy",
    decide: sandboxed((_call, _grants, where) =>
      where?.refused ? deny(where.refused, where.next) : undefined,
    ),
  },
  {
    id: "yolo-sandboxed",
    says: "sandboxed, under `yolo`: allowed, unsandboxed unless a sandbox mode is set",
    decide: sandboxed((_call, { policy }, where) => (policy === "yolo" ? allow(where?.sandbox) : undefined)),
  },
  {
    id: "leaves-sandbox",
    says: "sandboxed, leaving the sandbox (the network, no sandbox, none on this machine): asked, as a question of its own that no grant covers; denied under `never-ask`",
    decide: sandboxed((_call, { policy }, where) => {
      if (!where || where.leaving.length === 0) return undefined;
      const why = where.leaving.join("; ");
      return policy === "never-ask"
        ? deny(`denied: ${why}, and the "never-ask" policy asks nobody`)
        : ask(where.sandbox, why);
    }),
  },
  {
    id: "in-sandbox",
    says: "sandboxed, staying in: allowed, for an agent that only reads and under every policy but `ask`",
    decide: sandboxed((_call, { policy, sandbox }, where) =>
      sandbox.readOnly || policy !== "ask" ? allow(where?.sandbox) : undefined,
    ),
  },
  {
    id: "skill-sandboxed",
    says: "sandboxed, under `ask`: allowed when a loaded skill's `allowed-tools` names the tool and the call could be understood",
    decide: sandboxed(({ tool, judgement }, { skillAllowed }, where) =>
      judgement?.understood !== false && skillAllowed?.(tool) ? allow(where?.sandbox) : undefined,
    ),
  },
  {
    id: "permission-allow-sandboxed",
    says: "sandboxed, under `ask`: allowed when a `permissions.allow` rule (troupe.yaml) matches the call and it could be understood",
    decide: sandboxed(({ tool, judgement, subject }, { permissions }, where) =>
      judgement?.understood !== false && permissions && allowedBy(permissions.allow, tool, subject)
        ? allow(where?.sandbox)
        : undefined,
    ),
  },
  {
    id: "ask-sandboxed",
    says: "sandboxed, under `ask`: asked, then run in its sandbox",
    decide: sandboxed((_call, _grants, where) => ask(where?.sandbox)),
  },
  {
    id: "auto-approve",
    says: "not sandboxed, an MCP server's `autoApprove` (troupe.yaml) names the tool: allowed, under every policy",
    decide: unconfined(({ tool }, { autoApproved }) => (autoApproved?.(tool) ? allow() : undefined)),
  },
  {
    id: "not-understood",
    says: "not sandboxed, a call the tool could not understand: asked; denied under `never-ask`",
    decide: unconfined(({ judgement }, { policy }) => {
      if (judgement?.understood !== false) return undefined;
      return policy === "never-ask"
        ? deny(`denied: ${judgement.reason ?? "it could not be understood"}`)
        : ask();
    }),
  },
  {
    id: "yolo",
    says: "not sandboxed, under `yolo`: allowed",
    decide: unconfined((_call, { policy }) => (policy === "yolo" ? allow() : undefined)),
  },
  {
    id: "known-safe",
    says: "not sandboxed, an execute call the tool knows only reads: allowed under `auto-edit` and `never-ask`",
    decide: unconfined(({ effect, judgement }, { policy }) =>
      effect === "execute" && judgement?.safe === true && policy !== "ask" ? allow() : undefined,
    ),
  },
  {
    id: "auto-edit-write",
    says: "not sandboxed, a write under `auto-edit`: allowed",
    decide: unconfined(({ effect }, { policy }) =>
      effect === "write" && policy === "auto-edit" ? allow() : undefined,
    ),
  },
  {
    id: "never-ask",
    says: "not sandboxed, anything else under `never-ask`: denied, as nobody is asked",
    decide: unconfined(({ effect, judgement }, { policy }) =>
      policy === "never-ask"
        ? deny(`denied: ${judgement?.reason ?? `${effect} tools`} under the "never-ask" policy`)
        : undefined,
    ),
  },
  {
    id: "skill",
    says: "not sandboxed, what is left would be asked: allowed when a loaded skill's `allowed-tools` names the tool",
    decide: unconfined(({ tool }, { skillAllowed }) => (skillAllowed?.(tool) ? allow() : undefined)),
  },
  {
    id: "permission-allow",
    says: "not sandboxed, what is left would be asked: allowed when a `permissions.allow` rule (troupe.yaml) matches the call",
    decide: unconfined(({ tool, subject }, { permissions }) =>
      permissions && allowedBy(permissions.allow, tool, subject) ? allow() : undefined,
    ),
  },
  {
    id: "ask",
    says: "not sandboxed, anything else (writes under `ask`, execute calls under `ask` and `auto-edit`): asked",
    decide: () => ask(),
  },
];

/**
 * The decision on one call that has passed its checks (the tool exists, is this agent's, its
 * arguments fit): allow, ask or deny, for a sandboxed tool where it runs, and which rule decided.
 * Pure: the same call and grants always decide the same.
 */
export function decideCall(call: CallFacts, grants: Grants): Decision & { rule: string } {
  const where = call.sandboxed ? whereItRuns(grants.policy, call.judgement, grants.sandbox) : undefined;
  for (const rule of CALL_RULES) {
    const decided = rule.decide(call, grants, where);
    if (decided) return { ...decided, rule: rule.id };
  }
  throw new UnreachableError(`no rule decided a call of ${call.tool}: the last, "ask", decides every one`);
}
