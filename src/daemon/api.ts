import { createHash } from "node:crypto";
import { z } from "zod";
import { POLICY_SANDBOX } from "../approvals/policy.js";
import {
  APPROVAL_POLICIES,
  type ApprovalPolicyName,
  POLICY_RANK,
  SANDBOX_MODES,
} from "../config/policies.js";
import { STOP_REASONS } from "../events/agent-events.js";
import { MAX_TEXT } from "../limits.js";

/** What runs.list says of a task and a result: the whole is in runs.get. */
export const LIST_TEXT = 200;

/** How long Troupe's clients wait for the daemon's answer to an API request. */
export const API_REQUEST_TIMEOUT_MS = 10_000;

/**
 * A run named in a request: the shape Troupe gives run ids, at most 64 characters, checked before
 * it reaches a subject or a key (a 5,000-character one outgrew the server's control line and dropped
 * the daemon's connection at each lookup).
 */
const runRef = z
  .string()
  .regex(
    /^[A-Za-z0-9_-]{1,64}$/,
    'a run id is at most 64 letters, digits, "_" or "-" (troupe runs lists them)',
  );
/** A name from troupe.yaml (an agent, a skill): as the config allows them, never a path or a subject. */
const nameRef = z
  .string()
  .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'a name is at most 64 letters, digits, ".", "_" or "-"');

/**
 * The daemon's API on `<p>.api.<verb>` (request/reply). Each request's `data` is checked against its
 * schema; a malformed one gets an error reply and the daemon carries on.
 */
export const apiRequests = {
  "runs.start": z.strictObject({
    task: z
      .string()
      .min(1, "say what to do")
      .max(
        MAX_TEXT,
        `a task is at most ${MAX_TEXT} characters: put the text in a file in the workspace and name the file in the task`,
      ),
    /** Chosen by the client (a fresh `run-<ulid>`), so it can follow the run's events before it starts. */
    runId: z
      .string()
      .regex(/^run-[0-9a-z]{26}$/, "a run id is run- and a lower-case ULID")
      .optional(),
    agent: nameRef.optional(),
    approval: z.enum(APPROVAL_POLICIES).optional(),
    mode: z.enum(["act", "plan"]).optional(),
    sandbox: z.enum(SANDBOX_MODES).optional(),
    skill: nameRef.optional(),
    /** An absolute path; it must lie in one of the daemon's workspaces. Default: the daemon's own. */
    workspace: z.string().startsWith("/", "an absolute path").max(4096, "at most 4096 characters").optional(),
    /** The W3C `traceparent` the run was asked in: its spans go under that span (docs/telemetry.md). */
    traceparent: z
      .string()
      .regex(/^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/, "a W3C traceparent: 00-<32 hex>-<16 hex>-<2 hex>")
      .optional(),
  }),
  "runs.list": z.strictObject({}),
  "runs.get": z.strictObject({ runId: runRef }),
  /**
   * Continue an unfinished or aborted run from its snapshot; with `text`, a finished one too, `text`
   * its user's next message. `approval` is the run's policy from then on (held to the ceiling);
   * `model` the model its first agent goes on with, one troupe.yaml or an agent names.
   */
  "runs.resume": z.strictObject({
    runId: runRef,
    text: z.string().min(1).max(MAX_TEXT).optional(),
    approval: z.enum(APPROVAL_POLICIES).optional(),
    model: z
      .string()
      .regex(/^[A-Za-z0-9_.:/-]{1,128}$/, 'a model is at most 128 letters, digits, ".", "_", ":", "/" or "-"')
      .optional(),
  }),
  /**
   * Compact a stopped run's conversation now (all but its last turn summarised by its model): the
   * reply, once it is done, says its tokens before and after. A running run is refused: between turns.
   */
  "runs.compact": z.strictObject({ runId: runRef }),
  "runs.abort": z.strictObject({ runId: runRef, reason: z.string().max(MAX_TEXT).optional() }),
  "runs.steer": z.strictObject({ runId: runRef, text: z.string().min(1).max(MAX_TEXT) }),
  "runs.followUp": z.strictObject({ runId: runRef, text: z.string().min(1).max(MAX_TEXT) }),
  "agents.list": z.strictObject({}),
} as const;

export type ApiVerb = keyof typeof apiRequests;
export type ApiRequest<V extends ApiVerb> = z.infer<(typeof apiRequests)[V]>;

/**
 * What a runs.start asked, as one digest: its task, agent, approval, mode, sandbox, skill and
 * workspace, each as given (absent is not the default). Two requests have the same digest exactly
 * when they asked the same of the daemon.
 */
export function askedDigest(request: Omit<ApiRequest<"runs.start">, "runId">): string {
  const { task, agent, approval, mode, sandbox, skill, workspace } = request;
  const asked = [task, agent, approval, mode, sandbox, skill, workspace].map((value) => value ?? null);
  return createHash("sha256").update(JSON.stringify(asked)).digest("base64url");
}

/** One run as the daemon's run index (KV bucket `runs`) keeps it. */
export const runRecordSchema = z.object({
  runId: z.string(),
  /** The agent the run started with. */
  agentId: z.string(),
  agent: z.string(),
  task: z.string(),
  status: z.enum(["running", ...STOP_REASONS]),
  startedAt: z.number(),
  stoppedAt: z.number().optional(),
  result: z.string().optional(),
  /** What the run spent in all, its subagents' too, once it has stopped. */
  usage: z
    .object({
      inputTokens: z.number(),
      outputTokens: z.number(),
      cachedInputTokens: z.number(),
      costUsd: z.number(),
    })
    .optional(),
  /** What the run was started with: a resumed run gets these back, whatever its snapshot says. */
  approval: z.enum(APPROVAL_POLICIES).optional(),
  mode: z.enum(["act", "plan"]).optional(),
  sandbox: z.enum(SANDBOX_MODES).optional(),
  skill: z.string().optional(),
  /** Where it runs, when not in the daemon's own workspace. */
  workspace: z.string().optional(),
  /**
   * `askedDigest` of the runs.start that made it: another runs.start under its id follows this run
   * only when it asked the same (`troupe run --id`). Absent in records from before it was kept.
   */
  asked: z.string().optional(),
});
export type RunRecord = z.infer<typeof runRecordSchema>;

/**
 * Why a runs.start asks for more than `daemon.maxApproval` allows, or undefined when it does not: a
 * looser policy than the ceiling, or a looser sandbox than the ceiling's own (sandbox off needs yolo).
 */
export function beyondCeiling(
  request: {
    approval?: ApprovalPolicyName | undefined;
    sandbox?: (typeof SANDBOX_MODES)[number] | undefined;
  },
  ceiling: ApprovalPolicyName,
): string | undefined {
  const raise = `raise daemon.maxApproval in troupe.yaml to allow it`;
  if (request.approval && POLICY_RANK[request.approval] > POLICY_RANK[ceiling])
    return `approval "${request.approval}" is beyond this daemon's maxApproval "${ceiling}": ${raise}`;
  const widest = POLICY_SANDBOX[ceiling];
  if (request.sandbox && SANDBOX_MODES.indexOf(request.sandbox) > SANDBOX_MODES.indexOf(widest))
    return `sandbox "${request.sandbox}" is beyond what maxApproval "${ceiling}" allows ("${widest}"): ${raise}`;
  return undefined;
}
