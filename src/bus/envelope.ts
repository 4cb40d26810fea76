import { z } from "zod";
import { ulid } from "./ulid.js";

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
  data: z.unknown(),
});

export type Envelope<T = unknown> = Omit<z.infer<typeof envelopeSchema>, "data"> & { data: T };

export interface EnvelopeInit<T> {
  runId: string;
  agentId: string;
  parentId?: string | undefined;
  seq: number;
  type: string;
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
  return envelope;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeEnvelope(envelope: Envelope): Uint8Array {
  return encoder.encode(JSON.stringify(envelope));
}

export class MalformedEnvelopeError extends Error {
  override name = "MalformedEnvelopeError";
}

/** Parses bytes from the wire; throws `MalformedEnvelopeError` with what was wrong. */
export function decodeEnvelope(bytes: Uint8Array): Envelope {
  let json: unknown;
  try {
    json = JSON.parse(decoder.decode(bytes));
  } catch (cause) {
    throw new MalformedEnvelopeError("envelope is not JSON", { cause });
  }
  const parsed = envelopeSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? issue.path.join(".") : "envelope";
    throw new MalformedEnvelopeError(`${where}: ${issue?.message ?? "invalid"}`);
  }
  return parsed.data as Envelope;
}
