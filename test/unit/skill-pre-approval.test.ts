import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { CallJudgement } from "../../src/approvals/policy.js";
import type { ApprovalPolicy } from "../../src/config/policy-schemas.js";
import { planCalls } from "../../src/tools/plan.js";
import { defineTool, ToolRegistry } from "../../src/tools/tool.js";

/* A skill's allowed-tools only spares the asking: what the policy denies, a command leaving the
 * sandbox and a call that could not be understood are decided as without it. */

const judged = (name: string, effect: "write" | "execute", sandboxed: boolean) =>
  defineTool({
    name,
    description: name,
    effect,
    sandboxed,
    parameters: z.object({ how: z.enum(["plain", "network", "unclear", "dangerous"]) }),
    judge: ({ how }): CallJudgement =>
      how === "network"
        ? { safe: false, escalate: "network" }
        : how === "unclear"
          ? { safe: false, understood: false }
          : how === "dangerous"
            ? { safe: false, dangerous: "rm -rf /" }
            : { safe: false },
    execute: () => ({ ok: true, output: "" }),
  });

const registry = new ToolRegistry([judged("shell", "execute", true), judged("deploy", "execute", false)]);
const allowed = new Set(["shell", "deploy"]);

function decision(name: string, how: string, policy: ApprovalPolicy, preApproved: boolean) {
  const [planned] = planCalls(
    [{ id: "c", type: "function", function: { name, arguments: JSON.stringify({ how }) } }],
    registry,
    allowed,
    policy,
    { sandbox: { network: false }, ...(preApproved ? { preApproved: () => "a-skill" } : {}) },
  );
  return planned?.decision;
}

describe("a tool pre-approved by a loaded skill", () => {
  it("runs without asking where the policy would ask", () => {
    expect(decision("deploy", "plain", "ask", false)).toBe("ask");
    expect(decision("deploy", "plain", "ask", true)).toBe("allow");
    expect(decision("shell", "plain", "ask", false)).toBe("ask");
    expect(decision("shell", "plain", "ask", true)).toBe("allow");
  });

  it("is still asked about when a command leaves the sandbox, or a call cannot be understood", () => {
    expect(decision("shell", "network", "ask", true)).toBe("ask");
    expect(decision("shell", "network", "auto-edit", true)).toBe("ask");
    expect(decision("deploy", "unclear", "ask", true)).toBe("ask");
  });

  it("is denied where the policy denies", () => {
    expect(decision("deploy", "plain", "never-ask", true)).toBe("deny");
    expect(decision("shell", "network", "never-ask", true)).toBe("deny");
    expect(decision("shell", "dangerous", "ask", true)).toBe("deny");
  });
});
