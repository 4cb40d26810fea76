import { spawn } from "node:child_process";
import { AckPolicy, DeliverPolicy, jetstreamManager } from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
import { afterEach, expect, it } from "vitest";
import { accountNames, peopleReadStreams } from "../../src/bus/permissions.js";
import type { Role } from "../../src/config/roles.js";
import { runTroupe, TROUPE_BIN } from "../support/cli.js";
import { shellCoderDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (outside reviews, the people's seeds, on the default embedded server): a reader's seed could
 * make consumers on the people's copies of the log and the approvals, as many as a copy took: in two
 * seconds an observer's took them all, and `troupe observe`, `replay` and every `troupe run` failed;
 * durable ones outlived the reader; and a consumer's deliver subject is the requester's to name. A
 * person's role now may make no consumer at all, by either API its account can name: it reads the
 * hosts' streams by gets (log-read-by-gets.ts) and watches a record by reading it again when its
 * bucket changed. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

const PEOPLE: Role[] = ["client", "approver", "observer"];

it("a person's seed makes no consumer on any stream it reads, and troupe run, approve, replay and observe work by gets", async () => {
  const prefix = "ccf";
  const { h } = await shellCoderDaemon(
    prefix,
    { command: "sleep 2; echo slept > slept.txt", answer: "all done" },
    cleanups,
  );
  await h.start();
  const hosts = await jetstreamManager(await h.connectAs("daemon", prefix));
  const read = peopleReadStreams(prefix);
  const consumers = () =>
    Promise.all(read.map((stream) => hosts.streams.info(stream).then((i) => i.state.consumer_count)));
  const before = await consumers();
  for (const role of PEOPLE) {
    const nc = await h.connectAs(role, prefix);
    for (const api of ["$JS.API", `$JS.${accountNames(prefix).hosts}.API`])
      for (const stream of read) {
        const jsm = await jetstreamManager(nc, { checkAPI: false, apiPrefix: api });
        for (const durable_name of [undefined, `${role}-left`])
          await expect(
            jsm.consumers.add(stream, {
              ...(durable_name ? { durable_name } : {}),
              ack_policy: AckPolicy.None,
              deliver_policy: DeliverPolicy.All,
              inactive_threshold: nanos(86_400_000),
            }),
            `${role} ${api} ${stream}`,
          ).rejects.toThrow();
      }
  }
  expect(await consumers()).toEqual(before);

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
