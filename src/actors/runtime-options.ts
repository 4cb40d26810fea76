/* What a runtime is made with, and what one run on it asks for. */
import type { Approver } from "../approvals/approver.js";
import type { Bus } from "../bus/bus.js";
import type { LoadedConfig } from "../config/load.js";
import type { ApprovalPolicy } from "../config/policy-schemas.js";
import type { Logger } from "../log.js";
import type { ModelRouterOptions } from "../model/model-router.js";
import type { SandboxMode } from "../sandbox/plan.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { Telemetry } from "../telemetry/telemetry.js";
import type { Tool } from "../tools/tool.js";
import type { RecordSeal } from "../trust/record-seal.js";
import type { AgentHooks } from "./agent-hooks.js";

export interface RuntimeOptions {
  config: LoadedConfig;
  /** Default: a LocalBus (the single-process mode). */
  bus?: Bus;
  log?: Logger;
  env?: NodeJS.ProcessEnv;
  /** Default: the config's `workspace`, relative to the working directory. */
  workspace?: string;
  /** Default: deny every request (nobody to ask). */
  approver?: Approver;
  /** Tools besides the built-in ones. */
  tools?: Tool[];
  /** Hooks as functions: block or change tool calls, replace results, stop after a turn, swap the model. */
  hooks?: AgentHooks;
  models?: ModelRouterOptions;
  /** Where commands are confined; default: this machine's (bubblewrap on Linux), found once. */
  sandbox?: Sandbox;
  /**
   * The daemon's seal (its data dir's records key): the snapshots and journal entries this runtime
   * writes carry it, and what it reads back without it is not taken (a worker's seed can write
   * those buckets). Default: none, as a worker or a local run has.
   */
  seal?: RecordSeal;
  /**
   * The process's telemetry (docs/telemetry.md): spans and metrics of every agent this runtime hosts.
   * Default: none. It is the process's to shut down, as several runtimes may share it.
   */
  telemetry?: Telemetry;
}

export interface RunOptions {
  task: string;
  /** Default: the config's `defaultAgent`, else `assistant`, else the first agent. */
  agent?: string;
  approval?: ApprovalPolicy;
  /** A skill to load before the first model call (a task starting `/skill:NAME` says the same). */
  skill?: string;
  /** `plan`: read tools only, a capped turn budget, a prompt asking for a plan. */
  mode?: "act" | "plan";
  /** Where this run's commands are confined (overrides the agent's and the config's). */
  sandbox?: SandboxMode;
  runId?: string;
  /** The run's first agent's id; default: its name and a random suffix (`newAgentId`). */
  agentId?: string;
  /**
   * No tool of the run runs before this settles, nor at all if it rejects (its batch fails and the
   * agent stops): the daemon writes the run's record meanwhile, so that no command runs for a run
   * that status, abort and resume could not find, without the agent waiting for it to start.
   */
  toolsAfter?: Promise<unknown>;
  /** The W3C `traceparent` the run was started in: its spans go under that span, in its trace. */
  traceparent?: string;
}
