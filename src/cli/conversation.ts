/* One run as a conversation: each turn starts it or goes on with it, here or on the daemon. */
import type { RunTreeBuilder } from "../actors/run-tree.js";
import type { ApprovalPolicy } from "../config/policy-schemas.js";
import type { AgentOutput } from "../machines/agent-types.js";
import type { SandboxMode } from "../sandbox/plan.js";
import type { Output } from "./input-block.js";
import type { TtyApprover } from "./tty-approver.js";

/** What a conversation's run is started with, and where its approvals are asked. */
export interface ConversationOptions {
  agent?: string | undefined;
  workspace?: string | undefined;
  approval?: ApprovalPolicy | undefined;
  sandbox?: SandboxMode | undefined;
  mode?: "act" | "plan" | undefined;
  skill?: string | undefined;
  /** Every event as one JSON line on stdout, nothing else there. */
  json?: boolean | undefined;
  /** A run to go on with; a new one starts at the first turn when absent. */
  runId?: string | undefined;
  /**
   * The terminal's approver, asking once `shown(callId)` resolves (the question's event is on the
   * screen); undefined where there is no one to ask: approvals are then denied (local) or left to
   * others (the daemon).
   */
  asker?: ((shown?: (callId: string) => Promise<void>) => TtyApprover) | undefined;
  /** Where a turn is shown, when not straight on stdout and stderr (a chat keeps its input below). */
  screen?: { out: Output; err: Output; status: (text: string | undefined) => void } | undefined;
  /** Seconds to wait for NATS and a daemon (`--wait-daemon`). */
  waitDaemon?: string | undefined;
}

export interface Conversation {
  /** The run, once a turn started it (or the one gone on with). */
  readonly runId: string | undefined;
  readonly where: "local" | "daemon";
  /**
   * Starts the run with `text`, or goes on with it, `text` its user's next message (a finished,
   * aborted or unfinished run alike); shows the turn as `troupe run` does and resolves with why the
   * run's first agent stopped, once it has.
   */
  turn(text: string): Promise<AgentOutput["reason"]>;
  /** Said to the agent after its current tool batch; throws a `UserError` when it cannot take it. */
  steer(text: string): Promise<void>;
  /** Aborts the turn going on; the run stays, and the next turn goes on with it. */
  abort(): Promise<void>;
  /**
   * Compacts the run's conversation now, between turns: all but its last turn summarised by its
   * model. Resolves with its tokens before and after; a `UserError` when there is no run yet, or
   * it could not.
   */
  compact(): Promise<{ tokensBefore: number; tokensAfter: number }>;
  /**
   * The approval policy and the model of the turns after this one. A turn whose start refuses them (a
   * policy beyond the daemon's ceiling, a model the config does not name) drops them.
   */
  setApproval(policy: ApprovalPolicy): void;
  setModel(model: string): void;
  /** Every agent of the run as the events read so far describe it: state and spend. */
  readonly tree: RunTreeBuilder;
  close(): Promise<void>;
}
