import { z } from "zod";
import { TroupeError } from "../errors.js";
import { ulid } from "../util/ulid.js";

/**
 * The one message shape on the bus (DESIGN.md). `id` doubles as the JetStream `Nats-Msg-Id`,
 * so a publish retried with the same envelope is stored once. Bump `ENVELOPE_VERSION` when the
 * shape changes incompatibly; readers refuse versions they do not know.
 */
export const ENVELOPE_VERSION = 1;

export const envelopeSchema = z.object({
  v: z.literal(ENVELOPE_VERSION),
  /** Unique, sortable (ULID). */
  id: z.string().min(1),
  /** Milliseconds since the epoch, when the envelope was made. */
  ts: z.number().int().nonnegative(),
  runId: z.string().min(1),
  agentId: z.string().min(1),
  /** The agent that spawned `agentId`, for subagents. */
  parentId: z.string().min(1).optional(),
  /** Per-agent sequence number, starting at 0, without gaps. */
  seq: z.number().int().nonnegative(),
  /** Dotted event or message type, e.g. `state.changed`. */
  type: z.string().min(1),
  /**
   * Which placement of the agent made it (absent: 0). A worker that takes an agent over stamps a
   * higher one, so readers drop what the host it took over from still sends (see `EventFilter`).
   */
  epoch: z.number().int().nonnegative().optional(),
  /**
   * The W3C `traceparent` of the span the agent was started in, on its `agent.started` only when
   * telemetry is on (docs/telemetry.md): its parent's tool call, or the context a run was started in.
   */
  trace: z.string().max(55).optional(),
  data: z.unknown(),
});

export type Envelope<T = unknown> = Omit<z.infer<typeof envelopeSchema>, "data"> & { data: T };

export interface EnvelopeInit<T> {
  runId: string;
  agentId: string;
  parentId?: string | undefined;
  seq: number;
  type: string;
  /** Left out when 0 (an agent no worker took over). */
  epoch?: number | undefined;
  /** The `traceparent` an agent was started in (on its `agent.started`). */
  trace?: string | undefined;
  data: T;
}

export function makeEnvelope<T>(init: EnvelopeInit<T>, now: number = Date.now()): Envelope<T> {
  const envelope: Envelope<T> = {
    v: ENVELOPE_VERSION,
    id: ulid(now),
    ts: now,
    runId: init.runId,
    agentId: init.agentId,
    seq: init.seq,
    type: init.type,
    data: init.data,
  };
  if (init.parentId !== undefined) envelope.parentId = init.parentId;
  if (init.epoch) envelope.epoch = init.epoch;
  if (init.trace !== undefined) envelope.trace = init.trace;
  return envelope;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeEnvelope(envelope: Envelope): Uint8Array {
  return encoder.encode(JSON.stringify(envelope));
}

export class MalformedEnvelopeError extends TroupeError {
  override name = "MalformedEnvelopeError";
}

/** Parses bytes from the wire; throws `MalformedEnvelopeError` with what was wrong. */
export function decodeEnvelope(bytes: Uint8Array): Envelope {
  return parseEnvelope(parseJson(bytes));
}

/**
 * The JSON of a message: one envelope, or an array of them (earlier builds of Troupe stored an agent's
 * events as one array on `<p>.evt.<runId>.<agentId>.batch`; logs written then are still read).
 */
export function parseJson(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(decoder.decode(bytes));
  } catch (cause) {
    throw new MalformedEnvelopeError("envelope is not JSON", { cause });
  }
}

const ENVELOPE_KEYS = new Set(Object.keys(envelopeSchema.shape));
const text = (value: unknown) => typeof value === "string" && value.length > 0;
const count = (value: unknown) => typeof value === "number" && Number.isSafeInteger(value) && value >= 0;

/**
 * The schema's checks written out: every client reads every event of a run, and zod took about
 * a fifth of the client's time per event. Whatever this does not pass goes to the schema, which
 * says what is wrong (and drops keys it does not know).
 */
function isWellFormed(json: unknown): json is Envelope {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return false;
  const e = json as Record<string, unknown>;
  for (const key in e) if (!ENVELOPE_KEYS.has(key)) return false;
  return (
    e.v === ENVELOPE_VERSION &&
    text(e.id) &&
    count(e.ts) &&
    text(e.runId) &&
    text(e.agentId) &&
    (e.parentId === undefined || text(e.parentId)) &&
    count(e.seq) &&
    (e.epoch === undefined || count(e.epoch)) &&
    (e.trace === undefined || (typeof e.trace === "string" && e.trace.length <= 55)) &&
    text(e.type) &&
    "data" in e
  );
}

/** Checks parsed JSON against the envelope schema; throws `MalformedEnvelopeError` with what was wrong. */
export function parseEnvelope(json: unknown): Envelope {
  if (isWellFormed(json)) return json;
  const parsed = envelopeSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? issue.path.join(".") : "envelope";
    throw new MalformedEnvelopeError(`${where}: ${issue?.message ?? "invalid"}`);
  }
  return parsed.data as Envelope;
}
