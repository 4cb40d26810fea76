import { describe, expect, it } from "vitest";
import type { ApprovalRecord } from "../../src/approvals/approval-record.js";
import { approvalsTable } from "../../src/cli/approve.js";

const record = (command: string, escalation?: string): ApprovalRecord => ({
  v: 1,
  request: {
    runId: "run-1",
    agentId: "lead",
    callId: "c1",
    tool: "shell",
    arguments: JSON.stringify({ command }),
    effect: "execute",
    detail: escalation ? `${command}\n(asked because ${escalation})` : command,
    paths: [],
    ...(escalation ? { escalation } : {}),
  },
  requestId: "r1",
  nonce: "n",
  createdAt: 0,
  status: "pending",
  expiresAt: 60_000,
});

describe("troupe approvals", () => {
  it("says in its WHAT column that a call leaves the sandbox, before the command", () => {
    const table = approvalsTable([record("curl -s example.com", "it asks for network access")], 1000);
    expect(table).toMatch(/LEAVES THE SANDBOX "curl -s example\.com"/);
    expect(approvalsTable([record("ls")], 1000)).not.toContain("LEAVES THE SANDBOX");
  });
});
