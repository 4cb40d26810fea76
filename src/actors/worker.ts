import type { Subscription } from "../bus/bus.js";
import { makeEnvelope } from "../events/envelope.js";
import type { Logger } from "../log.js";
import { ulid } from "../util/ulid.js";
import type { AgentHandle } from "./agent-deps.js";
import { nextSeqOf } from "./next-seq.js";
import {
  actorKey,
  claim,
  type Heartbeat,
  heartbeat,
  placementOf,
  type SpawnedReply,
  spawnRequestSchema,
  WORKER_QUEUE,
} from "./placement.js";
import type { Runtime } from "./runtime.js";

export interface WorkerOptions {
  /** How often the worker says it is alive. Default 1000. */
  heartbeatMs?: number;
  /** A worker silent this long is dead and its actors are taken over. Default 5000. */
  deadAfterMs?: number;
}

/**
 * `troupe worker`: hosts subagents spawned through the queue group `<p>.work.spawn`. Workers
 * heartbeat in KV; when one goes silent, the others claim its actors (compare-and-set on their
 * placement records) and resume each from its last snapshot.
 */
export class Worker {
  readonly id = `worker-${ulid().slice(-10).toLowerCase()}`;
  #beats = 0;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  #serving: Subscription | undefined;
  #hosted = new Map<string, AgentHandle>();
  /** Other workers' heartbeat revisions and when each last changed, by this worker's own clock. */
  #seen = new Map<string, { revision: number; changedAt: number }>();
  readonly #heartbeatMs: number;
  readonly #deadAfterMs: number;

  constructor(
    private readonly runtime: Runtime,
    private readonly log: Logger,
    options: WorkerOptions = {},
  ) {
    this.#heartbeatMs = options.heartbeatMs ?? 1000;
    this.#deadAfterMs = options.deadAfterMs ?? 5000;
  }

  get hosted(): string[] {
    return [...this.#hosted.keys()];
  }

  async start(): Promise<void> {
    const bus = this.runtime.bus;
    await this.#beat();
    this.#serving = bus.reply(
      bus.subjects.workSpawn(),
      async (request) => {
        const spec = spawnRequestSchema.parse(request.data);
        const key = actorKey(spec.runId, spec.childId);
        const epoch = await claim(bus, key, this.id, spec);
        if (epoch === undefined) throw new Error(`${spec.childId} is already placed`);
        this.#host(key, this.runtime.spawnChild(spec, { epoch }), epoch);
        return makeEnvelope({
          runId: spec.runId,
          agentId: spec.childId,
          seq: 0,
          type: "spawned",
          data: { worker: this.id } satisfies SpawnedReply,
        });
      },
      { queue: WORKER_QUEUE },
    );
    this.#timer = setInterval(() => {
      void this.#beat()
        .then(() => this.#takeOverFromTheDead())
        .catch((error) => this.log.error({ err: error }, "heartbeat failed"));
    }, this.#heartbeatMs);
    this.log.info({ worker: this.id }, "worker ready");
  }

  /** Stops taking work; what it hosts is left to its snapshots (another worker takes over). */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#serving?.unsubscribe();
    const workers = await this.runtime.bus.kv("workers");
    await workers.delete(this.id).catch(() => {});
  }

  /**
   * Hosts an agent placed here at revision `placed` of its placement record; the worker beats at
   * once, so `troupe status` names it without waiting a beat. Once it stops its placement goes, if
   * it is still this worker's: one taken over meanwhile is the new host's. One taken over (`moved`)
   * is let go of, and its placement left alone.
   */
  #host(key: string, handle: AgentHandle, placed: number): void {
    this.#hosted.set(key, handle);
    this.#beatNow();
    const letGo = () => {
      if (this.#hosted.get(key) !== handle) return false;
      this.#hosted.delete(key);
      this.#beatNow();
      return true;
    };
    void handle.moved.then(letGo);
    void handle.done.then(async () => {
      if (!letGo()) return;
      const actors = await this.runtime.bus.kv("actors");
      await actors.delete(key, { expectedRevision: placed }).catch(() => {});
    });
  }

  #beatNow(): void {
    if (this.#stopped) return;
    void this.#beat().catch((error) => this.log.warn({ err: error }, "heartbeat failed"));
  }

  async #beat(): Promise<void> {
    const workers = await this.runtime.bus.kv("workers");
    await workers.put(this.id, heartbeat(++this.#beats, this.hosted) satisfies Heartbeat);
  }

  /** Workers whose heartbeat stopped changing are dead: claim and resume each of their actors. */
  async #takeOverFromTheDead(): Promise<void> {
    const bus = this.runtime.bus;
    const workers = await bus.kv("workers");
    const dead: string[] = [];
    for (const id of await workers.keys()) {
      if (id === this.id) continue;
      const entry = await workers.get<Heartbeat>(id);
      if (!entry) continue;
      // When it was read, not when the sweep began: reads held up while this worker's own link was
      // down (retried until it came back) would otherwise date a fresh beat to before the cut, and
      // a live worker be taken for dead by the one that was cut off.
      const now = Date.now();
      const seen = this.#seen.get(id);
      if (!seen || seen.revision !== entry.revision)
        this.#seen.set(id, { revision: entry.revision, changedAt: now });
      else if (now - seen.changedAt > this.#deadAfterMs) dead.push(id);
    }
    if (dead.length === 0) return;
    const actors = await bus.kv("actors");
    for (const key of await actors.keys()) {
      const entry = await actors.get(key);
      // One of a version this build does not read is left to a worker that reads it.
      const placement = placementOf(entry?.value);
      if (!entry || !placement || !dead.includes(placement.worker)) continue;
      const spawn = spawnRequestSchema.safeParse(placement.spawn).data;
      const epoch = await claim(bus, key, this.id, spawn, entry.revision);
      if (epoch === undefined) continue;
      const [runId, agentId] = splitKey(key);
      this.log.warn({ agentId, from: placement.worker }, "taking over an actor from a dead worker");
      const handle =
        (await this.runtime.resume(runId, agentId, { as: "child", epoch })) ??
        // It died before its first snapshot was stored: started again from its request, its events
        // going on after those the dead worker logged. Its parent is still waiting for it.
        (spawn?.runId === runId && spawn.childId === agentId
          ? this.runtime.spawnChild(spawn, { firstSeq: await nextSeqOf(bus, runId, agentId), epoch })
          : undefined);
      if (handle) this.#host(key, handle, epoch);
      else await actors.delete(key, { expectedRevision: epoch }).catch(() => {});
    }
    for (const id of dead) {
      this.#seen.delete(id);
      await workers.delete(id).catch(() => {});
    }
  }
}

function splitKey(key: string): [string, string] {
  const dot = key.indexOf(".");
  return [key.slice(0, dot), key.slice(dot + 1)];
}
