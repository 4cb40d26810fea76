import { randomFillSync } from "node:crypto";

/**
 * ULIDs (26 Crockford base32 characters: 48 bits of milliseconds, 80 random bits), monotonic within
 * a process: ids made in the same millisecond sort in the order made. The `ulid` package draws its
 * randomness with one `crypto.getRandomValues` call per character; this fills a pooled buffer now and
 * then, which makes an id several times cheaper (every event gets one).
 */
const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const TIME_CHARS = 10;
const RANDOM_CHARS = 16;
/** The character codes of the id being made: built in place, turned into one string at the end. */
const codes: number[] = Array.from({ length: TIME_CHARS + RANDOM_CHARS }, () => 48);

const pool = new Uint8Array(4096);
let poolAt = pool.length;
let lastTime = -1;
const random = new Uint8Array(RANDOM_CHARS);

function freshRandom(): void {
  if (poolAt + RANDOM_CHARS > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  for (let i = 0; i < RANDOM_CHARS; i++) random[i] = (pool[poolAt++] as number) & 31;
}

/** Adds one to the random part; should it be all ones (2^-80), moves on a millisecond instead. */
function increment(): void {
  for (let i = RANDOM_CHARS - 1; i >= 0; i--) {
    if ((random[i] as number) < 31) {
      random[i] = (random[i] as number) + 1;
      return;
    }
    random[i] = 0;
  }
  lastTime++;
  freshRandom();
}

/**
 * One flat string per id: adding 26 characters one by one made a string per character, about 900
 * bytes of garbage per id.
 */
export function ulid(now: number = Date.now()): string {
  if (now > lastTime) {
    lastTime = now;
    freshRandom();
  } else {
    increment();
  }
  let time = lastTime;
  for (let i = TIME_CHARS - 1; i >= 0; i--) {
    codes[i] = ALPHABET.charCodeAt(time % 32);
    time = Math.floor(time / 32);
  }
  for (let i = 0; i < RANDOM_CHARS; i++) codes[TIME_CHARS + i] = ALPHABET.charCodeAt(random[i] as number);
  return String.fromCharCode.apply(null, codes);
}
