import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { CALL_RULES, type CallFacts, decideCall, type Grants } from "../../src/approvals/decide-call.js";
import { commandSubject, permissionRules } from "../../src/approvals/permissions.js";
import type { CallJudgement } from "../../src/approvals/policy.js";
import type { ApprovalPolicy } from "../../src/config/policy-schemas.js";

const DOC = readFileSync(resolve(import.meta.dirname, "../../docs/tools-and-safety.md"), "utf8");

const shell = (judgement: Partial<CallJudgement> = {}): CallFacts => ({
  tool: "shell",
  effect: "execute",
  sandboxed: true,
  judgement: { safe: false, ...judgement },
});
const mcp = (effect: "write" | "execute", judgement: Partial<CallJudgement> = {}): CallFacts => ({
  tool: "srv__op",
  effect,
  sandboxed: false,
  judgement: { safe: false, ...judgement },
});
const grants = (policy: ApprovalPolicy, more: Partial<Grants> = {}): Grants => ({
  policy,
  sandbox: { network: false, readOnly: false },
  ...more,
});
const readOnly = (policy: ApprovalPolicy, more: Partial<Grants["sandbox"]> = {}) =>
  grants(policy, { sandbox: { network: false, readOnly: true, ...more } });
const byServer = { autoApproved: (tool: string) => (tool === "srv__op" ? "autoApprove of srv" : undefined) };
const bySkill = {
  skillAllowed: (tool: string) => (tool === "srv__op" || tool === "shell" ? "deploy" : undefined),
};

const command = (text: string, judgement: Partial<CallJudgement> = {}): CallFacts => ({
  ...shell(judgement),
  subject: commandSubject(text),
});
const byRules = (allow: string[], deny: string[] = []) => ({
  permissions: permissionRules({ allow, deny }, "troupe.yaml"),
});

/** A call each rule decides, and what it decides: every rule is reached, in its place in the order. */
const EXAMPLES: Record<string, [CallFacts, Grants, "allow" | "ask" | "deny"]> = {
  "permission-deny": [command("rm -rf build"), grants("yolo", byRules(["shell"], ["shell(rm *)"])), "deny"],
  read: [{ tool: "read_file", effect: "read", sandboxed: false }, grants("never-ask"), "allow"],
  dangerous: [shell({ dangerous: "rm -rf /" }), grants("auto-edit", bySkill), "deny"],
  "read-only-leaves": [shell({ escalate: "network" }), readOnly("yolo"), "deny"],
  "yolo-sandboxed": [shell({ escalate: "unsandboxed" }), grants("yolo"), "allow"],
  "leaves-sandbox": [shell({ escalate: "network" }), grants("ask", bySkill), "ask"],
  "in-sandbox": [shell(), grants("auto-edit"), "allow"],
  "skill-sandboxed": [shell(), grants("ask", bySkill), "allow"],
  "permission-allow-sandboxed": [
    command("git status --short"),
    grants("ask", byRules(["shell(git status *)"])),
    "allow",
  ],
  "ask-sandboxed": [shell(), grants("ask"), "ask"],
  "auto-approve": [mcp("execute"), grants("never-ask", byServer), "allow"],
  "not-understood": [mcp("execute", { understood: false }), grants("yolo", bySkill), "ask"],
  yolo: [mcp("execute"), grants("yolo"), "allow"],
  "known-safe": [mcp("execute", { safe: true }), grants("never-ask"), "allow"],
  "auto-edit-write": [mcp("write"), grants("auto-edit"), "allow"],
  "never-ask": [mcp("write"), grants("never-ask", bySkill), "deny"],
  skill: [mcp("execute"), grants("auto-edit", bySkill), "allow"],
  "permission-allow": [mcp("execute"), grants("auto-edit", byRules(["srv__*"])), "allow"],
  ask: [mcp("write"), grants("ask"), "ask"],
};

describe("the decision on a call", () => {
  it.each(Object.entries(EXAMPLES))("%s decides its example", (id, [call, given, expected]) => {
    const decided = decideCall(call, given);
    expect(decided.rule).toBe(id);
    expect(decided.decision).toBe(expected);
  });

  it("has an example for every rule, and a rule for every example", () => {
    expect(Object.keys(EXAMPLES).sort()).toEqual(CALL_RULES.map((rule) => rule.id).sort());
  });

  it("is the table docs/tools-and-safety.md shows, rule for rule, in order", () => {
    const section = DOC.slice(DOC.indexOf("### The order a call is decided in"));
    const rows = [...section.matchAll(/^\|\s*(\d+)\s*\|\s*`([a-z-]+)`\s*\|\s*(.+?)\s*\|$/gm)].map(
      (match) => ({
        at: Number(match[1]),
        id: match[2],
        says: match[3],
      }),
    );
    expect(rows).toEqual(CALL_RULES.map((rule, at) => ({ at: at + 1, id: rule.id, says: rule.says })));
  });

  it("runs a sandboxed call where the policy says, and widens it only as asked", () => {
    expect(decideCall(shell(), grants("never-ask")).sandbox).toEqual({ mode: "read-only", network: false });
    expect(decideCall(shell({ escalate: "network" }), grants("ask")).sandbox).toEqual({
      mode: "workspace-write",
      network: true,
    });
    expect(decideCall(shell(), readOnly("yolo", { network: true })).sandbox).toEqual({
      mode: "read-only",
      network: true,
    });
  });
});
