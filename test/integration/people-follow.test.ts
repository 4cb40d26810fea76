import { afterEach, expect, it } from "vitest";
import { makeEnvelope } from "../../src/events/envelope.js";
import { plainDaemon } from "../support/embedded-daemon.js";
import { follow, untilLive } from "../support/follow-log.js";
import { waitFor } from "../support/wait.js";

/*
 * On the server `troupe daemon` starts by default (TLS, the hosts' account and the people's, a seed
 * per role), a person's observer follows a run by gets until it has read the log to its end, then
 * by hearing the events the people's account imports read-only: every event once, in order.
 */
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}, 60_000);

it("a person's observer on the daemon's default server hears a run's events once it has read the log", async () => {
  const prefix = "peoplefollow";
  const h = await plainDaemon(prefix, cleanups);
  await h.start();
  const hosts = await h.busAs("daemon", prefix);
  const observer = await h.busAs("observer", prefix);
  const event = (seq: number) =>
    makeEnvelope({ runId: "followed", agentId: "a1", seq, type: "tick", data: {} });
  await hosts.eventLog.append(event(0));
  const follower = follow(observer, "followed");
  await untilLive(hosts, "followed", follower.got);
  // Then a burst, every one heard.
  await Promise.all(Array.from({ length: 200 }, (_, i) => hosts.eventLog.append(event(i + 1))));
  await waitFor("every event", () => follower.of("a1").length === 201, 10_000);
  await follower.stop();
  const own = follower.of("a1");
  expect(own.map((e) => e.envelope.seq)).toEqual(Array.from({ length: 201 }, (_, i) => i));
  expect(own.slice(1).filter((e) => e.seq !== undefined)).toEqual([]);
}, 60_000);
