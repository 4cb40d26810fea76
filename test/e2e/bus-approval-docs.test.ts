import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { createUser } from "@nats-io/nkeys";
import { expect, it } from "vitest";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { ulid } from "../../src/util/ulid.js";
import { runTroupe } from "../support/cli.js";
import { daemonProcesses } from "../support/daemon-process.js";
import { apiRequest, shellCoderDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

const { cleanups, follow } = daemonProcesses();
const EXAMPLES = resolve(import.meta.dirname, "../../examples/bus");

it("examples/bus follows a run and answers its approval as docs/daemon.md says, on a daemon's embedded server; answers it cannot take are refused on the run's events and in its log", async () => {
  const prefix = uniquePrefix();
  const { h } = await shellCoderDaemon(
    prefix,
    { command: "echo approved-and-ran", answer: "ran it" },
    cleanups,
  );
  await h.start();
  const troupe = (args: string[]) => runTroupe([...h.cfg, ...args], { cwd: h.dir, env: h.env });
  // A key registered with the daemon: one of its data dir, made by `troupe keys create`.
  const publicKey = (await troupe(["keys", "create", "ana"])).stdout.trim();
  expect(publicKey).toMatch(/^U[A-Z2-7]{55}$/);
  const key = join(h.dir, ".data", "keys", "ana.nk");
  // A key nobody registered, in a file of the same name elsewhere.
  const stranger = join(h.dir, "ana.nk");
  writeFileSync(stranger, `${new TextDecoder().decode(createUser().getSeed())}\n`, { mode: 0o600 });
  const env = {
    NATS_URL: h.env.NATS_URL,
    TROUPE_PREFIX: prefix,
    NATS_CA: (await troupe(["credentials", "--ca"])).stdout.trim(),
  };
  const client = { ...env, NATS_SEED: (await troupe(["credentials", "client"])).stdout };
  const approver = { ...env, NATS_SEED: (await troupe(["credentials", "approver"])).stdout };

  const runId = `run-${ulid().toLowerCase()}`;
  const following = follow([runId], EXAMPLES, client, [join(EXAMPLES, "follow-run.mjs")]);
  const started = await apiRequest(await h.connectAs("client", prefix), prefix, "runs.start", {
    task: "Run it",
    approval: "ask",
    runId,
  });
  expect(started.type).toBe("runs.start.reply");
  await waitFor("the approval asked", () => following.stdout().includes('"approval.requested"'), 20_000);
  const asked = following
    .stdout()
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line))
    .find((event) => event.type === "approval.requested");
  const args = [asked.runId, asked.agentId, asked.data.callId, "allow"];

  const answer = (keyFile: string) =>
    follow(args, EXAMPLES, { ...approver, APPROVER_KEY: keyFile }, [join(EXAMPLES, "answer-approval.mjs")]);
  const refused = answer(stranger);
  expect(await refused.exit).toBe(1);
  expect(refused.stdout()).toMatch(/^refused: signed by a key that is not a trusted approver's \(U/);
  // Answers the host cannot take, each refused on the run's events and in its log, the request pending.
  const approverBus = await h.connectAs("approver", prefix);
  const jsm = await jetstreamManager(approverBus, { checkAPI: false, apiPrefix: `$JS.${prefix}_hosts.API` });
  const approval = `${asked.runId}.${asked.agentId}.${asked.data.callId}`;
  const stored = await jsm.streams.getMessage(`KV_${prefix}_approvals`, {
    last_by_subj: `$KV.${prefix}_approvals.${approval}`,
  });
  const { requestId } = stored?.json<{ requestId: string }>() ?? { requestId: "" };
  const content = {
    v: 1,
    answerId: "forged",
    runId: asked.runId,
    callId: asked.data.callId,
    requestId,
    decision: "allow",
    time: Date.now(),
    name: "ana",
    publicKey,
  };
  const misplaced: Array<[string, string, RegExp]> = [
    [`${approval}.${requestId}.badjson`, "{not json", /^not a signed answer$/],
    [`${approval}.${requestId}.forged`, JSON.stringify({ content, signature: "AAAA" }), /^bad signature$/],
    [
      `${asked.runId}.${asked.data.callId}.${requestId}.oldshape`,
      JSON.stringify({ content, signature: "AAAA" }),
      /^under .*\.oldshape: an answer goes under /,
    ],
    [`${approval}.not-its-digest.otherreq`, "{}", /^under .*\.otherreq: this request's answers go under /],
  ];
  const js = jetstream(approverBus);
  for (const [answerKey, value] of misplaced)
    await js.publish(`$KV.${prefix}_answers.${answerKey}`, value, { expect: { lastSubjectSequence: 0 } });
  const rejections = () =>
    following
      .stdout()
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line))
      .filter((e) => e.type === "approval.rejected");
  await waitFor("every answer refused", () => rejections().length === misplaced.length + 1);
  expect(rejections().map((e) => e.data.why)).toEqual([
    expect.stringMatching(/not a trusted approver's/),
    ...misplaced.map(([, , why]) => expect.stringMatching(why)),
  ]);
  await waitFor(
    "the log says so",
    () => h.stderr().split("refused an answer to an approval").length > misplaced.length + 1,
  );

  const approved = answer(key);
  expect(await approved.exit).toBe(0);
  expect(approved.stderr()).toContain("echo approved-and-ran");
  expect(approved.stdout()).toBe("approved by ana (answer-approval.mjs)\n");

  expect(await following.exit).toBe(0);
  const events = following
    .stdout()
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line));
  const seqs = events.filter((e) => e.agentId === asked.agentId).map((e) => e.seq);
  expect(seqs).toEqual(seqs.map((_: number, i: number) => i));
  expect(events.map((e) => e.type)).toEqual(
    expect.arrayContaining(["approval.rejected", "approval.decided", "tool.finished", "agent.stopped"]),
  );
  expect(events.find((e) => e.type === "approval.decided").data).toMatchObject({
    approved: true,
    by: "ana (answer-approval.mjs)",
  });
  expect(events.at(-1)).toMatchObject({ type: "agent.stopped", data: { reason: "done", result: "ran it" } });
});
