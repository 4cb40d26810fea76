import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterEach, expect, it } from "vitest";
import { NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { plainDaemon } from "../support/embedded-daemon.js";

/* A data dir whose server an earlier Troupe ran with one account keeps what it stored: the daemon
 * that starts the two-account server moves the streams into the hosts' account first, and the
 * people read the old events there. The people's copies a later Troupe kept in their own account
 * (which has no JetStream now) are removed. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("a data dir of the one-account server keeps its streams, moved into the hosts' account, and the people's copies go", async () => {
  const prefix = "upgrade";
  const h = await plainDaemon(prefix, cleanups);
  // What an earlier daemon left: its server's store, streams in the one (global) account.
  const earlier = await NatsServerProcess.start({ storeDir: join(h.dir, ".data", "nats") });
  const nc = await connect({ servers: earlier.url });
  const stream = `${prefix.toUpperCase()}_EVENTS`;
  await (await jetstreamManager(nc)).streams.add({ name: stream, subjects: [`${prefix}.evt.>`] });
  await jetstream(nc).publish(`${prefix}.evt.run-old.a.agent.started`, JSON.stringify({ old: true }));
  await nc.close();
  await earlier.stop();
  const copies = join(h.dir, ".data", "nats", "jetstream", `${prefix}_users`, "streams", stream);
  mkdirSync(copies, { recursive: true });

  await h.start();
  const stored = async (role: "daemon" | "observer") => {
    // A person's account reaches the hosts' streams' gets under the hosts' API prefix.
    const apiPrefix = role === "daemon" ? "$JS.API" : `$JS.${prefix}_hosts.API`;
    const jsm = await jetstreamManager(await h.connectAs(role, prefix), { checkAPI: false, apiPrefix });
    for (let tries = 0; tries < 50; tries++) {
      const found = await jsm.streams
        .getMessage(stream, { last_by_subj: `${prefix}.evt.run-old.a.agent.started` })
        .catch(() => null);
      if (found) return found.json<{ old?: boolean }>();
      await new Promise((r) => setTimeout(r, 100));
    }
    return null;
  };
  expect(await stored("daemon")).toEqual({ old: true });
  expect(await stored("observer")).toEqual({ old: true });
  expect(existsSync(join(h.dir, ".data", "nats", "jetstream", `${prefix}_users`))).toBe(false);
}, 60_000);
