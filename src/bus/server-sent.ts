/**
 * Messages the server sent on someone's behalf. NATS permissions say who may publish on a subject,
 * but whoever may read a stream can have the server send a stored message to a subject of their
 * choosing: a push consumer's deliveries (which keep the stored subject and carry a `$JS.` ack
 * reply) and a direct get's reply (which names its stream in a `Nats-Stream` header). No host sends
 * either, so a Troupe subscription or log reader that meets one drops it.
 */
export function sentByTheServer(msg: {
  reply?: string | undefined;
  headers?: { has(name: string): boolean } | undefined;
}): boolean {
  return msg.reply?.startsWith("$JS.") === true || fromAStream(msg);
}

/** A stored message the server sent as a direct get's reply: it names its stream. */
export function fromAStream(msg: { headers?: { has(name: string): boolean } | undefined }): boolean {
  return msg.headers?.has("Nats-Stream") === true;
}
