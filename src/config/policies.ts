/** Approval policies, loosest last. Kept apart from the schemas so the CLI can list them without loading zod. */
export const APPROVAL_POLICIES = ["ask", "auto-edit", "never-ask", "yolo"] as const;
export type ApprovalPolicyName = (typeof APPROVAL_POLICIES)[number];
