import { spawn } from "node:child_process";
import { afterEach, expect, it } from "vitest";
import { runTroupe, TROUPE_BIN } from "../support/cli.js";
import { shellCoderDaemon } from "../support/embedded-daemon.js";

/* ATTACK (outside review J, the worker's seed): every event the daemon appends reaches a worker with
 * its reply subject, the daemon's ack inbox and a counter. The worker may not publish there, but the
 * server does for it: its own writes to the workers bucket, with those subjects and the next counters
 * as replies, had JetStream send their acks there, and the daemon took them for the acks of its
 * snapshot writes. Its next write conflicted with its own record; it let its run's first agent go
 * as if another host had taken it over: runs `running` for good, `troupe run` hanging, a run gone
 * from `troupe status`. An ack's token is now unguessable, and an ack of another stream, or a
 * stream API's answer, is not taken for one. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("a worker's seed cannot have the server ack the daemon's writes for it: every run ends, and is listed done", async () => {
  const prefix = "wfk";
  const { h } = await shellCoderDaemon(
    prefix,
    { command: "echo ran >> ledger.txt", answer: "the real answer" },
    cleanups,
  );
  await h.start();
  const worker = await h.connectAs("worker", prefix);
  let inbox: string | undefined;
  let next = 0;
  const seen: string[] = [];
  worker.subscribe(`${prefix}.evt.>`, {
    callback: (_error, msg) => {
      if (!msg.reply?.startsWith(`_INBOX_${prefix}.daemon.`)) return;
      const dot = msg.reply.lastIndexOf(".");
      inbox = msg.reply.slice(0, dot);
      next = Math.max(next, Number.parseInt(msg.reply.slice(dot + 1), 36) + 1 || 0);
      seen.push(msg.reply);
    },
  });
  let flooding = true;
  const flood = (async () => {
    while (flooding) {
      if (inbox) {
        // Its own bucket's acks, and a stream API's answers, at the tokens to come and at the
        // replies it saw.
        for (let k = 0; k < 20; k++)
          worker.publish(`$KV.${prefix}_workers.zz${k}`, "{}", {
            reply: `${inbox}.${(next + k).toString(36)}`,
          });
        for (const reply of seen.splice(0)) {
          worker.publish(`$KV.${prefix}_workers.zz`, "{}", { reply });
          worker.publish(`$JS.API.STREAM.MSG.GET.KV_${prefix}_workers`, "{", { reply });
        }
      }
      await worker.flush();
      await new Promise((r) => setTimeout(r, 2));
    }
  })();

  const runs = Array.from({ length: 3 }, (_, i) => {
    const client = spawn(
      process.execPath,
      [TROUPE_BIN, ...h.cfg, "run", "--json", "--approval", "auto-edit", `run ${i}`],
      { cwd: h.dir, env: h.env, stdio: ["ignore", "pipe", "ignore"] },
    );
    cleanups.push(() => client.kill("SIGKILL"));
    let out = "";
    client.stdout?.on("data", (c) => (out += c));
    return new Promise<{ code: number | null; out: string }>((resolve) =>
      client.once("exit", (code) => resolve({ code, out })),
    );
  });
  const timeout = new Promise<"hung">((resolve) => setTimeout(() => resolve("hung"), 45_000));
  const ended = await Promise.race([Promise.all(runs), timeout]);
  flooding = false;
  await flood;
  expect(ended).not.toBe("hung");
  const results = ended as Array<{ code: number | null; out: string }>;
  expect(results.map((r) => r.code)).toEqual([0, 0, 0]);
  const ids = results.map((r) => (JSON.parse(r.out.split("\n")[0] ?? "{}") as { runId: string }).runId);
  const status = await runTroupe([...h.cfg, "status", "--json"], { cwd: h.dir, env: h.env });
  const listed = (JSON.parse(status.stdout) as { runs: Array<{ runId: string; status: string }> }).runs;
  for (const runId of ids) expect(listed.find((r) => r.runId === runId)?.status).toBe("done");
}, 120_000);
