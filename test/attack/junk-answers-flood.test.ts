import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { listApprovals } from "../../src/approvals/answer-approval.js";
import { approvalKey } from "../../src/approvals/approval-record.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { roleInbox } from "../../src/bus/permissions.js";
import { silentLogger } from "../../src/log.js";
import { serverTlsFiles } from "../../src/trust/server-tls.js";
import { runTroupe, TROUPE_BIN } from "../support/cli.js";
import { shellCoderDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (outside review, the approver's seed, no trusted key): junk answers aimed at a pending
 * request. The host considered each in turn, with a read of the record, a write of it and an
 * `approval.rejected` event each (40–60 a second): a burst of 10,000 held the real answer behind it
 * for half a minute, a flood until the request timed out as "nobody answered", and left the run's
 * log 10,000 events longer. A junk answer now costs the host a check; refusals are said at most
 * once a second, with how many more there were. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("a burst of junk answers neither holds back the real one nor fills the run's log", async () => {
  const prefix = "jaf";
  const { h } = await shellCoderDaemon(
    prefix,
    { command: "echo ran >> ledger.txt", answer: "ran it" },
    cleanups,
    // Long enough for a real answer behind the burst; far too short for the host to wade through it.
    "approval:\n  timeoutMs: 30000\n",
  );
  await h.start();
  const client = spawn(
    process.execPath,
    [TROUPE_BIN, ...h.cfg, "run", "--json", "--approval", "ask", "run it"],
    {
      cwd: h.dir,
      env: h.env,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  cleanups.push(() => client.kill("SIGKILL"));
  let out = "";
  client.stdout.on("data", (c) => (out += c));
  const exit = new Promise<number | null>((r) => client.once("exit", r));
  await waitFor("the question", () => out.includes('"approval.requested"'), 15_000);

  const seed = (
    await runTroupe([...h.cfg, "credentials", "approver"], { cwd: h.dir, env: h.env })
  ).stdout.trim();
  const { writeFileSync } = await import("node:fs");
  writeFileSync(join(h.dir, "approver.nk"), seed);
  const approver = await NatsBus.connect({
    url: h.env.NATS_URL,
    prefix,
    nkeySeedFile: join(h.dir, "approver.nk"),
    tls: { caFile: serverTlsFiles(join(h.dir, ".data")).ca },
    inboxPrefix: roleInbox(prefix, "approver"),
    role: "approver",
    log: silentLogger,
  });
  cleanups.push(() => approver.close());
  await waitFor("the record", async () => (await listApprovals(approver, undefined)).length > 0, 10_000);
  const [record] = await listApprovals(approver, undefined);
  if (!record) throw new Error("no record");
  const { runId, callId } = record.request;
  const subject = `$KV.${prefix}_answers.${approvalKey(record.request)}.${record.requestId}`;
  const junk = (i: number) =>
    JSON.stringify({
      content: {
        runId,
        callId,
        requestId: record.requestId,
        createdAt: record.createdAt,
        time: Date.now(),
        decision: "allow",
        name: "mallory",
        publicKey: "x",
        n: i,
      },
      signature: "AAAA",
    });
  for (let i = 0; i < 10_000; i++) approver.connection.publish(`${subject}.junk${i}`, junk(i));
  await approver.flush();

  const approve = await runTroupe([...h.cfg, "approve", callId, "--allow"], { cwd: h.dir, env: h.env });
  expect(approve.code, approve.stderr).toBe(0);
  expect(await exit).toBe(0);
  const events = out
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { type: string; data: { approved?: boolean; by?: string } });
  expect(events.find((e) => e.type === "approval.decided")?.data).toMatchObject({ approved: true });
  expect(readFileSync(join(h.dir, "ledger.txt"), "utf8")).toBe("ran\n");
  // Said, not written once per junk answer: a few refusals at most, each with its count.
  expect(events.filter((e) => e.type === "approval.rejected").length).toBeLessThan(40);
}, 120_000);
