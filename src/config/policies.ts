/** Approval policies, loosest last. Kept apart from the schemas so the CLI can list them without loading zod. */
export const APPROVAL_POLICIES = ["ask", "auto-edit", "never-ask", "yolo"] as const;
export type ApprovalPolicyName = (typeof APPROVAL_POLICIES)[number];

/** Sandbox modes, strictest first (see src/sandbox/plan.ts for what each allows). */
export const SANDBOX_MODES = ["read-only", "workspace-write", "off"] as const;
