import type { AgentHandle, CompactionReport } from "../actors/agent-deps.js";
import type { Runtime } from "../actors/runtime.js";
import { type Bus, RemoteError, RequestRefusedError } from "../bus/bus.js";
import type { ApprovalPolicyName } from "../config/policies.js";
import { type Envelope, makeEnvelope } from "../events/envelope.js";
import { type ApiRequest, type ApiVerb, apiRequests, askedDigest, beyondCeiling, LIST_TEXT } from "./api.js";
import { refusingUserErrors, runIdTaken } from "./run-admission.js";
import type { RunIndex, RunList } from "./run-index.js";

/** A run the daemon started or brought back. */
export interface StartedRun {
  runId: string;
  agentId: string;
}

/** What the API asks of the daemon that serves it: the runs it hosts, and starting or resuming one. */
export interface RunHost {
  /** False once the daemon stops taking runs. */
  accepting(): boolean;
  /** The run hosted in this process under `runId`, if any. */
  hosted(runId: string): AgentHandle | undefined;
  /** Starts a run whose runs.start passed the API's checks, records it and follows it; `asked` is its `askedDigest`. */
  start(request: ApiRequest<"runs.start">, asked: string): Promise<StartedRun>;
  /**
   * Brings a run back from its snapshot and follows it, with what its runs.resume asked; the API asks
   * for one resume of a run at a time.
   */
  resume(runId: string, asked?: ResumeAsked): Promise<StartedRun>;
  /** Compacts a stopped run's conversation; the API asks for it while nothing else resumes the run. */
  compact(runId: string): Promise<CompactionReport>;
}

/** What a runs.resume asks besides its run: the user's next message, a policy (within the ceiling). */
export type ResumeAsked = Omit<ApiRequest<"runs.resume">, "runId">;

/** What the API is built from. */
export interface DaemonApiParts {
  host: RunHost;
  /** The daemon's own runtime: the agents a client may name. */
  runtime: Pick<Runtime, "agent" | "definitions" | "workspace">;
  bus: Pick<Bus, "request" | "subjects">;
  index: Pick<RunIndex, "get" | "list" | "taken">;
  /** The loosest approval policy a client may ask for (troupe.yaml's `daemon.maxApproval`). */
  maxApproval: ApprovalPolicyName;
}

/** The commands a client sends to a running run, by verb. */
const RUN_COMMANDS = { "runs.abort": "abort", "runs.steer": "steer", "runs.followUp": "followUp" } as const;

/**
 * The daemon's API: each request checked against its schema (`apiRequests`), then answered. What a
 * request asks of the runs themselves (start one, resume one, tell one hosted here) goes to the
 * `RunHost`.
 */
export class DaemonApi {
  /**
   * Run ids a runs.start has taken and not yet recorded, with what it asked (`askedDigest`): two at
   * once with one id start one run.
   */
  #starting = new Map<string, string>();
  /** Runs being brought back: one resume of a run at a time, from the check to its tracking. */
  #resuming = new Set<string>();
  /**
   * The runs.list sweep under way: requests that come meanwhile share it. A burst of lists (a
   * reader's seed may send thousands a second) costs one sweep at a time, not one each, and the
   * verbs behind them are not kept waiting.
   */
  #listing: Promise<RunList> | undefined;

  constructor(private readonly parts: DaemonApiParts) {}

  /** The reply to a request on `<p>.api.<verb>`, as the bus brings it. */
  async answer(verb: string, request: Envelope): Promise<Envelope> {
    if (!Object.hasOwn(apiRequests, verb))
      throw new RequestRefusedError(
        `unknown API verb ${JSON.stringify(verb.slice(0, 64))}: this daemon answers ${Object.keys(apiRequests).join(", ")}`,
      );
    // A request says what it is. A stored message a reader had a consumer deliver onto an API subject
    // (through the people's import its reply is the server's `_R_.`, like a real request's) is an
    // event or a record, never one of the verb's type.
    if (request.type !== verb)
      throw new RequestRefusedError(
        `a ${verb} request has type "${verb}", not ${JSON.stringify(request.type.slice(0, 64))}`,
      );
    const data = await this.request(verb as ApiVerb, request.data ?? {});
    return makeEnvelope({ runId: request.runId, agentId: "daemon", seq: 0, type: `${verb}.reply`, data });
  }

  /**
   * One API request's data: checked against its schema, then done. Throws `RequestRefusedError`,
   * saying why, when it is refused.
   */
  async request(verb: ApiVerb, data: unknown): Promise<unknown> {
    const parsed = apiRequests[verb].safeParse(data);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new RequestRefusedError(
        `invalid ${verb} request: ${issue?.path.join(".") || "data"}: ${issue?.message}`,
      );
    }
    return this.#handle(verb, parsed.data as never);
  }

  async #handle(verb: ApiVerb, data: Record<string, string | undefined>): Promise<unknown> {
    switch (verb) {
      case "runs.start":
        return this.#startRun(data as ApiRequest<"runs.start">);
      case "runs.list":
        return this.#list();
      case "runs.get": {
        const record = await this.parts.index.get(data.runId as string);
        if (!record) throw new RequestRefusedError(`no run ${data.runId}`);
        return record;
      }
      case "runs.resume": {
        const runId = data.runId as string;
        if (this.parts.host.hosted(runId) || this.#resuming.has(runId))
          throw new RequestRefusedError(`run ${runId} is running`);
        const { runId: _, ...asked } = data as ApiRequest<"runs.resume">;
        const refusal = asked.approval && beyondCeiling({ approval: asked.approval }, this.parts.maxApproval);
        if (refusal) throw new RequestRefusedError(refusal);
        this.#resuming.add(runId);
        try {
          return await this.parts.host.resume(runId, asked);
        } finally {
          this.#resuming.delete(runId);
        }
      }
      case "runs.compact": {
        const runId = data.runId as string;
        if (this.parts.host.hosted(runId) || this.#resuming.has(runId))
          throw new RequestRefusedError(`run ${runId} is running: compact it between its turns`);
        this.#resuming.add(runId);
        try {
          return await this.parts.host.compact(runId);
        } finally {
          this.#resuming.delete(runId);
        }
      }
      case "runs.abort":
      case "runs.steer":
      case "runs.followUp":
        return this.#command(RUN_COMMANDS[verb], data);
      case "agents.list":
        return {
          agents: this.parts.runtime
            .definitions()
            .map(({ name, description, model, tools, subagents, budget }) => ({
              name,
              description,
              model,
              tools,
              subagents,
              budget,
            })),
        };
    }
  }

  /** A runs.start: held to the ceiling, its run id claimed when it names one, then started by the host. */
  async #startRun(data: ApiRequest<"runs.start">): Promise<StartedRun> {
    if (!this.parts.host.accepting()) throw new RequestRefusedError("the daemon is shutting down");
    const ceiling = this.parts.maxApproval;
    const refusal = beyondCeiling(data, ceiling);
    if (refusal) throw new RequestRefusedError(refusal);
    // An agent the client names is held to the ceiling for its own policy too: naming one whose
    // YAML says yolo is asking for yolo. (The default agent is the operator's choice.)
    if (data.agent) {
      const named = refusingUserErrors(() => this.parts.runtime.agent(data.agent));
      const own = beyondCeiling({ approval: named.approval, sandbox: named.sandbox } as never, ceiling);
      if (own) throw new RequestRefusedError(`agent "${named.name}": ${own}`);
    }
    const asked = askedDigest(data);
    const runId = data.runId;
    if (!runId) return this.parts.host.start(data, asked);
    await this.#claim(runId, asked);
    try {
      return await this.parts.host.start(data, asked);
    } finally {
      this.#starting.delete(runId);
    }
  }

  /**
   * The newest runs, each in summary, so that however many runs there are the reply fits in one
   * message; what was left out is counted.
   */
  async #list(): Promise<unknown> {
    this.#listing ??= this.parts.index.list().finally(() => {
      this.#listing = undefined;
    });
    const { runs, ...left } = await this.#listing;
    return {
      runs: runs.map(({ result, task, ...run }) => ({
        ...run,
        task: task.slice(0, LIST_TEXT),
        result: result?.slice(0, LIST_TEXT),
      })),
      workspace: this.parts.runtime.workspace,
      ...left,
    };
  }

  /** An abort, steer or follow-up for a running run, told to its host. */
  async #command(
    command: (typeof RUN_COMMANDS)[keyof typeof RUN_COMMANDS],
    data: Record<string, string | undefined>,
  ): Promise<{ ok: true }> {
    const found = await this.parts.index.get(data.runId as string);
    if (!found) throw new RequestRefusedError(`no run ${data.runId}`);
    // A run that is over has no host to take the command: say so now rather than time out.
    if (found.status !== "running")
      throw new RequestRefusedError(`run ${data.runId} is ${found.status}; it takes no commands`);
    // A run hosted here is told here: on the bus, whoever may answer a control request (a
    // worker's seed) could answer first, in words of its own.
    const hosted = this.parts.host.hosted(found.runId);
    if (hosted) {
      const text = String(data.text ?? "");
      if (command === "abort") hosted.abort(String(data.reason ?? ""));
      else if (command === "steer") hosted.steer(text);
      else hosted.followUp(text);
      return { ok: true };
    }
    const { bus } = this.parts;
    const envelope = makeEnvelope({ runId: found.runId, agentId: "daemon", seq: 0, type: command, data });
    const subject = bus.subjects.control(found.runId, found.agentId, command);
    await bus.request(subject, envelope, { timeoutMs: 5000 }).catch((error: unknown) => {
      // The agent's host turned it down (a steer past what it holds unread): said as it said it.
      if (error instanceof RemoteError && error.remoteName === "RequestRefusedError")
        throw new RequestRefusedError(error.message.slice(error.subject.length + 2), { cause: error });
      throw error;
    });
    return { ok: true };
  }

  /**
   * Takes `runId` for a runs.start that asked `asked`, or refuses it. A run already under that id is
   * followed by its client (`run … exists`) only when it was started with the same request: a run id
   * can be made from a key anyone knows (`troupe run --id`), and a run someone else started under it
   * with another task must never be shown, or asked about, as the one this client asked for.
   */
  async #claim(runId: string, asked: string): Promise<void> {
    const starting = this.#starting.get(runId);
    if (starting !== undefined) throw runIdTaken(runId, starting === asked);
    this.#starting.set(runId, asked);
    try {
      if (this.parts.host.hosted(runId) || (await this.parts.index.taken(runId))) {
        const record = await this.parts.index.get(runId);
        throw runIdTaken(runId, record && record.asked === asked);
      }
    } catch (error) {
      this.#starting.delete(runId);
      throw error;
    }
  }
}
