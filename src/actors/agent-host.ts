import type { Snapshot } from "xstate";
import type { Approver } from "../approvals/approver.js";
import { readOnlyLimit } from "../approvals/policy.js";
import { RequestRefusedError, type Subscription } from "../bus/bus.js";
import type { AgentDefinition } from "../config/agent-schema.js";
import { effectiveBudget } from "../config/budget.js";
import { buildSystemPrompt } from "../context/system-prompt.js";
import type { AgentEvent } from "../events/agent-events.js";
import type { Logger } from "../log.js";
import { budgetLeft, totalSpend, unreadRefusal } from "../machines/agent-machine.js";
import { persistedFacts } from "../machines/agent-persisted.js";
import { rebuild } from "../machines/agent-reopen.js";
import type { AgentCommand, AgentOutput } from "../machines/agent-types.js";
import { ZERO_USAGE } from "../model/types.js";
import { UNTRUSTED_NOTE } from "../safety/untrusted.js";
import { ActiveSkills } from "../skills/active-skills.js";
import { AgentActors } from "./agent-actors.js";
import { begin } from "./agent-begin.js";
import type { AgentDeps, AgentHandle, CompactionReport, StartAgentOptions } from "./agent-deps.js";
import {
  clearanceOf,
  closeApprovals,
  gateOf,
  journalOf,
  questionsOf,
  recordFacts,
  resumeTelemetry,
  samplingOf,
} from "./agent-host-parts.js";
import { type ResolvedAgentSettings, resolveAgentSettings } from "./agent-settings.js";
import { type AgentActor, reportSnapshots, SnapshotWriter } from "./agent-snapshots.js";
import { eventsUntilStopped, PLAN_NOTE } from "./agent-stream.js";
import { catalogueFor, skillDirsFor, toolView } from "./agent-tools.js";
import { ApprovalWaits } from "./approval-waits.js";
import { EventPublisher } from "./event-publisher.js";
import { newAgentId } from "./run-ids.js";
import { subagentTools } from "./subagents.js";
import { keepTime, WallClock } from "./wall-clock.js";

const NOTHING_SPENT = { usage: ZERO_USAGE, toolCalls: 0 };

/** How a host lets go of its agent: the machine stopped, another host took it over, or it was handed on. */
export type HostStop = { finished: string } | "moved" | "detached";

/**
 * Hosts one agent machine. It is built in plain order: settings, events, tools, clearance, actors,
 * actor; then it serves the agent's commands, stores its snapshots, and resolves `done` with its
 * output once every event is in the log. `#stop` is the one way it lets go of the agent. Children
 * are started by the runtime (`deps.spawner`), not here.
 */
export class AgentHost implements AgentHandle {
  readonly runId: string;
  readonly agentId: string;
  readonly done: Promise<AgentOutput>;
  readonly moved: Promise<void>;
  readonly #log: Logger;
  readonly #settings: ResolvedAgentSettings;
  readonly #events: EventPublisher;
  readonly #actor: AgentActor;
  readonly #unhost: () => void;
  readonly #control: Subscription;
  readonly #writer: SnapshotWriter;
  readonly #command: (command: AgentCommand) => void;
  readonly #approver: Approver;
  readonly #deps: AgentDeps;
  readonly #clock: WallClock;
  readonly #waits: ApprovalWaits;
  readonly #actors: AgentActors;
  #stopClock = () => {};
  #released = false;
  #movedAway = () => {};

  constructor(deps: AgentDeps, options: StartAgentOptions) {
    this.#deps = deps;
    const { definition, restore } = options;
    this.runId = options.runId;
    this.agentId = options.agentId ?? newAgentId(definition.name);
    this.#log = deps.log.child({ component: "agent", runId: this.runId, agentId: this.agentId });
    this.#approver = deps.approver;
    this.moved = new Promise<void>((resolve) => (this.#movedAway = resolve));
    // Settings.
    this.#settings = resolveAgentSettings(
      deps.config,
      options,
      (id) => deps.models.resolve(id),
      deps.sandbox ? deps.sandbox.unavailable : "there is no sandbox in this runtime",
    );
    // Events.
    this.#events = new EventPublisher(
      deps.bus,
      this.runId,
      this.agentId,
      options.parentId,
      this.#log,
      deps.redactor,
      {
        nextSeq: restore?.nextSeq ?? options.firstSeq ?? 0,
        epoch: options.epoch ?? 0,
        watch: deps.telemetry,
      },
    );
    if (restore && deps.telemetry) resumeTelemetry(deps, options, this.agentId, this.#settings.model.id);
    // The wall counts the time worked, from what a resumed agent had worked and waited before.
    this.#clock = new WallClock(
      this.#settings.budget.maxWallMs,
      {
        workedMs: restore?.elapsedMs ?? 0,
        waitedMs: restore ? persistedFacts(restore.snapshot).waitedMs : 0,
      },
      (moment) => this.#actor.send({ type: moment }),
    );
    this.#waits = new ApprovalWaits(this.#events, this.#settings.budget.maxWaitMs, () =>
      this.#clock.waitedMs(),
    );
    // Tools, clearance and actors.
    const { actors, skills } = this.#actorsOf(options);
    this.#actors = actors;
    // The actor.
    const input = this.#inputOf(options);
    const snapshot = options.rebuilt
      ? rebuild(input, options.rebuilt)
      : (restore?.snapshot as Snapshot<unknown>);
    const hosted = deps.machines.host(actors, { input, ...(restore ? { snapshot } : {}) });
    this.#actor = hosted.actor;
    this.#unhost = hosted.release;
    // Commands reach an agent on its control subjects, from its parent or any client (acked by reply).
    this.#command = refusingUnread(this.#actor);
    this.#control = deps.controls.serve(this.runId, this.agentId, this.#command, !options.parentId);
    this.#writer = new SnapshotWriter(this.#actor, {
      store: deps.persistence?.agents,
      events: this.#events,
      redactor: deps.redactor,
      facts: recordFacts(options, this.#settings, this.agentId),
      workedMs: () => this.#clock.workedMs(),
      moved: () => this.#stop("moved"),
    });
    this.done = reportSnapshots(this.#actor, {
      events: this.#events,
      log: this.#log,
      commandHooks: deps.commandHooks,
      agent: { runId: this.runId, agentId: this.agentId, name: definition.name },
      changed: () => this.#writer.save(),
      stopped: (reason) => this.#stop({ finished: reason }),
    });
    begin(this.#actor, options, {
      settings: this.#settings,
      events: this.#events,
      log: this.#log,
      skills,
      workspace: deps.workspace,
    });
    this.#stopClock = keepTime(this.#actor, this.#clock);
  }

  steer(text: string): void {
    this.#command({ type: "STEER", text });
  }

  followUp(text: string): void {
    this.#command({ type: "FOLLOW_UP", text });
  }

  abort(reason?: string): void {
    this.#actor.send({ type: "ABORT", ...(reason ? { reason } : {}) });
  }

  snapshot(): unknown {
    return this.#writer.persisted();
  }

  compaction(): CompactionReport | undefined {
    return this.#actors.compaction();
  }

  events(): AsyncIterable<AgentEvent> {
    return eventsUntilStopped(this.#deps.bus, this.runId, this.agentId);
  }

  detach(): void {
    void this.#stop("detached");
  }

  /**
   * Lets go of the agent, once: its commands, its wall and its place among the hosted machines. A
   * finished agent's unanswered approval requests are closed (resolves when they are); one moved to
   * or handed on to another host is stopped here without another word or write, as that host goes
   * on from the stored snapshot.
   */
  async #stop(how: HostStop): Promise<void> {
    if (!this.#released) {
      this.#released = true;
      this.#control.unsubscribe();
      this.#stopClock();
      this.#unhost();
    }
    if (typeof how === "object") {
      // Said before the agent's last word, so whoever follows the run hears why its question closed.
      const why = `the agent stopped (${how.finished}) before anyone answered`;
      this.#waits.closeAll(why);
      return closeApprovals(this.#approver, this.#log, this, why);
    }
    if (how === "moved") {
      this.#log.warn("another host took this agent over: let go of it here, saying nothing more");
      this.#events.silence();
    } else this.#writer.detach();
    // Its open spans are for the host that goes on with it.
    this.#deps.telemetry?.released(this.runId, this.agentId);
    this.#actor.stop();
    if (how === "moved") this.#movedAway();
  }

  /** What the machine starts with: its ids, system prompt, budget and what a resumed agent had used. */
  #inputOf(options: StartAgentOptions) {
    const deps = this.#deps;
    const { definition } = options;
    const notes = [
      UNTRUSTED_NOTE,
      ...catalogueFor(definition, deps),
      ...(this.#settings.mode === "plan" ? [PLAN_NOTE] : []),
    ];
    return {
      runId: this.runId,
      agentId: this.agentId,
      name: definition.name,
      systemPrompt: buildSystemPrompt(definition, deps.workspace, notes, {
        readHardLinks: deps.config.sandbox.readHardLinks,
        hiddenDirs: deps.hiddenDirs,
      }),
      budget: this.#settings.budget,
      onToolError: definition.onToolError,
    };
  }

  /** The actors the agent's machine invokes, with the tools, subagents and skills they work with. */
  #actorsOf(options: StartAgentOptions): { actors: AgentActors; skills: ActiveSkills } {
    const deps = this.#deps;
    const settings = this.#settings;
    const { definition, runId, restore } = options;
    const { agentId } = this;
    const events = this.#events;
    const own = [...this.#childTools(definition), ...(deps.moduleTools?.get(definition.name) ?? [])];
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
    const clearance = clearanceOf(deps, settings, {
      runId,
      agentId,
      events,
      registry,
      tools,
      skills,
      waits: this.#waits,
    });
    const actors = new AgentActors({
      models: deps.models,
      ...(deps.agentHooks ? { hooks: deps.agentHooks } : {}),
      redactor: deps.redactor,
      place: {
        workspace: deps.workspace,
        protectedDirs: deps.protectedDirs,
        hiddenDirs: deps.hiddenDirs,
        readHardLinks: deps.config.sandbox.readHardLinks,
      },
      definition,
      runId,
      agentId,
      events,
      chain: settings.chain,
      compaction: settings.compaction,
      reply: settings.reply,
      registry,
      tools,
      clearance,
      skillDirs: skillDirsFor(definition, deps.skills, options.skill?.name),
      skills,
      ...journalOf(deps, runId, agentId, restore),
      ...(gateOf(deps, runId, agentId, definition.name) ?? {}),
      ...(settings.readOnlyBecause !== undefined ? { sandboxLimit: readOnlyLimit(settings.sandbox) } : {}),
      turns: restore ? persistedFacts(restore.snapshot).turns : 0,
      resumed: restore !== undefined,
      ...(options.toolsAfter ? { toolsAfter: options.toolsAfter } : {}),
      // Only an MCP server asks an agent for completions or puts questions to its user.
      ...(Object.keys(deps.config.mcpServers).length > 0
        ? {
            sampler: samplingOf(deps, settings, {
              runId,
              agentId,
              events,
              skills,
              waits: this.#waits,
              // The tools run inside the actor, so it exists by the time either is called.
              charge: (usage) => this.#actor.send({ type: "SAMPLED", usage }),
              left: () => budgetLeft(this.#actor.getSnapshot().context),
            }),
            elicitor: questionsOf(deps, settings, { runId, agentId, events, waits: this.#waits }),
          }
        : {}),
    });
    return { actors, skills };
  }

  /**
   * The subagent tools of the agent: each asks the runtime's spawner for a child (on a worker when
   * one takes it, else in this process) and charges what it spends to this agent's machine.
   */
  #childTools(definition: AgentDefinition) {
    const deps = this.#deps;
    const { runId } = this;
    const defaults = deps.config.defaults.budget;
    return subagentTools(
      definition.subagents
        .map((name) => deps.agents.get(name))
        .filter((child): child is AgentDefinition => child !== undefined)
        .map((child) => ({ ...child, budget: effectiveBudget(child.budget, defaults) })),
      {
        bus: deps.bus,
        runId,
        agentId: this.agentId,
        depth: this.#settings.depth,
        budget: this.#settings.budget,
        limits: deps.limits,
        events: this.#events,
        workedMs: () => this.#clock.workedMs(),
        // The tools run inside the actor, so it exists by the time either is called.
        spent: () => (this.#actor ? totalSpend(this.#actor.getSnapshot().context) : NOTHING_SPENT),
        charge: (delta) => this.#actor.send({ type: "CHILD_SPENT", ...delta }),
        adopt: (childId) => deps.spawner.adopt(runId, childId),
        commandHooks: deps.commandHooks,
        spawn: (child) => deps.spawner.spawn(runId, child),
        traceparent: (callId) => deps.telemetry?.traceparentFor(runId, this.agentId, callId),
      },
    );
  }
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
