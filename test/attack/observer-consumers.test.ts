import { AckPolicy, jetstreamManager } from "@nats-io/jetstream";
import { afterEach, expect, it } from "vitest";
import { VIEW_CONSUMERS } from "../../src/bus/nats-views.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";

/* ATTACK (outside review, the observer's seed): durable consumers on the people's read-only copy of
 * the event log, 45,000 in half a minute, took the server to 1.9 GB and past the daemon's time for
 * it to start, at every restart after: they outlived it. Now a copy takes at most VIEW_CONSUMERS,
 * and the daemon removes the durable ones a reader left at each start (Troupe's readers make none). */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("an observer's durable consumers on the copy of the log are bounded, and gone after the daemon's restart", async () => {
  const prefix = "ocons";
  const h = await embeddedDaemon(
    { "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultModel: scripted\n` },
    "http://127.0.0.1:9/v1",
    cleanups,
  );
  await h.start();
  const stream = `${prefix.toUpperCase()}_EVENTS`;
  const jsm = await jetstreamManager(await h.connectAs("observer", prefix));
  const made = await Promise.all(
    Array.from({ length: VIEW_CONSUMERS + 50 }, (_, i) =>
      jsm.consumers
        .add(stream, { durable_name: `squat-${i}`, ack_policy: AckPolicy.None })
        .then(() => true)
        .catch(() => false),
    ),
  );
  expect(made.filter(Boolean).length).toBeLessThanOrEqual(VIEW_CONSUMERS);
  expect(made.filter((ok) => !ok).length).toBeGreaterThanOrEqual(50);

  await h.stop();
  await h.start();
  const after = await jetstreamManager(await h.connectAs("observer", prefix));
  const madeNames = made.flatMap((ok, i) => (ok ? [`squat-${i}`] : []));
  const left = await Promise.all(
    madeNames.slice(0, 20).map((name) =>
      after.consumers.info(stream, name).then(
        () => name,
        () => undefined,
      ),
    ),
  );
  expect(madeNames.length).toBeGreaterThan(0);
  expect(left.filter(Boolean)).toEqual([]);
}, 120_000);
