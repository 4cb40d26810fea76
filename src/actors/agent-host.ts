import type { Snapshot } from "xstate";
import type { Bus } from "../bus/bus.js";
import { ulid } from "../bus/ulid.js";
import { effectiveBudget } from "../config/budget.js";
import type { AgentDefinition, ApprovalPolicy, Budget, TroupeConfig } from "../config/schema.js";
import type { CompactionSettings } from "../context/compaction.js";
import { buildSystemPrompt } from "../context/system-prompt.js";
import type { Logger } from "../log.js";
import { AGENT_MACHINE_VERSION, failedOutput, totalSpend } from "../machines/agent-machine.js";
import type { AgentOutput } from "../machines/agent-types.js";
import type { ModelRouter } from "../model/model-router.js";
import type { Approver } from "../safety/approver.js";
import type { Redactor } from "../safety/redact.js";
import { UNTRUSTED_NOTE } from "../safety/untrusted.js";
import type { SandboxMode } from "../sandbox/plan.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { ActiveSkills } from "../skills/active-skills.js";
import { type LoadedSkill, type Skill, withSkill } from "../skills/skills.js";
import type { Hooks } from "../tools/hooks.js";
import { planCalls } from "../tools/plan.js";
import type { Tool, ToolRegistry } from "../tools/tool.js";
import { AgentActors } from "./agent-actors.js";
import { type AgentHooks, toolGate } from "./agent-hooks.js";
import { AGENT_RECORD_VERSION, type AgentRecord, type AgentStore, type ToolJournal } from "./agent-store.js";
import { type AgentControls, type AgentEvent, eventsUntilStopped, PLAN_NOTE } from "./agent-stream.js";
import { askEach, catalogueFor, skillDirsFor, toolView } from "./agent-tools.js";
import { Clearance } from "./clearance.js";
import { EventPublisher } from "./event-publisher.js";
import { armWall, hostedActor } from "./hosted-machine.js";
import { type ChildSpec, type SubagentLimits, subagentTools } from "./subagents.js";

/** What every agent of a process shares. */
export interface AgentDeps {
  bus: Bus;
  /** Where the agents of this process take their commands. */
  controls: AgentControls;
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
  /** Every agent definition, for the subagents an agent lists. */
  agents: ReadonlyMap<string, AgentDefinition>;
  limits: SubagentLimits;
  /** The hooks of troupe.yaml. */
  hooks?: Hooks;
  /** Hooks as functions (the library API). */
  agentHooks?: AgentHooks;
  /** Tools from the `toolModules` an agent names, by agent name. */
  moduleTools?: ReadonlyMap<string, Tool[]>;
  /** Finds a child a resumed parent had started: stopped (with its output), running, or none. */
  adoptChild?: (
    runId: string,
    childId: string,
  ) => Promise<{ stopped: AgentOutput } | { running: true } | undefined>;
  /** Hands a subagent to a worker; false when none took it (then this process hosts it). */
  placeElsewhere?: (runId: string, child: ChildSpec) => Promise<boolean>;
  /** Snapshots and the tool-call journal in KV; without it nothing survives the process. */
  persistence?: { agents: AgentStore; journal: ToolJournal };
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
  /** `plan` for this run (overrides the agent's `mode`). */
  mode?: "act" | "plan";
  /** The sandbox mode for this run (overrides the agent's and the config's). */
  sandbox?: SandboxMode;
  /** With `restore` of a stopped agent: the instruction it goes on with. */
  continueWith?: string;
  /** The seq of its first event: past those an earlier host of this agent logged before it died. Default 0. */
  firstSeq?: number;
  /**
   * Resume this agent from its stored record instead of starting it. Its rights (depth, mode,
   * policy, sandbox) are the options above, never the record's: see `Runtime.resume`.
   */
  restore?: AgentRecord;
}

/** A running agent: its id, its result when it stops, and the commands it takes. */
export interface AgentHandle {
  readonly runId: string;
  readonly agentId: string;
  readonly done: Promise<AgentOutput>;
  steer(text: string): void;
  followUp(text: string): void;
  abort(reason?: string): void;
  /** The machine's persisted snapshot: everything the agent is, as JSON. */
  snapshot(): unknown;
  /** Stops hosting the agent here, saving and publishing nothing: another host resumes it. */
  detach(): void;
  /** Every event of the run from its start (subagents' too), ending with this agent's `agent.stopped`. */
  events(): AsyncIterable<AgentEvent>;
}

/**
 * Hosts one agent machine: provides its actors (model call, approval wait, tool batch, compaction),
 * publishes its events, and resolves `done` with its output once every event is in the log.
 */
export function startAgent(deps: AgentDeps, options: StartAgentOptions): AgentHandle {
  const { definition, runId } = options;
  const agentId = options.agentId ?? `${definition.name}-${ulid().slice(-8).toLowerCase()}`;
  const log = deps.log.child({ component: "agent", runId, agentId });
  const restore = options.restore;
  const events = new EventPublisher(
    deps.bus,
    runId,
    agentId,
    options.parentId,
    log,
    deps.redactor,
    restore?.nextSeq ?? options.firstSeq ?? 0,
  );
  const policy = definition.approval ?? options.approval ?? deps.config.approval.policy;
  const chain = [definition.model ?? deps.config.defaultModel, ...definition.fallbackModels];
  const primary = deps.models.resolve(chain[0] as string);
  const compaction: CompactionSettings = { contextWindow: primary.contextWindow };
  const reply = Math.min(4096, Math.floor(primary.contextWindow * 0.1));
  const depth = options.depth ?? 0;
  // Every subagent is read-only, whatever its YAML says; so is an agent marked readOnly, and one planning.
  const mode = options.mode ?? definition.mode ?? "act";
  const planning = mode === "plan";
  const defaults = deps.config.defaults.budget;
  const given = restore?.budget ?? options.budget ?? effectiveBudget(definition.budget, defaults);
  const budget = planning
    ? { ...given, maxTurns: Math.min(given.maxTurns ?? Number.POSITIVE_INFINITY, deps.config.plan.maxTurns) }
    : given;
  const readOnlyBecause = planning
    ? "in plan mode"
    : depth > 0 || definition.readOnly
      ? "read-only"
      : undefined;
  const sandboxMode = options.sandbox ?? definition.sandbox ?? deps.config.sandbox.mode;
  const sandbox = {
    unavailable: deps.sandbox ? deps.sandbox.unavailable : "there is no sandbox in this runtime",
    mode: sandboxMode,
    network: deps.config.sandbox.network,
  };
  const startedAt = Date.now() - (restore?.elapsedMs ?? 0);
  const gate = toolGate(deps.hooks, deps.agentHooks, { runId, agentId, agent: definition.name });
  const store = deps.persistence?.journal;
  // A call that writes or executes starts only once the snapshot holding it is stored: a host that
  // dies while it runs comes back to the call (journaled as started: its outcome is unknown), not to
  // the model call before it, which would ask the model again and might run the same thing twice.
  const journal = store?.forAgent(runId, agentId, {
    fresh: !restore,
    beforeStart: () => deps.persistence?.agents.settled(runId, agentId) ?? Promise.resolve(),
  });
  const children = subagentTools(
    definition.subagents
      .map((name) => deps.agents.get(name))
      .filter((child): child is AgentDefinition => child !== undefined)
      .map((child) => ({ ...child, budget: effectiveBudget(child.budget, defaults) })),
    {
      bus: deps.bus,
      runId,
      agentId,
      depth,
      budget,
      limits: deps.limits,
      events,
      startedAt,
      spent: () => totalSpend(actor.getSnapshot().context),
      charge: (delta) => actor.send({ type: "CHILD_SPENT", ...delta }),
      adopt: async (childId) => (deps.adoptChild ? deps.adoptChild(runId, childId) : undefined),
      hooks: deps.hooks,
      spawn: async (child) => {
        // A worker takes it when one is attached; otherwise this process hosts it.
        if (await deps.placeElsewhere?.(runId, child)) return;
        startAgent(deps, {
          definition: child.definition,
          task: child.task,
          runId,
          agentId: child.childId,
          parentId: child.parentId,
          depth: child.depth,
          budget: child.budget,
        });
      },
    },
  );
  const own = [...children.tools, ...(deps.moduleTools?.get(definition.name) ?? [])];
  const registry = own.length > 0 ? deps.tools.with(own) : deps.tools;
  const tools = toolView(
    [...definition.tools, ...own.map((tool) => tool.name)],
    registry,
    readOnlyBecause !== undefined,
  );
  const skills = new ActiveSkills(
    (tool) => tools().allowed.has(tool),
    (data) => events.emit("skill.loaded", data),
  );
  const skillDirs = skillDirsFor(definition, deps, options.skill?.name);
  const clearance = new Clearance(
    (calls, withTools) =>
      planCalls(calls, registry, withTools ? tools().allowed : new Set(), policy, {
        workspace: deps.workspace,
        readOnlyBecause,
        sandbox,
        preApproved: skills.preApproved,
        ...(withTools ? {} : { noToolsBecause: "this turn is for the final answer" }),
      }),
    (calls, signal) => askEach(deps, events, { runId, agentId }, calls, signal),
  );

  const hosted = new AgentActors({
    deps,
    definition,
    runId,
    agentId,
    events,
    chain,
    compaction,
    reply,
    registry,
    tools,
    clearance,
    children,
    skillDirs,
    skills,
    ...(journal ? { journal } : {}),
    ...(gate ? { gate } : {}),
    turns: restore ? ((restore.snapshot as { context?: { turns?: number } }).context?.turns ?? 0) : 0,
    resumed: restore !== undefined,
    fail: (error) => actor.send({ type: "FAIL", error }),
  });

  const { actor, release: unhost } = hostedActor(hosted, {
    input: {
      runId,
      agentId,
      name: definition.name,
      systemPrompt: buildSystemPrompt(definition, deps.workspace, [
        UNTRUSTED_NOTE,
        ...catalogueFor(definition, deps),
        ...(planning ? [PLAN_NOTE] : []),
      ]),
      budget,
      elapsedMs: restore?.elapsedMs ?? 0,
    },
    ...(restore ? { snapshot: restore.snapshot as Snapshot<unknown> } : {}),
  });

  if (!restore) {
    events.emit("agent.started", {
      name: definition.name,
      model: primary.id,
      task: options.task,
      budget,
      depth,
      ...(options.parentId ? { parentId: options.parentId } : {}),
    });
  }

  // Commands reach an agent on its control subjects, from its parent or any client (acked by reply).
  const control = deps.controls.serve(runId, agentId, (event) => actor.send(event));
  let disarmWall = () => {};
  const release = () => {
    control.unsubscribe();
    disarmWall();
    unhost();
  };

  // Requests nobody answered are closed when the agent stops (not when it is let go: another host resumes it).
  const closeApprovals = async (reason: string) => {
    const why = `the agent stopped (${reason}) before anyone answered`;
    await deps.approver
      .close?.({ runId, agentId }, why)
      .catch((error: Error) => log.warn({ err: error.message }, "could not close its approvals"));
  };

  // A resumed agent starts in its restored state: entering it again is not a transition.
  let state = String(actor.getSnapshot().value);
  let reported = JSON.stringify(totalSpend(actor.getSnapshot().context));
  const done = new Promise<AgentOutput>((resolve) => {
    actor.subscribe({
      next: (snapshot) => {
        const next = String(snapshot.value);
        if (next !== state) {
          events.emit("state.changed", { from: state, to: next });
          state = next;
          save();
        }
        const spend = totalSpend(snapshot.context);
        const key = JSON.stringify(spend);
        if (key !== reported) {
          reported = key;
          events.emit("usage.updated", {
            usage: spend.usage,
            toolCalls: spend.toolCalls,
            turns: snapshot.context.turns,
          });
        }
        if (snapshot.status === "done" && snapshot.output) {
          const output = snapshot.output;
          release();
          events.emit("agent.stopped", { ...output });
          void deps.hooks?.notify("agentStop", definition.name, {
            runId,
            agentId,
            reason: output.reason,
            result: output.result,
          });
          log.debug({ reason: output.reason, turns: output.turns }, "agent stopped");
          void Promise.all([events.flushed(), closeApprovals(output.reason)]).then(() => resolve(output));
        }
      },
      error: (error) => {
        log.error({ err: error }, "the agent machine failed");
        release();
        const output = failedOutput(actor.getSnapshot().context, error);
        events.emit("agent.stopped", output);
        void Promise.all([events.flushed(), closeApprovals(output.reason)]).then(() => resolve(output));
      },
    });
  });
  let detached = false;
  // A snapshot is written only after the events made before it are in the log: a record never
  // claims a seq the log lacks, so a resumed agent carries on without a gap. It is taken when its
  // turn to be written comes: of several state changes during one write, only the last is taken.
  const save = () => {
    const persistence = deps.persistence;
    if (!persistence || detached) return;
    void persistence.agents.save(runId, agentId, async () => {
      if (detached) return undefined;
      const record = takeRecord();
      await events.flushed();
      return record;
    });
  };
  // What is stored is redacted like everything else that leaves the process.
  const persisted = () => deps.redactor.redactDeep(actor.getPersistedSnapshot());
  const takeRecord = (): AgentRecord => {
    const snapshot = actor.getSnapshot();
    return {
      v: AGENT_RECORD_VERSION,
      machineVersion: AGENT_MACHINE_VERSION,
      runId,
      agentId,
      ...(options.parentId ? { parentId: options.parentId } : {}),
      name: definition.name,
      depth,
      task: restore?.task ?? options.task,
      budget,
      mode,
      ...(options.approval ? { approval: options.approval } : {}),
      ...(sandboxMode ? { sandbox: sandboxMode } : {}),
      nextSeq: events.nextSeq,
      elapsedMs: Date.now() - startedAt,
      snapshot: persisted(),
      done: snapshot.status === "done",
    };
  };
  actor.start();
  if (restore) {
    log.info({ state: String(actor.getSnapshot().value) }, "agent resumed from its snapshot");
    if (actor.getSnapshot().status === "active")
      disarmWall = armWall(budget.maxWallMs, restore.elapsedMs, (type) => actor.send({ type }));
    if (options.continueWith !== undefined) actor.send({ type: "START", task: options.continueWith });
  } else {
    if (options.skill) skills.loaded(options.skill);
    const task = options.skill ? withSkill(options.skill, options.task) : options.task;
    actor.send({ type: "START", task });
  }

  return {
    runId,
    agentId,
    done,
    steer: (text) => actor.send({ type: "STEER", text }),
    followUp: (text) => actor.send({ type: "FOLLOW_UP", text }),
    abort: (reason) => actor.send({ type: "ABORT", ...(reason ? { reason } : {}) }),
    snapshot: persisted,
    events: () => eventsUntilStopped(deps.bus, runId, agentId),
    detach: () => {
      // Another host takes over from the stored snapshot: stop here without a word or a save.
      detached = true;
      release();
      actor.stop();
    },
  };
}
