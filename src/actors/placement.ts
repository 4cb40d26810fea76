import { hostname } from "node:os";
import { z } from "zod";
import { type Bus, KvConflictError, NoRespondersError, RequestTimeoutError } from "../bus/bus.js";
import { budgetSchema } from "../config/budget-schema.js";
import { makeEnvelope } from "../events/envelope.js";
import type { Logger } from "../log.js";
import { migrateVersioned, type VersionedRecord } from "../util/record-versions.js";
import { PLACEMENT_MIGRATIONS, PLACEMENT_VERSION } from "./placement-migrations.js";
import type { ChildSpec } from "./subagents.js";

/** The queue group every worker joins on `<p>.work.spawn`. */
export const WORKER_QUEUE = "workers";

/** What a parent sends to have a subagent hosted by a worker. */
export const spawnRequestSchema = z.object({
  runId: z.string(),
  childId: z.string(),
  parentId: z.string(),
  name: z.string(),
  task: z.string(),
  depth: z.number().int(),
  budget: budgetSchema,
  /** The W3C `traceparent` of the parent's call that spawns it, when the parent's host has telemetry on. */
  traceparent: z.string().max(55).optional(),
});
export type SpawnRequest = z.infer<typeof spawnRequestSchema>;

/** A worker's reply to a spawn request (not an agent event): who took the child. */
export const spawnedReplySchema = z.object({ worker: z.string() });
export type SpawnedReply = z.infer<typeof spawnedReplySchema>;

/** Who hosts an actor: the KV bucket `actors`, key `<runId>.<agentId>`. */
export interface Placement {
  /** The version of its shape (placement-migrations.ts). */
  v: typeof PLACEMENT_VERSION;
  worker: string;
  /** What it was spawned with: a worker taking it over before its first snapshot starts it from this. */
  spawn?: SpawnRequest;
}

/**
 * A stored value brought up to this version of a placement (`PLACEMENT_MIGRATIONS`), or undefined
 * when it is none this build reads (not an object, or of another version).
 */
export function placementOf(value: unknown): Placement | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const migrated = migrateVersioned(value as VersionedRecord, PLACEMENT_VERSION, PLACEMENT_MIGRATIONS);
  return "refused" in migrated ? undefined : (migrated.record as unknown as Placement);
}

/** A worker's heartbeat: the KV bucket `workers`, key = worker id. */
export const heartbeatSchema = z.object({
  pid: z.number().int(),
  host: z.string(),
  beats: z.number(),
  /** When it was sent, by the worker's clock (ms since the epoch). */
  at: z.number().optional(),
  /** The agents it hosts (`<runId>.<agentId>`), the first `MAX_LISTED` of them. */
  agents: z.array(z.string()).optional(),
  /** How many agents it hosts. */
  agentCount: z.number().int().optional(),
});
export type Heartbeat = z.infer<typeof heartbeatSchema>;

/** A heartbeat names at most this many of its worker's agents (it goes out every second). */
const MAX_LISTED = 50;

export const actorKey = (runId: string, agentId: string) => `${runId}.${agentId}`;

/**
 * Who a placement record names for a child its parent's host kept after no worker answered: no
 * worker's id (a worker's heartbeat key), so no worker ever takes it for a dead one's.
 */
export const parentHost = (parentId: string) => `parent:${parentId}`;

/**
 * The parent's side of placement: offers a subagent to the worker queue. Nobody listening means no
 * worker is attached, and the parent hosts the child itself. A lost acknowledgement is settled by the
 * placement record, so a child is never started twice.
 */
export function workerPlacement(bus: Bus, log: Logger, timeoutMs = 5000) {
  return async (runId: string, child: ChildSpec): Promise<boolean> => {
    const request: SpawnRequest = {
      runId,
      childId: child.childId,
      parentId: child.parentId,
      name: child.definition.name,
      task: child.task,
      depth: child.depth,
      budget: child.budget,
      ...(child.traceparent ? { traceparent: child.traceparent } : {}),
    };
    const envelope = makeEnvelope({ runId, agentId: child.parentId, seq: 0, type: "spawn", data: request });
    try {
      const reply = await bus.request(bus.subjects.workSpawn(), envelope, { timeoutMs });
      log.debug(
        { childId: child.childId, worker: spawnedReplySchema.safeParse(reply.data).data?.worker },
        "subagent placed on a worker",
      );
      return true;
    } catch (error) {
      if (error instanceof NoRespondersError) return false;
      // No answer in time: a worker may have taken it (its answer lost), or may still take it (a
      // busy worker reads the request late). The placement record settles it: the parent claims it
      // for itself, so that a worker coming late finds it taken and starts nothing; or finds a
      // worker's claim, and the child is that worker's.
      if (error instanceof RequestTimeoutError) {
        const ours = await claim(bus, actorKey(runId, child.childId), parentHost(child.parentId), undefined);
        if (ours === undefined) return true;
      }
      log.warn(
        { err: (error as Error).message, childId: child.childId },
        "no worker took the subagent; hosting it here",
      );
      return false;
    }
  };
}

/**
 * Claims an actor for a worker: the revision of its placement record, or undefined when another got
 * there first. Revisions only grow, so a worker taking an actor over gets a higher one than its
 * earlier host: it is the epoch its events are stamped with.
 */
export async function claim(
  bus: Bus,
  key: string,
  worker: string,
  spawn: SpawnRequest | undefined,
  expectedRevision?: number,
): Promise<number | undefined> {
  const actors = await bus.kv("actors");
  const placement: Placement = { v: PLACEMENT_VERSION, worker, spawn };
  try {
    if (expectedRevision === undefined) return await actors.create(key, placement);
    return await actors.put(key, placement, { expectedRevision });
  } catch (error) {
    if (error instanceof KvConflictError) return undefined;
    throw error;
  }
}

export function heartbeat(beats: number, agents: readonly string[] = []): Heartbeat {
  return {
    pid: process.pid,
    host: hostname(),
    beats,
    at: Date.now(),
    agents: agents.slice(0, MAX_LISTED),
    agentCount: agents.length,
  };
}
