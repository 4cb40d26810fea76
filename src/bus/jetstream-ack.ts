/** What a push consumer's delivery says of itself in its ack subject. */
export interface Delivery {
  /** The message's sequence in the stream. */
  readonly streamSeq: number;
  /** The message's place among this consumer's deliveries: 1, 2, 3… with none left out. */
  readonly deliverySeq: number;
  /** Messages the consumer has yet to deliver after this one. */
  readonly pending: number;
}

/**
 * A delivery of one consumer (`owner`: `<stream>.<consumer>.`), read from its ack subject:
 * `$JS.ACK.<stream>.<consumer>.<delivered>.<streamSeq>.<deliverySeq>.<ts>.<pending>`, or the form
 * with a domain and an account hash after `ACK` (and a token at the end). Undefined for anything
 * else. Read in place, without a split or an array: every event a reader takes passes here.
 */
export function deliveryOf(reply: string | undefined, owner: string): Delivery | undefined {
  if (!reply?.startsWith("$JS.ACK.")) return undefined;
  let at = 8;
  if (!reply.startsWith(owner, at)) {
    // The newer form: skip the domain and the account hash.
    at = reply.indexOf(".", reply.indexOf(".", at) + 1) + 1;
    if (at === 0 || !reply.startsWith(owner, at)) return undefined;
  }
  // <delivered>.<streamSeq>.<deliverySeq>.<ts>.<pending>: digits read as they come, nothing cut out.
  let token = 0;
  let streamSeq = 0;
  let deliverySeq = 0;
  let pending = 0;
  for (let i = at + owner.length; i < reply.length && token < 5; i++) {
    const code = reply.charCodeAt(i);
    if (code === 46) {
      token++; // "."
      continue;
    }
    if (code < 48 || code > 57) return undefined;
    const digit = code - 48;
    if (token === 1) streamSeq = streamSeq * 10 + digit;
    else if (token === 2) deliverySeq = deliverySeq * 10 + digit;
    else if (token === 4) pending = pending * 10 + digit;
  }
  if (token < 4) return undefined;
  return { streamSeq, deliverySeq, pending };
}
