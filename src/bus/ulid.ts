import { randomFillSync } from "node:crypto";

/**
 * ULIDs (26 Crockford base32 characters: 48 bits of milliseconds, 80 random bits), monotonic within
 * a process: ids made in the same millisecond sort in the order made. The `ulid` package draws its
 * randomness with one `crypto.getRandomValues` call per character; this fills a pooled buffer now and
 * then, which makes an id several times cheaper (every event gets one).
 */
const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const RANDOM_CHARS = 16;

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

export function ulid(now: number = Date.now()): string {
  if (now > lastTime) {
    lastTime = now;
    freshRandom();
  } else {
    increment();
  }
  let time = lastTime;
  let out = "";
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[time % 32] + out;
    time = Math.floor(time / 32);
  }
  for (let i = 0; i < RANDOM_CHARS; i++) out += ALPHABET[random[i] as number];
  return out;
}
