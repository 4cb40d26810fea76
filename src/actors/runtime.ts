import { existsSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { type Approver, denyingApprover } from "../approvals/approver.js";
import type { Bus } from "../bus/bus.js";
import { LocalBus } from "../bus/local-bus.js";
import type { AgentDefinition } from "../config/agent-schema.js";
import type { LoadedConfig } from "../config/load.js";
import type { ApprovalPolicy } from "../config/policy-schemas.js";
import { type Logger, silentLogger } from "../log.js";
import { NotStoppedError, reopen, reopenToCompact } from "../machines/agent-reopen.js";
import { ModelRouter } from "../model/model-router.js";
import type { ChatMessage } from "../model/types.js";
import type { Redactor } from "../safety/redact.js";
import { type TroupeDirs, type UserDirs, workspaceRefusal } from "../safety/refused-workspace.js";
import { detectSandbox, type Sandbox } from "../sandbox/sandbox.js";
import { mcpConfinement, sandboxScope } from "../sandbox/scope.js";
import { findSkills, type Skill } from "../skills/skills.js";
import type { Telemetry } from "../telemetry/telemetry.js";
import { builtinTools } from "../tools/builtin/index.js";
import { loadSkillTool } from "../tools/builtin/load-skill.js";
import { CommandHooks } from "../tools/command-hooks.js";
import { launchScope } from "../tools/mcp/mcp-launch.js";
import { McpManager } from "../tools/mcp/mcp-manager.js";
import { type Tool, ToolRegistry } from "../tools/tool.js";
import { loadToolModules } from "../tools/tool-modules.js";
import type { RecordSeal } from "../trust/record-seal.js";
import { didYouMean } from "../util/did-you-mean.js";
import type { AgentDeps, AgentHandle, CompactionReport, Spawner, StartAgentOptions } from "./agent-deps.js";
import type { AgentHooks } from "./agent-hooks.js";
import { AgentHost } from "./agent-host.js";
import { type AgentRecord, AgentStore, ToolJournal } from "./agent-store.js";
import { AgentControls } from "./agent-stream.js";
import { type AdoptedChild, adoptChild } from "./child-adoption.js";
import { finishedChildAnswers } from "./finished-children.js";
import { HostedMachines } from "./hosted-machine.js";
import { loadOrRebuild } from "./log-history.js";
import { nextSeqOf } from "./next-seq.js";
import { type SpawnRequest, workerPlacement } from "./placement.js";
import { type ResumeAs, rightsOf, trustedName } from "./resume-rights.js";
import { newAgentId, newRunId } from "./run-ids.js";
import {
  RuntimeNotOpenError,
  UnknownAgentError,
  UnknownModelError,
  WorkspaceError,
} from "./runtime-errors.js";
import type { RunOptions, RuntimeOptions } from "./runtime-options.js";
import { secretsOf } from "./runtime-secrets.js";
import { skillFor } from "./skill-choice.js";
import { assertTaskFits } from "./task-size.js";

/** One process's agents, their bus, models and tools. */
export class Runtime {
  readonly bus: Bus;
  readonly models: ModelRouter;
  readonly tools: ToolRegistry;
  readonly workspace: string;
  readonly redactor: Redactor;
  /** From the config's skills dir, then the workspace's `.troupe/skills`. */
  readonly skills: Map<string, Skill>;
  readonly mcp: McpManager;
  /** This machine's sandbox for commands; `sandbox.unavailable` says why there is none. */
  readonly sandbox: Sandbox;
  readonly #config: LoadedConfig;
  readonly #seal: RecordSeal | undefined;
  /** What no tool or sandboxed command may change: the config dir and the tool modules. */
  readonly #protectedPaths: string[];
  readonly #hiddenPaths: string[];
  readonly #log: Logger;
  readonly #approver: Approver;
  readonly #ownsBus: boolean;
  #persistence: { agents: AgentStore; journal: ToolJournal } | undefined;
  readonly #commandHooks: CommandHooks;
  /** The data and config dirs, which no workspace may be in. */
  readonly #troupeDirs: TroupeDirs;
  readonly #userDirs: UserDirs;
  /** Workspace skills left out, one line each for the catalogue. */
  readonly #skippedSkills: string[];
  readonly #controls: AgentControls;
  readonly #machines = new HostedMachines();
  readonly #agentHooks: AgentHooks | undefined;
  readonly #telemetry: Telemetry | undefined;
  #moduleTools = new Map<string, Tool[]>();
  #agentDeps: AgentDeps | undefined;

  constructor(options: RuntimeOptions) {
    this.#config = options.config;
    this.#seal = options.seal;
    this.#log = options.log ?? silentLogger;
    this.#ownsBus = options.bus === undefined;
    this.redactor = secretsOf(options.config, options.env ?? process.env);
    this.bus = options.bus ?? new LocalBus({ prefix: options.config.troupe.nats.prefix, log: this.#log });
    this.models = new ModelRouter(options.config.troupe, {
      env: options.env ?? process.env,
      log: this.#log,
      ...options.models,
    });
    this.workspace = resolve(options.workspace ?? options.config.troupe.workspace);
    if (!existsSync(this.workspace) || !statSync(this.workspace).isDirectory()) {
      throw new WorkspaceError(`workspace ${this.workspace} is not a directory; pass --workspace DIR`);
    }
    const scope = sandboxScope(options.config, this.workspace, options.env ?? process.env);
    // Settings given in code have the working directory for their dir, which is no config dir.
    const configDirs = options.config.file
      ? scope.protectedDirs
      : scope.protectedDirs.filter((dir) => dir !== options.config.dir);
    this.#troupeDirs = { data: scope.hiddenDirs, config: configDirs };
    const env = options.env ?? process.env;
    this.#userDirs = { home: env.HOME ?? homedir(), configHome: env.XDG_CONFIG_HOME, path: env.PATH };
    const refusal = this.workspaceRefusal(this.workspace);
    if (refusal) throw new WorkspaceError(`workspace ${this.workspace} ${refusal}`);
    // A workspace's own skills may not pre-approve tools: a repository's files would approve its calls.
    // Its files are project notes: a link, a FIFO or a file outside the workspace is skipped.
    const found = findSkills(
      [
        resolve(options.config.dir, options.config.troupe.skillsDir),
        {
          dir: join(this.workspace, ".troupe", "skills"),
          preApprove: false,
          within: realpathSync(this.workspace),
          readHardLinks: options.config.troupe.sandbox.readHardLinks,
        },
      ],
      this.#log,
    );
    this.skills = found.skills;
    this.#skippedSkills = found.skipped;
    this.sandbox = options.sandbox ?? detectSandbox();
    if (this.sandbox.unavailable && this.definitions().some((agent) => agent.tools.includes("shell")))
      this.#log.warn(
        `no command sandbox: ${this.sandbox.unavailable}; until then every shell command is asked for`,
      );
    this.#protectedPaths = scope.protectedDirs;
    this.#hiddenPaths = scope.hiddenDirs;
    this.tools = new ToolRegistry([
      ...builtinTools({
        shell: { env: options.config.troupe.shell.env, sandbox: this.sandbox, ...scope },
      }),
      loadSkillTool(this.skills),
      ...(options.tools ?? []),
    ]);
    this.#agentHooks = options.hooks;
    this.#telemetry = options.telemetry;
    this.#controls = new AgentControls(this.bus);
    this.#commandHooks = new CommandHooks(
      options.config.troupe.hooks,
      this.workspace,
      this.redactor,
      this.#log,
      options.config.troupe.shell.env,
      {
        sandbox: this.sandbox,
        scope,
        configDir: options.config.dir,
        writable: options.config.troupe.daemon.workspaces.map((root) => resolve(options.config.dir, root)),
      },
    );
    this.mcp = new McpManager(options.config.troupe.mcpServers, this.tools, {
      workspace: this.workspace,
      launch: launchScope(options.config, this.workspace, options.env ?? process.env),
      log: this.#log,
      confine: mcpConfinement(this.sandbox, scope, options.config.troupe.sandbox.network),
      agentTools: this.definitions().flatMap((agent) => agent.tools),
    });
    this.#approver = options.approver ?? denyingApprover("nobody can answer approval requests in this run");
  }

  /**
   * Why `workspace` may not be one (inside a `.git`, a git dir, the data or config dir), in words
   * that follow its path; undefined when it may.
   */
  workspaceRefusal(workspace: string): string | undefined {
    return workspaceRefusal(realpathSync(workspace), this.#troupeDirs, this.#userDirs);
  }

  /** The agent a run uses: the one named, else the default. Throws `UnknownAgentError`. */
  agent(name?: string): AgentDefinition {
    const agents = this.#config.agents;
    const chosen =
      name ??
      this.#config.troupe.defaultAgent ??
      (agents.has("assistant") ? "assistant" : agents.keys().next().value);
    const agent = chosen === undefined ? undefined : agents.get(chosen)?.definition;
    if (!agent) {
      const known = [...agents.keys()];
      throw new UnknownAgentError(
        chosen === undefined
          ? "there are no agents: add one under the agents dir of the config"
          : `unknown agent "${chosen}"${didYouMean(chosen, known)}; the agents are ${known.join(", ")}`,
      );
    }
    return agent;
  }

  /** Every agent definition of the config. */
  definitions(): AgentDefinition[] {
    return [...this.#config.agents.values()].map((agent) => agent.definition);
  }

  /**
   * The models troupe.yaml and the agents name: the default, each provider's listed models (also as
   * `provider/model`), and each agent's model and fallbacks. What a run may be switched to.
   */
  modelNames(): string[] {
    const { troupe } = this.#config;
    const names = new Set<string>([troupe.defaultModel]);
    for (const [provider, config] of Object.entries(troupe.providers))
      for (const model of Object.keys(config.models)) {
        names.add(model);
        names.add(`${provider}/${model}`);
      }
    for (const agent of this.definitions())
      for (const model of [agent.model, ...agent.fallbackModels]) if (model) names.add(model);
    return [...names];
  }

  /** Checks that the agent's model can be reached with what is configured. */
  assertReady(agent: AgentDefinition): void {
    this.models.assertConfigured(agent.model ?? this.#config.troupe.defaultModel);
  }

  /** Starts a run on an agent. Needs `open()` first. */
  start(options: RunOptions): AgentHandle {
    this.#opened("start");
    const definition = this.agent(options.agent);
    const { task, skill } = skillFor(definition, options, this.skills, this.#config.troupe.skills);
    assertTaskFits(task, this.models.resolve(definition.model ?? this.#config.troupe.defaultModel));
    return this.#host({
      definition,
      task,
      skill,
      runId: options.runId ?? newRunId(),
      agentId: options.agentId ?? newAgentId(definition.name),
      approval: options.approval,
      mode: options.mode,
      sandbox: options.sandbox,
      toolsAfter: options.toolsAfter,
      traceparent: options.traceparent,
    });
  }

  /**
   * Brings an unfinished agent back from its stored snapshot: its conversation, budget use, queues
   * and machine state. A tool call that had finished is not run again. A stopped agent is brought
   * back only with a `followUp`: reopened, it goes on with it. Needs `open()` first. What it may do
   * comes from `as`, not from the snapshot, which any host on the bus can write. With an `epoch` (a
   * worker's placement taken over from another), the record is written back at once
   * (`AgentStore.takeOver`): the host it was taken from stops at its next write. `approval` replaces
   * the policy its rights give it, and `model` its definition's model (a person's choice for the
   * turns to come; one of `modelNames()`, else an `UnknownModelError`).
   */
  async resume(
    runId: string,
    agentId: string,
    options: {
      as: ResumeAs;
      followUp?: string;
      /** A stopped agent reopened to compact its conversation, and stop again (`compact`). */
      compact?: boolean;
      epoch?: number;
      approval?: ApprovalPolicy;
      model?: string;
    },
  ): Promise<AgentHandle | undefined> {
    const loaded = await loadOrRebuild(this.#opened("resume"), this.bus, this.#log, {
      runId,
      agentId,
      ...options,
    });
    if (!loaded) return undefined;
    let { record } = loaded;
    const stopped = record.done;
    if (options.compact && !stopped)
      throw new NotStoppedError(`${agentId} has not stopped: it is compacted between turns, once it has`);
    if (stopped && options.compact && options.followUp === undefined)
      record = { ...record, done: false, snapshot: reopenToCompact(record.snapshot) };
    else if (stopped) {
      if (options.followUp === undefined) return undefined;
      const messages =
        (record.snapshot as { context?: { messages?: ChatMessage[] } }).context?.messages ?? [];
      record = reopened(record, await finishedChildAnswers(this.bus, runId, agentId, messages));
    }
    const definition = this.#withModel(
      this.agent(trustedName(record, options.as, agentId, this.#log)),
      options.model,
    );
    const nextSeq = await nextSeqOf(this.bus, runId, agentId, record.nextSeq);
    const rights = rightsOf(record, options.as);
    return this.#host({
      definition,
      task: record.task,
      runId,
      agentId,
      parentId: record.parentId,
      restore: { ...record, nextSeq },
      rebuilt: loaded.rebuilt,
      epoch: options.epoch,
      ...rights,
      approval: options.approval ?? rights.approval,
      followUp: stopped ? options.followUp : undefined,
      compact: stopped && options.compact === true && options.followUp === undefined,
    });
  }

  /**
   * Compacts a stopped agent's conversation now, as a person asked: all but its last turn summarised
   * by its model (`compacting` as the machine does it when the context fills), the agent stopped
   * again as it was. Undefined when there is no stored agent; a `NotStoppedError` when it has not
   * stopped (a turn runs, or its process ended under it).
   */
  async compact(
    runId: string,
    agentId: string,
    options: { as: ResumeAs; model?: string },
  ): Promise<CompactionReport | undefined> {
    const handle = await this.resume(runId, agentId, { ...options, compact: true });
    if (!handle) return undefined;
    await handle.done;
    return handle.compaction() ?? { error: "the agent stopped before it compacted" };
  }

  /**
   * Hosts a subagent a parent placed here (a worker's side of placement). `firstSeq`: for one started
   * again from its request (its host died before its first snapshot was stored), the seq after those
   * already in the log; `epoch`: its placement's revision, stamped on its events.
   */
  spawnChild(request: SpawnRequest, start: { firstSeq?: number; epoch?: number } = {}): AgentHandle {
    return this.#host({
      firstSeq: start.firstSeq,
      epoch: start.epoch,
      definition: this.agent(request.name),
      task: request.task,
      runId: request.runId,
      agentId: request.childId,
      parentId: request.parentId,
      // A spawn request is a worker's to send: whatever it says, what it starts is a subagent.
      depth: Math.max(1, request.depth),
      budget: request.budget,
      traceparent: request.traceparent,
    });
  }

  /**
   * A child that a resumed parent had started before the crash or abort: its output when it has
   * stopped, else `running` when a worker hosts it or it was resumed here (one that was aborted is
   * reopened); undefined when it never got going.
   */
  adoptChild(runId: string, childId: string): Promise<AdoptedChild | undefined> {
    return adoptChild(this.bus, this.#persistence?.agents, runId, childId, (followUp) =>
      this.resume(runId, childId, { as: "child", followUp }),
    );
  }

  /** `definition` on `model`, when one is chosen: a model of the config, and one that can be reached. */
  #withModel(definition: AgentDefinition, model: string | undefined): AgentDefinition {
    if (model === undefined) return definition;
    const known = this.modelNames();
    if (!known.includes(model))
      throw new UnknownModelError(
        `unknown model "${model}"${didYouMean(model, known)}; the models are ${known.join(", ")}`,
      );
    const chosen = { ...definition, model };
    this.assertReady(chosen);
    return chosen;
  }

  /** Hosts one agent in this process: every agent a runtime runs, top-level or child, starts here. */
  #host(options: StartAgentOptions): AgentHandle {
    this.#agentDeps ??= this.#deps();
    return new AgentHost(this.#agentDeps, options);
  }

  /**
   * Where a parent's subagent calls start children: on a worker when one takes the child (it
   * hosts it from then on), else here, as an agent of this runtime.
   */
  #spawner(): Spawner {
    const placeElsewhere = workerPlacement(this.bus, this.#log);
    return {
      spawn: async (runId, child) => {
        if (await placeElsewhere(runId, child)) return;
        this.#host({
          definition: child.definition,
          task: child.task,
          runId,
          agentId: child.childId,
          parentId: child.parentId,
          depth: child.depth,
          budget: child.budget,
          traceparent: child.traceparent,
        });
      },
      adopt: (runId, childId) => this.adoptChild(runId, childId),
    };
  }

  /** What every agent this runtime hosts shares; made once, at its first agent (after `open()`). */
  #deps(): AgentDeps {
    return {
      bus: this.bus,
      controls: this.#controls,
      machines: this.#machines,
      models: this.models,
      tools: this.tools,
      config: this.#config.troupe,
      approver: this.#approver,
      workspace: this.workspace,
      log: this.#log,
      redactor: this.redactor,
      protectedDirs: this.#protectedPaths,
      hiddenDirs: this.#hiddenPaths,
      sandbox: this.sandbox,
      skills: this.skills,
      skippedSkills: this.#skippedSkills,
      agents: new Map([...this.#config.agents].map(([name, agent]) => [name, agent.definition])),
      limits: this.#config.troupe.subagents,
      spawner: this.#spawner(),
      commandHooks: this.#commandHooks,
      agentHooks: this.#agentHooks,
      moduleTools: this.#moduleTools,
      persistence: this.#persistence,
      telemetry: this.#telemetry,
    };
  }

  /**
   * The stores, once `open()` made them. A runtime that was not opened refuses to run anything: it
   * would store no snapshot (nothing to resume), start no MCP server and load no tool module.
   */
  #opened(what: string): { agents: AgentStore; journal: ToolJournal } {
    if (!this.#persistence)
      throw new RuntimeNotOpenError(
        `${what} needs an opened runtime: await runtime.open() first (it opens the stores, starts the MCP servers and loads the tool modules)`,
      );
    return this.#persistence;
  }

  async open(): Promise<this> {
    this.#agentDeps = undefined;
    this.#moduleTools = await loadToolModules(this.definitions(), this.#config.dir);
    this.#persistence = {
      agents: await AgentStore.open(this.bus, this.#log, this.#seal),
      journal: await ToolJournal.open(this.bus, this.#seal),
    };
    await this.mcp.start();
    return this;
  }

  async close(): Promise<void> {
    this.#controls.close();
    await this.mcp.close();
    if (this.#ownsBus) await this.bus.close();
  }
}

/** A stopped agent's record made ready to go on: its machine reopened (`reopen`), no longer done. */
function reopened(record: AgentRecord, answers: ReadonlyMap<string, ChatMessage>): AgentRecord {
  return { ...record, done: false, snapshot: reopen(record.snapshot, answers) };
}

export type { ResumeAs, RunGrants } from "./resume-rights.js";
