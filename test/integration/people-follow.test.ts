import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import type { LoggedEvent } from "../../src/bus/bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { roleInbox } from "../../src/bus/permissions.js";
import type { Role } from "../../src/config/roles.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { serverTlsFiles } from "../../src/trust/server-tls.js";
import { runTroupe } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";
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
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\n`,
      "config/agents/a.yaml": "name: a\ndescription: A.\n",
    },
    "http://127.0.0.1:9/v1",
    cleanups,
  );
  await h.start();
  const as = async (role: Role) => {
    const seed = (await runTroupe([...h.cfg, "credentials", role], { cwd: h.dir, env: h.env })).stdout.trim();
    const seedFile = join(h.dir, `${role}.seed`);
    writeFileSync(seedFile, seed, { mode: 0o600 });
    const bus = await NatsBus.connect({
      url: h.env.NATS_URL,
      prefix,
      nkeySeedFile: seedFile,
      tls: { caFile: serverTlsFiles(join(h.dir, ".data")).ca },
      inboxPrefix: roleInbox(prefix, role),
      role,
    });
    cleanups.push(() => bus.close());
    return bus;
  };
  const hosts = await as("daemon");
  const observer = await as("observer");
  const event = (seq: number) =>
    makeEnvelope({ runId: "followed", agentId: "a1", seq, type: "tick", data: {} });
  await hosts.eventLog.append(event(0));
  const controller = new AbortController();
  const got: LoggedEvent[] = [];
  const reading = (async () => {
    for await (const e of observer.eventLog.read({
      runId: "followed",
      follow: true,
      signal: controller.signal,
    }))
      got.push(e);
  })();
  let seq = 1;
  await waitFor(
    "an event heard rather than asked for",
    async () => {
      await hosts.eventLog.append(event(seq++));
      await new Promise((resolve) => setTimeout(resolve, 100));
      return got.some((e) => e.seq === undefined);
    },
    10_000,
  );
  // Then a burst, every one heard.
  const before = seq;
  await Promise.all(Array.from({ length: 200 }, () => hosts.eventLog.append(event(seq++))));
  await waitFor("every event", () => got.length === seq, 10_000);
  controller.abort();
  await reading;
  expect(got.map((e) => e.envelope.seq)).toEqual(Array.from({ length: seq }, (_, i) => i));
  expect(got.slice(before).filter((e) => e.seq !== undefined)).toEqual([]);
}, 60_000);
