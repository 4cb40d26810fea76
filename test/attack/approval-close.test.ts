import { spawn } from "node:child_process";
import { join } from "node:path";
import { jetstream } from "@nats-io/jetstream";
import { afterEach, expect, it } from "vitest";
import { listApprovals } from "../../src/approvals/answer-approval.js";
import { approvalKey } from "../../src/approvals/approval-record.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { roleInbox } from "../../src/bus/permissions.js";
import { silentLogger } from "../../src/log.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { serverTlsFiles } from "../../src/trust/server-tls.js";
import { runTroupe, TROUPE_BIN } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (worker seed): a copy of the host's own pending record, status "closed", written over it
 * through a direct get's reply. The host's watch took it for its own and left it, and every approver
 * refused to answer a closed request; the host now puts back what it did not decide itself, and a
 * worker's seed may no longer ask a direct get at all (test/integration/nats-permissions.test.ts
 * has the host put back a record the server wrote over it). */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

it("a worker's copy of a live approval, written over it as closed, is put back: troupe approve answers it and the run gets the answer", async () => {
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: { toolCalls: [{ name: "shell", arguments: { command: "echo hi > made.txt" } }] },
    },
    { match: { turn: 2 }, reply: { text: "ran it" }, times: 5 },
  ]);
  cleanups.push(() => model.close());
  const prefix = "atk";
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: coder\ndefaultModel: scripted\napproval:\n  timeoutMs: 8000\n`,
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
    },
    model.baseURL,
    cleanups,
  );
  const { dir, env } = h;
  await h.start();

  const client = spawn(
    process.execPath,
    [TROUPE_BIN, "--config", join(dir, "config"), "run", "--json", "--approval", "ask", "run it"],
    {
      cwd: dir,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  client.stdout.on("data", (c) => (out += c));
  const clientExit = new Promise<number | null>((r) => client.once("exit", r));
  cleanups.push(() => client.kill("SIGKILL"));
  await waitFor("approval requested", () => out.includes('"approval.requested"'), 15_000);

  // The attacker: the worker's seed, as `troupe credentials worker` prints it.
  const seed = (
    await runTroupe(["--config", join(dir, "config"), "credentials", "worker"], { cwd: dir, env })
  ).stdout.trim();
  const { writeFileSync } = await import("node:fs");
  writeFileSync(join(dir, "worker.nk"), seed);
  const worker = await NatsBus.connect({
    url: env.NATS_URL,
    prefix,
    nkeySeedFile: join(dir, "worker.nk"),
    tls: { caFile: serverTlsFiles(join(dir, ".data")).ca },
    inboxPrefix: roleInbox(prefix, "worker"),
    role: "worker",
    log: silentLogger,
  });
  cleanups.push(() => worker.close());
  await waitFor("record", async () => (await listApprovals(worker, undefined)).length > 0, 10_000);
  const [record] = await listApprovals(worker, undefined);
  if (!record) throw new Error("no record");
  const key = approvalKey(record.request);
  const closed = { ...record, status: "closed", reason: "the agent stopped (done) before anyone answered" };
  await jetstream(worker.connection).publish(`$KV.${prefix}_snapshots.scratch`, JSON.stringify(closed));
  worker.connection.publish(`$JS.API.DIRECT.GET.KV_${prefix}_snapshots.$KV.${prefix}_snapshots.scratch`, "", {
    reply: `$KV.${prefix}_approvals.${key}`,
  });
  await worker.flush();
  await new Promise((r) => setTimeout(r, 1000));

  const approvals = await runTroupe(["--config", join(dir, "config"), "approvals"], { cwd: dir, env });
  const approve = await runTroupe(
    ["--config", join(dir, "config"), "approve", record.request.callId, "--allow"],
    { cwd: dir, env },
  );
  await clientExit;
  // The run went on without its command: denied, though nobody denied it and nobody could allow it.
  const told = model.requests.at(-1)?.body.messages.at(-1);
  expect({
    approvals: approvals.stdout.includes(record.request.callId),
    approve: approve.code,
    told: told?.content,
  }).toEqual({
    approvals: true,
    approve: 0,
    told: expect.not.stringContaining("not approved"),
  });
}, 60_000);
