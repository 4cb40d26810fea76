/*
 * Messages the server sent on someone's behalf. NATS permissions say who may publish on a subject,
 * but whoever may read a stream can have the server send a stored message to a subject of their
 * choosing: a push consumer's deliveries (which keep the stored subject and carry a `$JS.` ack
 * reply) and a direct get's reply (which names its stream in a `Nats-Stream` header). No host sends
 * either, so a Troupe subscription or log reader that meets one drops it.
 */
/** What these checks read of a message (nats.js's `Msg`). */
export interface ReceivedMsg {
  readonly subject: string;
  readonly reply?: string | undefined;
  readonly data: Uint8Array;
  readonly headers?: { has(name: string): boolean } | undefined;
}

export function sentByTheServer(msg: ReceivedMsg): boolean {
  return msg.reply?.startsWith("$JS.") === true || fromAStream(msg);
}

/**
 * Room for the headers a Troupe publish carries (`Nats-Msg-Id` with a ULID: 53 bytes) and a little
 * more. A direct get's reply carries more: the server adds the stream, the subject, the sequence and
 * the time (over 100 bytes with the shortest names).
 */
const PLAIN_HEADER_BYTES = 80;

/**
 * A stored message the server sent as a direct get's reply: it names its stream. Every event a
 * reader takes passes here, so the headers are decoded only when there are more of them than a
 * Troupe publish carries: their size is what the message's size (nats.js's messages have `size()`,
 * though its `Msg` type does not say so) leaves over. Without `size()`, they are always decoded.
 * `dataBytes`: the payload's length, when the caller has it (nats.js makes a new view per `data`).
 */
export function fromAStream(msg: ReceivedMsg, dataBytes = msg.data.length): boolean {
  const size = (msg as { size?: () => number }).size?.();
  if (size !== undefined) {
    const headerBytes = size - msg.subject.length - (msg.reply?.length ?? 0) - dataBytes;
    if (headerBytes <= PLAIN_HEADER_BYTES) return false;
  }
  return msg.headers?.has("Nats-Stream") === true;
}
