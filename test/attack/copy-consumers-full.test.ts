import { spawn } from "node:child_process";
import { AckPolicy, DeliverPolicy, jetstreamManager } from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
import { afterEach, expect, it } from "vitest";
import { VIEW_CONSUMERS } from "../../src/bus/nats-views.js";
import type { Role } from "../../src/config/roles.js";
import { runTroupe, TROUPE_BIN } from "../support/cli.js";
import { type embeddedDaemon, shellCoderDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (outside review, the observer's and the approver's seeds, on the default embedded server):
 * each people's copy takes at most VIEW_CONSUMERS consumers, and a reader's seed may make them. In
 * two seconds an observer's made them all on the log's copy, an approver's on the approvals' copy:
 * `troupe observe` and `troupe replay` failed for everyone ("maximum consumers limit reached"), and
 * every `troupe run` died at its first quiet second, or at its run's first question. A reader that
 * the server gives no consumer now reads by direct gets and watches a record by reading it again. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

/** Ephemeral pull consumers, a day of inactivity each, until the copy takes no more. */
async function fill(
  h: Awaited<ReturnType<typeof embeddedDaemon>>,
  role: Role,
  prefix: string,
  stream: string,
) {
  const jsm = await jetstreamManager(await h.connectAs(role, prefix));
  let refused = "";
  for (let made = 0; made <= VIEW_CONSUMERS && !refused; made += 50)
    await Promise.all(
      Array.from({ length: 50 }, () =>
        jsm.consumers
          .add(stream, {
            ack_policy: AckPolicy.None,
            deliver_policy: DeliverPolicy.All,
            inactive_threshold: nanos(86_400_000),
          })
          .catch((error: Error) => {
            refused = error.message;
          }),
      ),
    );
  expect(refused).toMatch(/maximum consumers limit reached/);
}

it("with every consumer of the people's copies taken, troupe run, approve, replay and observe still work", async () => {
  const prefix = "ccf";
  const { h } = await shellCoderDaemon(
    prefix,
    { command: "sleep 2; echo slept > slept.txt", answer: "all done" },
    cleanups,
  );
  await h.start();
  await fill(h, "observer", prefix, `${prefix.toUpperCase()}_EVENTS`);
  await fill(h, "approver", prefix, `KV_${prefix}_approvals`);

  // A run whose command is asked about, and then is quiet for two seconds.
  const client = spawn(process.execPath, [TROUPE_BIN, ...h.cfg, "run", "--json", "--approval", "ask", "Go"], {
    cwd: h.dir,
    env: h.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  cleanups.push(() => client.kill("SIGKILL"));
  let out = "";
  let err = "";
  client.stdout.on("data", (c) => (out += c));
  client.stderr.on("data", (c) => (err += c));
  const exit = new Promise<number | null>((r) => client.once("exit", r));
  await waitFor(
    "the question",
    () => out.includes('"approval.requested"') || client.exitCode !== null,
    20_000,
  );
  const approve = await runTroupe([...h.cfg, "approve", "--allow"], { cwd: h.dir, env: h.env });
  expect(approve.code, approve.stderr).toBe(0);
  expect(await exit, err).toBe(0);
  expect(out).toMatch(/"type":"agent\.stopped"[^\n]*"result":"all done"/);
  const { runId } = JSON.parse(out.split("\n")[0] ?? "{}") as { runId: string };

  const replay = await runTroupe([...h.cfg, "replay", runId, "--json"], { cwd: h.dir, env: h.env });
  expect(replay.code, replay.stderr).toBe(0);
  expect(
    replay.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line).seq),
  ).toEqual(
    out
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line).seq),
  );
  const observe = await runTroupe([...h.cfg, "observe", runId, "--json"], { cwd: h.dir, env: h.env });
  expect(observe.code, observe.stderr).toBe(0);
  expect(observe.stdout).toContain('"result":"all done"');
}, 120_000);
