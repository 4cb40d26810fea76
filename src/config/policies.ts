/** Approval policies, as --help lists them. Kept apart from the schemas so the CLI can list them without loading zod. */
export const APPROVAL_POLICIES = ["ask", "auto-edit", "never-ask", "yolo"] as const;
export type ApprovalPolicyName = (typeof APPROVAL_POLICIES)[number];

/** Sandbox modes, strictest first (see src/sandbox/plan.ts for what each allows). */
export const SANDBOX_MODES = ["read-only", "workspace-write", "off"] as const;

/**
 * How much each policy lets happen unasked: `ask` nothing that writes or runs, `never-ask` commands
 * known to only read (in a read-only sandbox), `auto-edit` file writes and commands in a
 * workspace-write sandbox, `yolo` everything. `daemon.maxApproval` caps what a client may ask for.
 */
export const POLICY_RANK: Readonly<Record<ApprovalPolicyName, number>> = {
  ask: 0,
  "never-ask": 1,
  "auto-edit": 2,
  yolo: 3,
};
