/* The approval policies and sandbox modes of policies.ts as schemas, for the files that validate them. */
import { z } from "zod";
import { APPROVAL_POLICIES, SANDBOX_MODES } from "./policies.js";

export const approvalPolicySchema = z.enum(APPROVAL_POLICIES);
export type ApprovalPolicy = z.infer<typeof approvalPolicySchema>;
export const sandboxModeSchema = z.enum(SANDBOX_MODES);
