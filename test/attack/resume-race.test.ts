import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { decodeEnvelope, encodeEnvelope, makeEnvelope } from "../../src/events/envelope.js";
import { runTroupe } from "../support/cli.js";
import { shellCoderDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (outside review, the client's seed): four runs.resume of one stopped run at once each
 * brought it back, so it was hosted four times and its command ran four times (runs.start held a
 * run id while it started; runs.resume held nothing across its awaits). Now one resume of a run
 * goes on at a time: the others are refused, and the command runs once. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("runs.resume sent four times at once brings a run back once, and its command runs once", async () => {
  const prefix = "rrace";
  const { h } = await shellCoderDaemon(
    prefix,
    // The first reply waits 6 s, long past the abort below however busy the machine: at 1.5 s a
    // loaded machine's abort came after it, and the run was stopped at its command, not before.
    { command: "echo ran-$$ >> ledger.txt", answer: "done", delayMs: 6000 },
    cleanups,
  );
  await h.start();
  const started = await runTroupe([...h.cfg, "run", "--detach", "--approval", "auto-edit", "append"], {
    cwd: h.dir,
    env: h.env,
  });
  const runId = /run-[0-9a-z]+/.exec(started.stdout + started.stderr)?.[0] as string;
  expect(runId).toBeTruthy();
  const nc = await h.connectAs("client", prefix);
  const ask = (verb: string) =>
    nc
      .request(
        `${prefix}.api.${verb}`,
        encodeEnvelope(makeEnvelope({ runId: "new", agentId: "cli", seq: 0, type: verb, data: { runId } })),
        { timeout: 20_000 },
      )
      .then((msg) => decodeEnvelope(msg.data));
  const status = async () => ((await ask("runs.get")).data as { status?: string }).status;
  // Stopped while its first model call waits: nothing has run yet.
  await runTroupe([...h.cfg, "abort", runId], { cwd: h.dir, env: h.env });
  await waitFor("the run aborted", async () => (await status()) === "aborted", 15_000);
  expect(existsSync(join(h.dir, "ledger.txt"))).toBe(false);
  const resume = () => ask("runs.resume");
  const replies = await Promise.all([resume(), resume(), resume(), resume()]);
  const resumed = replies.filter((reply) => reply.type === "runs.resume.reply");
  expect(resumed).toHaveLength(1);
  expect(replies.filter((reply) => JSON.stringify(reply.data).includes("is running"))).toHaveLength(3);

  await waitFor("the run done", async () => (await status()) === "done", 20_000);
  expect(readFileSync(join(h.dir, "ledger.txt"), "utf8").trim().split("\n")).toHaveLength(1);
});
