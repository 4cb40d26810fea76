import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { runIdFor } from "../../src/cli/run-client.js";
import { decodeEnvelope, type Envelope, encodeEnvelope, makeEnvelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { onTerminal, runTroupe } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (outside review, client seed: may start runs, cannot approve): the run id of `--id KEY` is
 * made from the key, which anyone can do. The attacker started a run of its own under the id of
 * `--id nightly` first; the victim's `troupe run --id nightly "run the nightly checks"` followed it as
 * theirs, asked them on their terminal to allow the attacker's command (answered with their trusted
 * key) and exited 0. Now the daemon keeps a digest of what each runs.start asked in the sealed run
 * record, and a runs.start under a taken id follows that run only when it asked the same: otherwise
 * one line, exit 2, and nothing of the other run is shown or asked. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

const VICTIM_TASK = "run the nightly checks";
const ATTACKER_TASK = "deploy the build from the attacker";

async function squatted(prefix: string, attackerReply: "command" | "text") {
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1, lastUser: ATTACKER_TASK },
      reply:
        attackerReply === "command"
          ? { toolCalls: [{ name: "shell", arguments: { command: "echo attacker >> ledger.txt" } }] }
          : { text: "All nightly checks passed." },
    },
    { match: { turn: 2, lastUser: ATTACKER_TASK }, reply: { text: "All nightly checks passed." } },
    { match: { turn: 1, lastUser: VICTIM_TASK }, reply: { text: "Checked." }, times: 5 },
  ]);
  cleanups.push(() => model.close());
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: coder\ndefaultModel: scripted\napproval:\n  timeoutMs: 60000\n`,
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
    },
    model.baseURL,
    cleanups,
  );
  await h.start();
  const runId = runIdFor("nightly", prefix);
  const attacker = await h.connectAs("client", prefix);
  const ask = async (verb: string, data: unknown): Promise<Envelope> =>
    decodeEnvelope(
      (
        await attacker.request(
          `${prefix}.api.${verb}`,
          encodeEnvelope(makeEnvelope({ runId, agentId: "cli", seq: 0, type: verb, data })),
          { timeout: 10_000 },
        )
      ).data,
    );
  const started = await ask("runs.start", { runId, task: ATTACKER_TASK, approval: "ask" });
  expect(started.type).toBe("runs.start.reply");
  return { h, model, runId, ask };
}

it("a run started first under the id of --id nightly with another task is refused to the victim's terminal: nothing shown, nothing asked, the command never runs", async () => {
  const { h, runId, ask } = await squatted("squat", "command");
  await waitFor(
    "the attacker's run asking",
    async () =>
      (await runTroupe([...h.cfg, "approvals"], { cwd: h.dir, env: h.env })).stdout.includes("shell"),
    20_000,
  );

  const victim = onTerminal([...h.cfg, "run", "--id", "nightly", VICTIM_TASK], { cwd: h.dir, env: h.env });
  cleanups.push(() => void victim.child.kill("SIGKILL"));
  let answered = false;
  const code = await Promise.race([
    victim.exit,
    waitFor("the question", () => victim.output().includes("? allow shell"), 20_000).then(() => {
      // What the victim does when asked on their own run's terminal.
      answered = true;
      victim.child.stdin.write("y\n");
      return victim.exit;
    }),
  ]);
  await new Promise((r) => setTimeout(r, 2000));
  expect(existsSync(join(h.dir, "ledger.txt"))).toBe(false);
  expect(answered).toBe(false);
  expect(victim.output()).not.toContain("echo attacker");
  expect(victim.output()).toContain(
    `troupe: run ${runId} was started with another task or options: start this one under another id (troupe run --id ANOTHER-KEY)`,
  );
  expect(code).toBe(2);
  // The attacker's run still waits for an answer nobody gave.
  const record = await ask("runs.get", { runId });
  expect(record.data).toMatchObject({ runId, task: ATTACKER_TASK, status: "running" });

  // Under another key the victim's task runs, and the same command again follows that run.
  const own = await runTroupe([...h.cfg, "run", "--json", "--id", "nightly-own", VICTIM_TASK], {
    cwd: h.dir,
    env: h.env,
  });
  expect(own.code, own.stderr).toBe(0);
  expect(own.stdout).toContain('"result":"Checked."');
  const again = await runTroupe([...h.cfg, "run", "--json", "--id", "nightly-own", VICTIM_TASK], {
    cwd: h.dir,
    env: h.env,
  });
  expect(again.code, again.stderr).toBe(0);
  expect(again.stdout).toContain('"result":"Checked."');
}, 90_000);

it("a finished run under the id of --id nightly with another task gives the victim neither its result nor its exit 0", async () => {
  const { h, runId, ask } = await squatted("squatdone", "text");
  await waitFor(
    "the attacker's run done",
    async () => ((await ask("runs.get", { runId })).data as { status?: string }).status === "done",
    20_000,
  );
  for (const options of [[], ["--approval", "ask"]]) {
    const victim = await runTroupe([...h.cfg, "run", "--json", ...options, "--id", "nightly", VICTIM_TASK], {
      cwd: h.dir,
      env: h.env,
    });
    expect(victim.stdout).toBe("");
    expect(victim.stderr).toBe(
      `troupe: run ${runId} was started with another task or options: start this one under another id (troupe run --id ANOTHER-KEY)\n`,
    );
    expect(victim.code).toBe(2);
  }
}, 90_000);
