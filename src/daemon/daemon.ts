import type { AgentHandle, CompactionReport } from "../actors/agent-deps.js";
import { newAgentId, newRunId } from "../actors/run-ids.js";
import type { Runtime } from "../actors/runtime.js";
import { type Bus, RequestRefusedError, type Subscription } from "../bus/bus.js";
import { KV_BUCKETS, READ_VERBS } from "../bus/permissions.js";
import type { ApprovalPolicyName } from "../config/policies.js";
import { makeEnvelope } from "../events/envelope.js";
import type { Logger } from "../log.js";
import { NotStoppedError } from "../machines/agent-reopen.js";
import type { AgentOutput } from "../machines/agent-types.js";
import { RecordSeal } from "../trust/record-seal.js";
import { realPathOrUndefined } from "../util/paths.js";
import { API_REQUEST_TIMEOUT_MS, type ApiRequest, type ApiVerb, type RunRecord } from "./api.js";
import { DaemonApi, type ResumeAsked, type StartedRun } from "./daemon-api.js";
import type { RecordCopies } from "./record-copies.js";
import { Retention } from "./retention.js";
import { asRefusal, grantsOf, refusingUserErrors } from "./run-admission.js";
import { RunIndex } from "./run-index.js";
import { allowedWorkspace } from "./workspace-admission.js";
import { type RuntimeLease, WorkspaceRuntimes } from "./workspace-runtimes.js";

/** How often the daemon says it is alive (`<p>.beat.daemon`). */
export const BEAT_MS = 1000;

/**
 * API requests answered at once, and waiting, in each lane; more are dropped unanswered, and so is
 * one that waited longer than a client waits for its answer (after a flood: nobody is left to hear).
 */
export const API_LIMIT = { inFlight: 16, queued: 256, staleMs: API_REQUEST_TIMEOUT_MS };

export interface DaemonOptions {
  /** The loosest approval policy a client may ask for (troupe.yaml's `daemon.maxApproval`). Default `auto-edit`. */
  maxApproval?: ApprovalPolicyName;
  /** What seals the run index; the data dir's key, so the next daemon knows its records. Default: this process's own. */
  seal?: RecordSeal;
  /** The daemon's own copies of its run records (`<dataDir>/run-records/<prefix>`); without them, the bucket alone has them. */
  copies?: RecordCopies;
  /**
   * The directories a run's workspace may be in (absolute); default: the runtime's workspace. A
   * run asking for one elsewhere is refused.
   */
  workspaces?: string[];
  /**
   * A runtime like the daemon's for another workspace: made when a run there starts, closed when
   * the last run there ends. Without it, runs take the daemon's.
   */
  runtimeFor?: (workspace: string) => Promise<Runtime>;
  /** The most workspaces besides the daemon's own with a runtime at once (troupe.yaml's `daemon.maxWorkspaces`). Default 8. */
  maxWorkspaces?: number;
  /** How long a finished run's snapshots and journal are kept (troupe.yaml's `daemon.keepFinished`). Default 7 days. */
  keepFinishedMs?: number;
  /** How long a finished run's record is kept (troupe.yaml's `nats.kv.ttl`); absent: for good. */
  keepRecordsMs?: number;
}

const WEEK_MS = 7 * 86_400_000;

/**
 * `troupe daemon`: hosts runs on a NATS bus and serves the API (`DaemonApi`). Every run is in the KV bucket `runs`;
 * runs left unfinished by a previous daemon are resumed from their snapshots when it starts.
 */
export class Daemon {
  #serving: Subscription[] = [];
  #runs = new Map<string, AgentHandle>();
  #accepting = true;
  #index: RunIndex | undefined;
  #retention: Retention | undefined;
  #beating: NodeJS.Timeout | undefined;
  readonly #runtimes: WorkspaceRuntimes | undefined;
  #api: DaemonApi | undefined;

  constructor(
    private readonly runtime: Runtime,
    private readonly log: Logger,
    private readonly options: DaemonOptions = {},
  ) {
    if (options.runtimeFor)
      this.#runtimes = new WorkspaceRuntimes(options.runtimeFor, options.maxWorkspaces ?? 8, log);
  }

  private get bus(): Bus {
    return this.runtime.bus;
  }

  async start(): Promise<void> {
    // Every bucket exists from the start: the other roles may only open them.
    await Promise.all(KV_BUCKETS.map((name) => this.bus.kv(name)));
    this.#index = new RunIndex(
      await this.bus.kv("runs"),
      this.options.seal ?? RecordSeal.ephemeral(),
      this.log,
      this.options.copies,
    );
    this.#retention = new Retention(
      this.bus,
      this.#index,
      { stateMs: this.options.keepFinishedMs ?? WEEK_MS, recordMs: this.options.keepRecordsMs },
      this.log,
    );
    const api = new DaemonApi({
      // What the API may ask of this daemon: its runs, and starting or resuming one.
      host: {
        accepting: () => this.#accepting,
        hosted: (runId) => this.#runs.get(runId),
        start: (request, asked) => this.#start(request, asked),
        resume: (runId, asked) => this.#resume(runId, asked),
        compact: (runId) => this.#compact(runId),
      },
      runtime: this.runtime,
      bus: this.bus,
      index: this.#index,
      maxApproval: this.options.maxApproval ?? "auto-edit",
    });
    this.#api = api;
    await this.#resumeUnfinished();
    // One subscription for every verb, so that a verb it does not know is told so, not met with
    // "no responders" (which says no daemon runs). Its requests are answered a few at a time in
    // two lanes: what a reader's seed may ask (an observer's) and the commands. A flood of reads
    // is dropped past its queue, unanswered, and never stands before a runs.start or an abort.
    const verbs = this.bus.subjects.api("x").slice(0, -1);
    this.#serving.push(
      this.bus.reply(`${verbs}>`, (request, subject) => api.answer(subject.slice(verbs.length), request), {
        limit: {
          ...API_LIMIT,
          lane: (subject) =>
            (READ_VERBS as readonly string[]).includes(subject.slice(verbs.length)) ? "reads" : "commands",
        },
      }),
    );
    // Clients watch this to tell a daemon that is away from one that is quiet, and one that started
    // since (another pid, or another start) from the one they knew.
    const since = Date.now();
    const beat = () =>
      this.bus.publish(
        this.bus.subjects.daemonBeat(),
        makeEnvelope({
          runId: "daemon",
          agentId: "daemon",
          seq: 0,
          type: "daemon.beat",
          data: { pid: process.pid, since },
        }),
      );
    beat();
    this.#beating = setInterval(beat, BEAT_MS);
    this.#beating.unref();
    // Ready means answering: the server has the API subscriptions before anyone is told so.
    await this.bus.flush();
    this.log.info({ runs: this.#runs.size }, "daemon ready");
  }

  /** Stops taking runs; what runs keeps its snapshots, and the next daemon resumes it. */
  async stop(): Promise<void> {
    this.#accepting = false;
    clearInterval(this.#beating);
    this.#retention?.stop();
    for (const sub of this.#serving) sub.unsubscribe();
    for (const handle of this.#runs.values()) handle.detach();
    this.log.info({ runs: this.#runs.size }, "daemon stopped; unfinished runs resume on the next start");
  }

  /**
   * One API request as the bus brings it, from inside the daemon's process (the web console): checked
   * against its schema, then done. Throws `RequestRefusedError`, saying why, when it is refused.
   */
  async request(verb: ApiVerb, data: unknown): Promise<unknown> {
    if (!this.#api) throw new RequestRefusedError("the daemon has not started");
    return this.#api.request(verb, data);
  }

  /** A runs.start that passed its checks: the run started, recorded and followed. */
  async #start(data: ApiRequest<"runs.start">, asked: string): Promise<StartedRun> {
    const workspace = data.workspace ? this.#allowedWorkspace(data.workspace) : undefined;
    const lease = await this.#runtime(workspace);
    try {
      return await this.#startIn(lease.runtime, data, { workspace, asked }, lease);
    } catch (error) {
      lease.release();
      throw error;
    }
  }

  /** A run started in `runtime`, which `lease` holds for it until it ends. */
  async #startIn(
    runtime: Runtime,
    data: ApiRequest<"runs.start">,
    { workspace, asked }: { workspace: string | undefined; asked: string },
    lease: RuntimeLease,
  ): Promise<StartedRun> {
    const agent = refusingUserErrors(() => runtime.agent(data.agent)).name;
    const record: RunRecord = {
      runId: data.runId ?? newRunId(),
      agentId: newAgentId(agent),
      agent: data.agent ?? this.runtime.agent().name,
      task: data.task,
      status: "running",
      startedAt: Date.now(),
      ...grantsOf(data),
      skill: data.skill,
      workspace,
      asked,
    };
    // The record is written while the agent makes its first model call, and no tool of the run
    // runs before it is: a run whose record cannot be written (a full or unreachable bucket) runs
    // no command where status, abort and resume cannot find it, and is refused.
    const recorded = Promise.resolve(this.#index?.put(record));
    recorded.catch(() => {}); // its failure is the caller's, below
    let handle: AgentHandle;
    try {
      handle = refusingUserErrors(() =>
        runtime.start({
          task: data.task,
          runId: record.runId,
          agentId: record.agentId,
          agent: data.agent,
          approval: data.approval,
          mode: data.mode,
          sandbox: data.sandbox,
          skill: data.skill,
          toolsAfter: recorded,
          ...(data.traceparent ? { traceparent: data.traceparent } : {}),
        }),
      );
    } catch (error) {
      // Refused (an unknown skill, a task too long for the model): no run, so no record.
      await recorded.then(() => this.#index?.remove(record.runId)).catch(() => {});
      throw error;
    }
    try {
      await recorded;
    } catch (error) {
      handle.abort("its record could not be written");
      await handle.done.catch(() => {});
      // Its mark or its record may have been written: neither is left for a run that never was.
      await this.#index?.remove(record.runId).catch(() => {});
      await this.#index?.release(record.runId).catch(() => {});
      throw error;
    }
    this.#track(handle, record, lease);
    return { runId: handle.runId, agentId: handle.agentId };
  }

  /**
   * Brings a run back from its snapshot, with its sealed grants (`approval` in place of its own when
   * asked) and on `model` when one is asked; with `text`, a finished run too, going on with it. The API asks for one resume of a run
   * at a time.
   */
  async #resume(runId: string, { text, approval, model }: ResumeAsked = {}): Promise<StartedRun> {
    const stored = await this.#index?.get(runId);
    if (!stored) throw new RequestRefusedError(`no run ${runId}`);
    if (stored.status === "done" && text === undefined)
      throw new RequestRefusedError(`run ${runId} is done; nothing to resume`);
    const found: RunRecord = approval ? { ...stored, approval } : stored;
    // Nothing of the run is removed while it is brought back; given back if it is not.
    await this.#retention?.keep(found.runId);
    let lease: RuntimeLease | undefined;
    let handle: AgentHandle | undefined;
    try {
      lease = await this.#runtime(found.workspace);
      handle = await lease.runtime
        .resume(found.runId, found.agentId, {
          as: { root: grantsOf(found), agent: found.agent },
          followUp: text ?? "Continue the task where you left off.",
          model,
        })
        .catch((error: unknown) => {
          throw asRefusal(error);
        });
    } catch (error) {
      lease?.release();
      this.#retention?.schedule(found);
      throw error;
    }
    if (!handle) {
      lease.release();
      this.#retention?.schedule(found);
      throw new RequestRefusedError(
        `run ${runId} has no snapshot to resume from (a finished run's are kept for daemon.keepFinished in troupe.yaml)`,
      );
    }
    const record: RunRecord = { ...found, status: "running" };
    try {
      await this.#index?.put(record);
    } catch (error) {
      // Its record could not say so, yet it runs: its runtime is let go when it ends.
      void handle.done.then(lease.release, lease.release);
      throw error;
    }
    this.#track(handle, record, lease);
    return { runId: handle.runId, agentId: handle.agentId };
  }

  /** A stopped run's conversation compacted in its runtime, its record left as it is. */
  async #compact(runId: string): Promise<CompactionReport> {
    const found = await this.#index?.get(runId);
    if (!found) throw new RequestRefusedError(`no run ${runId}`);
    await this.#retention?.keep(found.runId);
    let lease: RuntimeLease | undefined;
    try {
      lease = await this.#runtime(found.workspace);
      const report = await lease.runtime
        .compact(found.runId, found.agentId, { as: { root: grantsOf(found), agent: found.agent } })
        .catch((error: unknown) => {
          throw error instanceof NotStoppedError
            ? new RequestRefusedError(`run ${runId} has not stopped: compact it between its turns`)
            : asRefusal(error);
        });
      if (!report)
        throw new RequestRefusedError(
          `run ${runId} has no snapshot to compact (a finished run's are kept for daemon.keepFinished in troupe.yaml)`,
        );
      return report;
    } finally {
      lease?.release();
      this.#retention?.schedule(found);
    }
  }

  /** Follows a run to its end: its record written then, its runtime let go. */
  #track(handle: AgentHandle, record: RunRecord, lease: RuntimeLease): void {
    this.#runs.set(handle.runId, handle);
    void handle.done
      .then(async (output: AgentOutput) => {
        this.#runs.delete(handle.runId);
        lease.release();
        const finished: RunRecord = {
          ...record,
          status: output.reason,
          stoppedAt: Date.now(),
          result: output.result,
          usage: output.total.usage,
        };
        await this.#recordFinished(finished);
        this.#retention?.schedule(finished);
      })
      .catch((error: unknown) => {
        this.#runs.delete(handle.runId);
        lease.release();
        // Its record still says running: the next start resumes it from what it stored.
        this.log.error({ err: error, runId: handle.runId }, "a run's end could not be recorded");
      });
  }

  /**
   * A finished run's record, written while NATS is slow or away (a flood, a node lost): tried again
   * for a minute, as appends are, before the failure is the caller's.
   */
  async #recordFinished(finished: RunRecord): Promise<void> {
    for (let delay = 250, waited = 0; ; waited += delay, delay = Math.min(delay * 2, 5000)) {
      try {
        await this.#index?.put(finished);
        return;
      } catch (error) {
        if (waited >= 60_000) throw error;
        this.log.warn(
          { err: (error as Error).message, runId: finished.runId },
          "recording a run's end; trying again",
        );
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /** A workspace a client asked for, as its real path, when it lies in one of the daemon's (`allowedWorkspace`). */
  #allowedWorkspace(asked: string): string {
    const configured = this.options.workspaces ?? [this.runtime.workspace];
    return allowedWorkspace(asked, configured, (real) => this.runtime.workspaceRefusal(real));
  }

  /**
   * The runtime of a workspace, held until the run that asked for it ends: the daemon's own (never
   * closed here), or one of another workspace's. `admitted`: see `WorkspaceRuntimes.lease`.
   */
  #runtime(workspace: string | undefined, admitted = false): Promise<RuntimeLease> {
    const own = realPathOrUndefined(this.runtime.workspace) ?? this.runtime.workspace;
    if (!workspace || workspace === own) return Promise.resolve({ runtime: this.runtime, release: () => {} });
    if (!this.#runtimes)
      return Promise.reject(new RequestRefusedError("this daemon runs every run in its own workspace"));
    return this.#runtimes.lease(workspace, admitted);
  }

  /** Closes the runtimes made for other workspaces. */
  async close(): Promise<void> {
    await this.#runtimes?.close();
  }

  /** Resumes the runs left running; the finished ones still holding state get their removal scheduled. */
  async #resumeUnfinished(): Promise<void> {
    for (const record of (await this.#index?.held()) ?? []) {
      if (record.status !== "running") {
        this.#retention?.schedule(record);
        continue;
      }
      let lease: RuntimeLease | undefined;
      try {
        lease = await this.#runtime(record.workspace, true);
        const handle = await lease.runtime.resume(record.runId, record.agentId, {
          as: { root: grantsOf(record), agent: record.agent },
        });
        if (handle) {
          this.log.info({ runId: record.runId }, "resumed an unfinished run");
          this.#track(handle, record, lease);
        } else lease.release();
      } catch (error) {
        lease?.release();
        this.log.error({ runId: record.runId, err: (error as Error).message }, "could not resume a run");
      }
    }
  }
}
