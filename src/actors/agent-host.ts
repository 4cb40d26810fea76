import type { Snapshot } from "xstate";
import { readOnlyLimit } from "../approvals/policy.js";
import { RequestRefusedError } from "../bus/bus.js";
import { effectiveBudget } from "../config/budget.js";
import type { AgentDefinition, Budget } from "../config/schema.js";
import { buildSystemPrompt } from "../context/system-prompt.js";
import type { Logger } from "../log.js";
import { totalSpend, unreadRefusal } from "../machines/agent-machine.js";
import { persistedFacts } from "../machines/agent-persisted.js";
import { rebuild } from "../machines/agent-reopen.js";
import type { AgentCommand } from "../machines/agent-types.js";
import { ZERO_USAGE } from "../model/types.js";
import { UNTRUSTED_NOTE } from "../safety/untrusted.js";
import { ActiveSkills } from "../skills/active-skills.js";
import { withSkill } from "../skills/skills.js";
import { planCalls } from "../tools/plan.js";
import type { ToolRegistry } from "../tools/tool.js";
import { AgentActors, type AgentActorsSetup } from "./agent-actors.js";
import type { AgentDeps, AgentHandle, StartAgentOptions } from "./agent-deps.js";
import { toolGate } from "./agent-hooks.js";
import { type ResolvedAgentSettings, resolveAgentSettings } from "./agent-settings.js";
import { type AgentActor, type RecordFacts, reportSnapshots, SnapshotWriter } from "./agent-snapshots.js";
import { eventsUntilStopped, PLAN_NOTE } from "./agent-stream.js";
import { askEach, catalogueFor, skillDirsFor, toolView } from "./agent-tools.js";
import { Clearance } from "./clearance.js";
import { EventPublisher } from "./event-publisher.js";
import { armWall, hostedActor } from "./hosted-machine.js";
import { REBUILT_NOTE } from "./log-history.js";
import { newAgentId } from "./run-ids.js";
import { subagentTools } from "./subagents.js";

const NOTHING_SPENT = { usage: ZERO_USAGE, toolCalls: 0 };

/**
 * Hosts one agent machine: provides its actors (model call, approval wait, tool batch, compaction),
 * publishes its events, stores its snapshots, and resolves `done` with its output once every event
 * is in the log.
 */
export function startAgent(deps: AgentDeps, options: StartAgentOptions): AgentHandle {
  const { definition, runId, restore } = options;
  const agentId = options.agentId ?? newAgentId(definition.name);
  const log = deps.log.child({ component: "agent", runId, agentId });
  const settings = resolveAgentSettings(
    deps.config,
    options,
    (id) => deps.models.resolve(id),
    deps.sandbox ? deps.sandbox.unavailable : "there is no sandbox in this runtime",
  );
  const { budget } = settings;
  const events = new EventPublisher(deps.bus, runId, agentId, options.parentId, log, deps.redactor, {
    nextSeq: restore?.nextSeq ?? options.firstSeq ?? 0,
    epoch: options.epoch ?? 0,
  });
  const startedAt = Date.now() - (restore?.elapsedMs ?? 0);
  // The agent's parts are made before its actor (the actor runs them); they reach it through this.
  const link: { actor?: AgentActor } = {};
  const send = (command: AgentCommand) => link.actor?.send(command);

  const { actors, skills } = actorsOf(deps, options, settings, { agentId, events, startedAt, link, send });
  const input = {
    runId,
    agentId,
    name: definition.name,
    systemPrompt: buildSystemPrompt(
      definition,
      deps.workspace,
      [UNTRUSTED_NOTE, ...catalogueFor(definition, deps), ...(settings.mode === "plan" ? [PLAN_NOTE] : [])],
      { readHardLinks: deps.config.sandbox.readHardLinks, hiddenDirs: deps.hiddenDirs },
    ),
    budget,
    onToolError: definition.onToolError,
    elapsedMs: restore?.elapsedMs ?? 0,
  };
  const snapshot = options.rebuilt
    ? rebuild(input, options.rebuilt)
    : (restore?.snapshot as Snapshot<unknown>);
  const { actor, release: unhost } = hostedActor(actors, { input, ...(restore ? { snapshot } : {}) });
  link.actor = actor;

  // Commands reach an agent on its control subjects, from its parent or any client (acked by reply).
  const command = refusingUnread(actor);
  const control = deps.controls.serve(runId, agentId, command);
  let disarmWall = () => {};
  const release = () => {
    control.unsubscribe();
    disarmWall();
    unhost();
  };
  // Stops here without a word or a save: another host goes on from the stored snapshot.
  const stopHere = () => {
    release();
    actor.stop();
  };
  let movedAway = () => {};
  const moved = new Promise<void>((resolve) => (movedAway = resolve));
  const writer = new SnapshotWriter(actor, {
    store: deps.persistence?.agents,
    events,
    redactor: deps.redactor,
    facts: recordFacts(options, settings, agentId),
    startedAt,
    moved: () => {
      log.warn("another host took this agent over: let go of it here, saying nothing more");
      events.silence();
      stopHere();
      movedAway();
    },
  });
  const done = reportSnapshots(actor, {
    events,
    log,
    commandHooks: deps.commandHooks,
    agent: { runId, agentId, name: definition.name },
    changed: () => writer.save(),
    stopped: (reason) => {
      release();
      return closeApprovals(deps, log, { runId, agentId }, reason);
    },
  });

  disarmWall = begin(actor, options, { settings, events, log, skills, workspace: deps.workspace });

  return {
    runId,
    agentId,
    done,
    steer: (text) => command({ type: "STEER", text }),
    followUp: (text) => command({ type: "FOLLOW_UP", text }),
    abort: (reason) => actor.send({ type: "ABORT", ...(reason ? { reason } : {}) }),
    snapshot: () => writer.persisted(),
    events: () => eventsUntilStopped(deps.bus, runId, agentId),
    detach: () => {
      writer.detach();
      stopHere();
    },
    moved,
  };
}

/**
 * Sends a command from outside (a client, a parent): a steer or follow-up past what the agent holds
 * unread throws `RequestRefusedError`, saying why, for its sender to hear rather than be dropped.
 */
function refusingUnread(actor: AgentActor): (command: AgentCommand) => void {
  return (command) => {
    const refusal = unreadRefusal(actor.getSnapshot().context, command);
    if (refusal) throw new RequestRefusedError(refusal);
    actor.send(command);
  };
}

/**
 * Starts the actor: a new agent announces itself and takes its task (after the skill it starts
 * with); a resumed one goes on from its state, its wall armed on this host's clock. Returns what
 * disarms the wall.
 */
function begin(
  actor: AgentActor,
  options: StartAgentOptions,
  parts: {
    settings: ResolvedAgentSettings;
    events: EventPublisher;
    log: Logger;
    skills: ActiveSkills;
    workspace: string;
  },
): () => void {
  const { restore, definition } = options;
  const { settings, events, log } = parts;
  if (restore) {
    actor.start();
    const state = String(actor.getSnapshot().value);
    log.info({ state }, "agent resumed from its snapshot");
    // Taken over from a worker that went silent: readers learn the new epoch before anything that
    // worker still sends when its link comes back, and drop that.
    if (options.epoch || options.rebuilt)
      events.emit("agent.resumed", { state, ...(options.rebuilt ? { rebuilt: true as const } : {}) });
    // Rebuilt from the log: it is told so, and goes on.
    if (options.rebuilt) actor.send({ type: "START", task: REBUILT_NOTE });
    const disarm =
      actor.getSnapshot().status === "active"
        ? armWall(settings.budget.maxWallMs, restore.elapsedMs, (type) => actor.send({ type }))
        : () => {};
    // A reopened agent waits in idle: its follow-up is the task it starts again with.
    if (options.followUp !== undefined) actor.send({ type: "START", task: options.followUp });
    return disarm;
  }
  events.emit("agent.started", {
    name: definition.name,
    model: settings.model.id,
    task: options.task,
    budget: settings.budget,
    depth: settings.depth,
    ...(options.parentId ? { parentId: options.parentId } : {}),
    workspace: parts.workspace,
  });
  actor.start();
  if (options.skill) parts.skills.loaded(options.skill);
  actor.send({ type: "START", task: options.skill ? withSkill(options.skill, options.task) : options.task });
  return () => {};
}

/** The actors the agent's machine invokes, with the tools, subagents and skills they work with. */
function actorsOf(
  deps: AgentDeps,
  options: StartAgentOptions,
  settings: ResolvedAgentSettings,
  agent: {
    agentId: string;
    events: EventPublisher;
    startedAt: number;
    link: { actor?: AgentActor };
    send: (command: AgentCommand) => void;
  },
): { actors: AgentActors; skills: ActiveSkills } {
  const { definition, runId, restore } = options;
  const { agentId, events } = agent;
  const children = childrenOf(deps, options, { ...agent, budget: settings.budget, depth: settings.depth });
  const own = [...children, ...(deps.moduleTools?.get(definition.name) ?? [])];
  const registry = own.length > 0 ? deps.tools.with(own) : deps.tools;
  const tools = toolView(
    [...definition.tools, ...own.map((tool) => tool.name)],
    registry,
    settings.readOnlyBecause !== undefined,
  );
  const skills = new ActiveSkills(
    (tool) => tools().allowed.has(tool),
    (data) => events.emit("skill.loaded", data),
  );
  const actors = new AgentActors({
    deps,
    definition,
    runId,
    agentId,
    events,
    chain: settings.chain,
    compaction: settings.compaction,
    reply: settings.reply,
    registry,
    tools,
    clearance: clearanceOf(deps, settings, { runId, agentId, events, registry, tools, skills }),
    skillDirs: skillDirsFor(definition, deps, options.skill?.name),
    skills,
    ...journalOf(deps, runId, agentId, restore),
    ...(gateOf(deps, runId, agentId, definition.name) ?? {}),
    ...(settings.readOnlyBecause !== undefined ? { sandboxLimit: readOnlyLimit(settings.sandbox) } : {}),
    turns: restore ? persistedFacts(restore.snapshot).turns : 0,
    resumed: restore !== undefined,
  });
  return { actors, skills };
}

/** The subagent tools of an agent: each starts a child here, or on a worker when one takes it. */
function childrenOf(
  deps: AgentDeps,
  options: StartAgentOptions,
  agent: {
    agentId: string;
    budget: Budget;
    depth: number;
    events: EventPublisher;
    startedAt: number;
    link: { actor?: AgentActor };
    send: (command: AgentCommand) => void;
  },
) {
  const { definition, runId } = options;
  const defaults = deps.config.defaults.budget;
  return subagentTools(
    definition.subagents
      .map((name) => deps.agents.get(name))
      .filter((child): child is AgentDefinition => child !== undefined)
      .map((child) => ({ ...child, budget: effectiveBudget(child.budget, defaults) })),
    {
      bus: deps.bus,
      runId,
      agentId: agent.agentId,
      depth: agent.depth,
      budget: agent.budget,
      limits: deps.limits,
      events: agent.events,
      startedAt: agent.startedAt,
      spent: () => (agent.link.actor ? totalSpend(agent.link.actor.getSnapshot().context) : NOTHING_SPENT),
      charge: (delta) => agent.send({ type: "CHILD_SPENT", ...delta }),
      adopt: async (childId) => (deps.adoptChild ? deps.adoptChild(runId, childId) : undefined),
      commandHooks: deps.commandHooks,
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
}

/** What clears an agent's calls: the policy plans each batch, a person is asked where it says so. */
function clearanceOf(
  deps: AgentDeps,
  settings: ResolvedAgentSettings,
  agent: {
    runId: string;
    agentId: string;
    events: EventPublisher;
    registry: ToolRegistry;
    tools: ReturnType<typeof toolView>;
    skills: ActiveSkills;
  },
): Clearance {
  const { runId, agentId, events, registry, tools, skills } = agent;
  return new Clearance(
    (calls, withTools) =>
      planCalls(calls, registry, withTools ? tools().allowed : new Set(), settings.policy, {
        workspace: deps.workspace,
        readOnlyBecause: settings.readOnlyBecause,
        sandbox: settings.sandbox,
        preApproved: skills.preApproved,
        ...(withTools ? {} : { noToolsBecause: "this turn is for the final answer" }),
      }),
    (calls, signal) => askEach(deps, events, { runId, agentId }, calls, signal),
  );
}

/**
 * The agent's tool-call journal. A call that writes or executes starts only once the snapshot
 * holding it is stored: a host that dies while it runs comes back to the call (journaled as started:
 * its outcome is unknown), not to the model call before it, which would ask the model again and
 * might run the same thing twice.
 */
function journalOf(
  deps: AgentDeps,
  runId: string,
  agentId: string,
  restore: StartAgentOptions["restore"],
): { journal?: NonNullable<AgentActorsSetup["journal"]> } {
  const journal = deps.persistence?.journal.forAgent(runId, agentId, {
    fresh: !restore,
    beforeStart: () => deps.persistence?.agents.settled(runId, agentId) ?? Promise.resolve(),
  });
  return journal ? { journal } : {};
}

function gateOf(
  deps: AgentDeps,
  runId: string,
  agentId: string,
  agent: string,
): { gate: NonNullable<AgentActorsSetup["gate"]> } | undefined {
  const gate = toolGate(deps.commandHooks, deps.agentHooks, { runId, agentId, agent });
  return gate ? { gate } : undefined;
}

/** What the agent's record says of it besides its snapshot: who it is, and the rights it runs with. */
function recordFacts(
  options: StartAgentOptions,
  settings: ResolvedAgentSettings,
  agentId: string,
): RecordFacts {
  return {
    runId: options.runId,
    agentId,
    ...(options.parentId ? { parentId: options.parentId } : {}),
    name: options.definition.name,
    depth: settings.depth,
    task: options.restore?.task ?? options.task,
    budget: settings.budget,
    mode: settings.mode,
    ...(options.approval ? { approval: options.approval } : {}),
    ...(settings.sandboxMode ? { sandbox: settings.sandboxMode } : {}),
  };
}

/** Requests nobody answered are closed when the agent stops (not when it is let go: another host resumes it). */
async function closeApprovals(
  deps: AgentDeps,
  log: Logger,
  agent: { runId: string; agentId: string },
  reason: string,
): Promise<void> {
  const why = `the agent stopped (${reason}) before anyone answered`;
  await deps.approver
    .close?.(agent, why)
    .catch((error: Error) => log.warn({ err: error.message }, "could not close its approvals"));
}
