import {
  context,
  isSpanContextValid,
  type MeterProvider,
  type TracerProvider,
  trace,
} from "@opentelemetry/api";
import { z } from "zod";
import type { AgentHandle } from "./actors/agent-deps.js";
import type { AgentHooks } from "./actors/agent-hooks.js";
import type { Runtime } from "./actors/runtime.js";
import type { RunOptions, RuntimeOptions } from "./actors/runtime-options.js";
import type { Approver } from "./approvals/approver.js";
import type { Bus } from "./bus/bus.js";
import { LocalBus } from "./bus/local-bus.js";
import { NatsBus, type NatsBusOptions } from "./bus/nats-bus.js";
import { openRuntime } from "./compose/runtime.js";
import { processTelemetry } from "./compose/telemetry.js";
import type { AgentDefinition, AgentSettings } from "./config/agent-schema.js";
import { loadConfig } from "./config/load.js";
import type { ApprovalPolicy } from "./config/policy-schemas.js";
import type { TroupeSettings } from "./config/schema.js";
import { UserError } from "./errors.js";
import type { Logger } from "./log.js";
import type { SandboxMode } from "./sandbox/plan.js";
import { formatTraceparent } from "./telemetry/span-ids.js";
import { Telemetry } from "./telemetry/telemetry.js";
import type { Tool } from "./tools/tool.js";

export interface CreateRuntimeOptions {
  /** A config directory (or troupe.yaml); default: as the CLI finds it. Ignored when `agents` is given. */
  config?: string;
  /** Settings as in troupe.yaml, over the defaults: with `agents`, instead of a config directory. */
  settings?: TroupeSettings;
  /**
   * Agent definitions as in agents/*.yaml; an agent's `output` may be a zod 4 schema (its JSON Schema
   * is what the answer is held to, and `output` of its result is the answer parsed).
   */
  agents?: LibraryAgent[];
  /** A NATS URL (or options) to run on; the in-process bus when absent. */
  nats?: string | NatsBusOptions;
  workspace?: string;
  tools?: Tool[];
  hooks?: AgentHooks;
  approver?: Approver;
  /** Where the environment's variables are read (see docs/library.md); default: `process.env`. */
  env?: NodeJS.ProcessEnv;
  log?: Logger;
  /**
   * The program's own OpenTelemetry providers: Troupe's spans go to its tracer provider, inside the
   * span a run is started in, and its metrics to its meter provider (docs/telemetry.md). Without it,
   * troupe.yaml's `telemetry` (or `TROUPE_TELEMETRY=1`) has Troupe export on its own.
   */
  telemetry?: {
    tracerProvider: TracerProvider;
    meterProvider?: MeterProvider;
    /** Prompts, completions, tool arguments and results on the spans (redacted). Default false. */
    captureContent?: boolean;
  };
}

/** An agent given to `createRuntime`: as in agents/*.yaml, its `output` a JSON Schema or a zod schema. */
export type LibraryAgent = Omit<AgentSettings, "output"> & { output?: Record<string, unknown> | z.ZodType };

/** The agents with each zod `output` made the JSON Schema the YAML would hold. */
function withJsonOutputs(agents: readonly LibraryAgent[]): AgentSettings[] {
  return agents.map(({ output, ...agent }) => ({
    ...agent,
    ...(output === undefined
      ? {}
      : { output: isZod(output) ? z.toJSONSchema(output, { target: "draft-7" }) : output }),
  }));
}

/** A zod schema, of this copy of zod or the program's own (a zod 4 schema has `_zod`). */
function isZod(schema: object): schema is z.ZodType {
  return "_zod" in schema;
}

/** How a stopped or interrupted agent goes on (see `TroupeRuntime.resume`). */
export interface ResumeOptions {
  /** The run's agent to resume: the one the run started with (its handle's `agentId`). */
  agentId: string;
  /** For an agent that had stopped: what it goes on with. Without it only an unfinished agent resumes. */
  followUp?: string;
  /** What it may do, as for `start`; not what its stored record says (anyone on the bus may write one). */
  approval?: ApprovalPolicy;
  mode?: "act" | "plan";
  sandbox?: SandboxMode;
}

/** What a program holds of Troupe: it starts runs, resumes them, and closes what it opened. */
export interface TroupeRuntime {
  /** Starts a run on an agent (the config's default one unless named). */
  start(options: RunOptions): AgentHandle;
  /**
   * Brings a run's agent back from its stored snapshot (its conversation, budget use, state): an
   * agent cut off (its process gone), or, with `followUp`, one that had stopped. Undefined when
   * there is no such agent, or it had stopped and no `followUp` is given.
   */
  resume(runId: string, options: ResumeOptions): Promise<AgentHandle | undefined>;
  /** The agents it may start, as their definitions are after defaults. */
  agents(): AgentDefinition[];
  /** Stops its MCP servers and closes its bus. */
  close(): Promise<void>;
}

/** A runtime ready to start agents: config loaded, bus connected, MCP servers and tool modules up. */
export async function createRuntime(options: CreateRuntimeOptions = {}): Promise<TroupeRuntime> {
  if (options.settings && !options.agents)
    throw new UserError("createRuntime: settings go with agents; without agents, give a config directory");
  const config = loadConfig({
    ...(options.agents
      ? {
          inline: {
            settings: options.settings ?? {},
            agents: withJsonOutputs(options.agents),
            codeTools: (options.tools ?? []).map((tool) => tool.name),
          },
        }
      : { config: options.config }),
    env: options.env,
  });
  const bus: Bus =
    options.nats === undefined
      ? new LocalBus({ prefix: config.troupe.nats.prefix, log: options.log })
      : await NatsBus.connect(
          typeof options.nats === "string"
            ? {
                url: options.nats,
                prefix: config.troupe.nats.prefix,
                storage: { stream: config.troupe.nats.stream, kv: config.troupe.nats.kv },
              }
            : options.nats,
        );
  const telemetry = options.telemetry
    ? new Telemetry({
        ...options.telemetry,
        host: { "troupe.role": "library" },
        failed: (error) => options.log?.warn({ err: error }, "telemetry failed on an event: the run goes on"),
      })
    : await processTelemetry(config, "library", options.log, options.env);
  const runtimeOptions: RuntimeOptions = { config, bus, ...(telemetry ? { telemetry } : {}) };
  for (const key of ["workspace", "tools", "hooks", "approver", "env", "log"] as const) {
    if (options[key] !== undefined) Object.assign(runtimeOptions, { [key]: options[key] });
  }
  try {
    return new LibraryRuntime(
      await openRuntime(runtimeOptions),
      bus,
      options.telemetry ? undefined : telemetry,
    );
  } catch (error) {
    await bus.close();
    throw error;
  }
}

/** The library's runtime: the process's Runtime, and the bus it was given to own. */
class LibraryRuntime implements TroupeRuntime {
  readonly #runtime: Runtime;
  readonly #bus: Bus;
  /** The telemetry it made itself (not the program's providers): it shuts it down. */
  readonly #telemetry: Telemetry | undefined;

  constructor(runtime: Runtime, bus: Bus, telemetry: Telemetry | undefined) {
    this.#runtime = runtime;
    this.#bus = bus;
    this.#telemetry = telemetry;
  }

  /** A run started inside a span of the program's is a part of that span's trace. */
  start(options: RunOptions): AgentHandle {
    const active = trace.getSpanContext(context.active());
    const inside = options.traceparent === undefined && active && isSpanContextValid(active);
    return this.#runtime.start(inside ? { ...options, traceparent: formatTraceparent(active) } : options);
  }

  resume(runId: string, options: ResumeOptions): Promise<AgentHandle | undefined> {
    const { agentId, followUp, ...grants } = options;
    return this.#runtime.resume(runId, agentId, {
      as: { root: grants },
      followUp,
    });
  }

  agents(): AgentDefinition[] {
    return this.#runtime.definitions();
  }

  async close(): Promise<void> {
    await this.#runtime.close();
    await this.#telemetry?.shutdown();
    await this.#bus.close();
  }
}
