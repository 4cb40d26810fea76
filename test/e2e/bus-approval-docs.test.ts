import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
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

it("examples/bus follows a run and answers its approval, signed as docs/nats-permissions.md says, on a daemon's embedded server", async () => {
  const prefix = uniquePrefix();
  const { h } = await shellCoderDaemon(
    prefix,
    { command: "echo approved-and-ran", answer: "ran it" },
    cleanups,
  );
  await h.start();
  const troupe = (args: string[]) => runTroupe([...h.cfg, ...args], { cwd: h.dir, env: h.env });
  // A key registered with the daemon: one of its data dir, made by `troupe keys create`.
  expect((await troupe(["keys", "create", "ana"])).stdout).toMatch(/^U[A-Z2-7]{55}\n$/);
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
