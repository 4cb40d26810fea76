/**
 * Who connects to Troupe's NATS. The daemon hosts runs and serves the API; a worker hosts
 * subagents; a client (`troupe run`, `steer`, `abort`, `status`) starts and commands runs through
 * the API; an approver answers approvals; an observer only watches.
 */
export const ROLES = ["daemon", "worker", "client", "approver", "observer"] as const;
export type Role = (typeof ROLES)[number];
