import type { Approver } from "../approvals/approver.js";
import type { Bus } from "../bus/bus.js";
import type { AgentDefinition } from "../config/agent-schema.js";
import type { Budget } from "../config/budget-schema.js";
import type { ApprovalPolicy } from "../config/policy-schemas.js";
import type { TroupeConfig } from "../config/schema.js";
import type { AgentEvent } from "../events/agent-events.js";
import type { Logger } from "../log.js";
import type { RebuiltHistory } from "../machines/agent-reopen.js";
import type { AgentOutput } from "../machines/agent-types.js";
import type { ModelRouter } from "../model/model-router.js";
import type { Redactor } from "../safety/redact.js";
import type { SandboxMode } from "../sandbox/plan.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { LoadedSkill, Skill } from "../skills/skills.js";
import type { Telemetry } from "../telemetry/telemetry.js";
import type { CommandHooks } from "../tools/command-hooks.js";
import type { Tool, ToolRegistry } from "../tools/tool.js";
import type { AgentHooks } from "./agent-hooks.js";
import type { AgentRecord, AgentStore, ToolJournal } from "./agent-store.js";
import type { AgentControls } from "./agent-stream.js";
import type { HostedMachines } from "./hosted-machine.js";
import type { ChildSpec, ParentSide, SubagentLimits } from "./subagents.js";

/*
 * The types an agent's host and its parts share: what a process gives every agent it hosts, what
 * one agent is started with, and what its starter gets back.
 */

/** What every agent of a process shares. */
export interface AgentDeps {
  bus: Bus;
  /** Where the agents of this process take their commands. */
  controls: AgentControls;
  /** The agent machine as this runtime provides it, and which host each of its actors has. */
  machines: HostedMachines;
  models: ModelRouter;
  tools: ToolRegistry;
  config: TroupeConfig;
  approver: Approver;
  workspace: string;
  log: Logger;
  /** Secrets out of events, tool results and approval requests. */
  redactor: Redactor;
  /** Directories in the workspace no tool may change (the config dir). */
  protectedDirs: string[];
  /** Directories no tool may read or change (the data dir). */
  hiddenDirs: string[];
  /** Where commands are confined; without one, every command must be asked for. */
  sandbox?: Sandbox;
  /** Every skill there is; an agent's `skills:` picks from them. */
  skills: ReadonlyMap<string, Skill>;
  /** Skills left out (a SKILL.md that is a link, a FIFO…), one line each, for the catalogue. */
  skippedSkills?: readonly string[];
  /** Every agent definition, for the subagents an agent lists. */
  agents: ReadonlyMap<string, AgentDefinition>;
  limits: SubagentLimits;
  /** The hooks of troupe.yaml. */
  commandHooks?: CommandHooks;
  /** Hooks as functions (the library API). */
  agentHooks?: AgentHooks;
  /** Tools from the `toolModules` an agent names, by agent name. */
  moduleTools?: ReadonlyMap<string, Tool[]>;
  /** Starts an agent's children and finds them again: the runtime's. */
  spawner: Spawner;
  /** Snapshots and the tool-call journal in KV; without it nothing survives the process. */
  persistence?: { agents: AgentStore; journal: ToolJournal };
  /** This process's telemetry, when it is on: it sees every event its agents publish. */
  telemetry?: Telemetry | undefined;
}

/** Where an agent's tools work: its workspace, and what in it no tool may change or read. */
export type ToolPlace = Pick<AgentDeps, "workspace" | "protectedDirs" | "hiddenDirs">;

/**
 * How a parent's subagent calls reach children: the runtime starts each (on a worker when one takes
 * it, else in its own process) and finds again one a resumed parent had started.
 */
export interface Spawner {
  spawn(runId: string, child: ChildSpec): Promise<void>;
  /** A child a resumed parent had started: stopped (with its output), running, or none. */
  adopt(runId: string, childId: string): ReturnType<ParentSide["adopt"]>;
}

export interface StartAgentOptions {
  definition: AgentDefinition;
  task: string;
  runId: string;
  agentId?: string;
  parentId?: string;
  /** The run's policy; the agent's own `approval` overrides it. */
  approval?: ApprovalPolicy;
  /** 0 for the agent a run starts with; a subagent is one deeper than its parent. */
  depth?: number;
  /** The budget carved out for a subagent; the definition's otherwise. */
  budget?: Budget;
  /** A skill loaded before the first model call. */
  skill?: LoadedSkill;
  /** Its tools run only once this settles, and none if it rejects (`RunOptions.toolsAfter`). */
  toolsAfter?: Promise<unknown>;
  /** `plan` for this run (overrides the agent's `mode`). */
  mode?: "act" | "plan";
  /** The sandbox mode for this run (overrides the agent's and the config's). */
  sandbox?: SandboxMode;
  /** With `restore` of a stopped agent (reopened): the follow-up it goes on with. */
  followUp?: string;
  /** With `restore` of a stopped agent (reopened to compact, `reopenToCompact`): compact, and stop again. */
  compact?: boolean;
  /** The seq of its first event: past those an earlier host of this agent logged before it died. Default 0. */
  firstSeq?: number;
  /** The W3C `traceparent` it starts in (its parent's tool call, a run's caller): on its `agent.started`. */
  traceparent?: string | undefined;
  /**
   * The revision of its placement on a worker, stamped on its events (see `Envelope.epoch`); a
   * resumed agent with one was taken over from another worker, and says so (`agent.resumed`).
   */
  epoch?: number;
  /**
   * Resume this agent from its stored record instead of starting it. Its rights (depth, mode,
   * policy, sandbox) are the options above, never the record's: see `Runtime.resume`.
   */
  restore?: AgentRecord;
  /**
   * With `restore`: its snapshot could not be read, and this is its history from the event log
   * (log-history.ts), which the agent goes on from instead of the record's snapshot.
   */
  rebuilt?: RebuiltHistory;
}

/** A running agent: its id, its result when it stops, and the commands it takes. */
/** What a compaction a person asked for did: the conversation's tokens before and after, or why it failed. */
export type CompactionReport =
  | { tokensBefore: number; tokensAfter: number; summarized: number; pruned: number }
  | { error: string };

export interface AgentHandle {
  readonly runId: string;
  readonly agentId: string;
  readonly done: Promise<AgentOutput>;
  /** Throws `RequestRefusedError` when the agent holds as much unread as it may (`MAX_UNREAD`). */
  steer(text: string): void;
  /** Throws `RequestRefusedError` when the agent holds as many follow-ups as it may (`MAX_UNREAD`). */
  followUp(text: string): void;
  abort(reason?: string): void;
  /** The machine's persisted snapshot: everything the agent is, as JSON. */
  snapshot(): unknown;
  /** What the compaction a person asked for (`Runtime.compact`) did, once it ended; else undefined. */
  compaction(): CompactionReport | undefined;
  /** Stops hosting the agent here, saving and publishing nothing: another host resumes it. */
  detach(): void;
  /**
   * Resolves when the agent was let go because another host took it over (a snapshot write
   * conflicted): it was stopped here without another event, and `done`, if it had not resolved
   * yet, never does.
   */
  readonly moved: Promise<void>;
  /** Every event of the run from its start (subagents' too), ending with this agent's `agent.stopped`. */
  events(): AsyncIterable<AgentEvent>;
}
