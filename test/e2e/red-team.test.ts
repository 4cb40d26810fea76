import { existsSync } from "node:fs";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findApproval } from "../../src/approvals/answer-approval.js";
import { type ApprovalRecord, answerKey, approvalKey } from "../../src/approvals/approval-record.js";
import { freePort } from "../../src/bus/embedded-nats.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { roleInbox } from "../../src/bus/permissions.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import type { Role } from "../../src/config/roles.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { roleSeedFile } from "../../src/trust/role-credentials.js";
import { serverTlsFiles } from "../../src/trust/server-tls.js";
import { signAnswer } from "../../src/trust/signed-answer.js";
import { newIdentity } from "../support/approvers.js";
import { runTroupe, spawnTroupe, tempTree, withoutNatsUrl } from "../support/cli.js";
import { waitFor } from "../support/wait.js";

/*
 * Each step of the attack on the open bus, replayed against `troupe daemon`'s defaults: an
 * embedded nats-server with one user per role, signed approvals, the policy ceiling. A run waits
 * on an approval for `touch approved.txt` throughout; each step checks that nothing happened.
 */
let dir: string;
let url: string;
let prefix: string;
let runId: string;
let agentId: string;
const cleanups: Array<() => Promise<void> | void> = [];
let client: { exit: Promise<number | null>; stdout: () => string };
const env = () => ({ OPENAI_API_KEY: "", TROUPE_DATA_DIR: join(dir, ".data") });
const as = (role: Role) =>
  NatsBus.connect({
    url,
    prefix,
    nkeySeedFile: roleSeedFile(join(dir, ".data"), role),
    tls: { caFile: serverTlsFiles(join(dir, ".data")).ca },
    inboxPrefix: roleInbox(prefix, role),
    role,
    connectTimeoutMs: 2000,
  });
const mallory = newIdentity("mallory");

beforeAll(async () => {
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [{ name: "shell", arguments: { command: "touch approved.txt" }, id: "call_touch" }],
      },
    },
    { match: { turn: 2 }, reply: { text: "Done." } },
  ]);
  cleanups.push(() => model.close());
  url = `nats://127.0.0.1:${await freePort()}`;
  prefix = uniquePrefix();
  const tree = tempTree({
    "config/troupe.yaml": `nats:\n  url: ${url}\n  prefix: ${prefix}\ndefaultAgent: worker\ndefaultModel: scripted\nproviders:\n  openai:\n    baseURL: ${model.baseURL}\n`,
    "config/agents/worker.yaml": "name: worker\ndescription: Works.\ntools: [shell]\n",
    "config/agents/ops.yaml": "name: ops\ndescription: Operates.\ntools: [shell]\napproval: yolo\n",
  });
  dir = tree.dir;
  cleanups.push(tree.dispose);
  const daemon = troupe(["daemon"]);
  cleanups.push(async () => {
    daemon.child.kill("SIGTERM");
    await daemon.exit;
  });
  await waitFor("the daemon", () => daemon.stderr().includes("troupe daemon ready"), 20_000);
  client = troupe(["run", "--json", "--approval", "ask", "Touch it"]);
  await waitFor("the approval request", () => client.stdout().includes('"approval.requested"'), 15_000);
  const first = JSON.parse(client.stdout().split("\n")[0] as string);
  runId = first.runId;
  agentId = first.agentId;
});
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function troupe(args: string[]) {
  const running = spawnTroupe(["--config", join(dir, "config"), ...args], {
    cwd: dir,
    env: withoutNatsUrl({ ...process.env, ...env() }),
  });
  cleanups.push(() => void running.child.kill("SIGKILL"));
  return running;
}

const startRequest = (data: unknown) =>
  makeEnvelope({ runId: "new", agentId: "cli", seq: 0, type: "runs.start", data });

/** Nothing happened: the command did not run and the request still waits. */
async function nothingHappened(): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(existsSync(join(dir, "approved.txt"))).toBe(false);
  expect(existsSync(join(dir, "pwned"))).toBe(false);
  const observer = await as("observer");
  try {
    const list = makeEnvelope({ runId: "new", agentId: "cli", seq: 0, type: "runs.list", data: {} });
    const runs = (await observer.request(observer.subjects.api("runs.list"), list)).data as {
      runs: Array<{ runId: string; status: string }>;
    };
    expect(runs.runs.map((r) => [r.runId, r.status])).toEqual([[runId, "running"]]);
  } finally {
    await observer.close();
  }
}

describe("the red team's steps, replayed against the defaults", () => {
  it("1. a client with no credentials can't connect, so can't start a yolo run", async () => {
    // With the CA (the server's TLS passes) and no credentials: refused.
    const tls = { caFile: serverTlsFiles(join(dir, ".data")).ca };
    await expect(connect({ servers: url, maxReconnectAttempts: 0, tls })).rejects.toThrow(/Authorization/i);
    await expect(NatsBus.connect({ url, prefix, connectTimeoutMs: 1000, tls })).rejects.toThrow(
      /Authorization/i,
    );
    // Even the client role, which may start runs, is held to the ceiling.
    const bus = await as("client");
    const refused = await bus
      .request(bus.subjects.api("runs.start"), startRequest({ task: "id > pwned", approval: "yolo" }))
      .catch((error) => error);
    expect(refused.message).toMatch(/approval "yolo" is beyond this daemon's maxApproval "auto-edit"/);
    // Nor by naming an agent whose own YAML says yolo.
    const named = await bus
      .request(bus.subjects.api("runs.start"), startRequest({ task: "id > pwned", agent: "ops" }))
      .catch((error) => error);
    expect(named.message).toMatch(
      /agent "ops": approval "yolo" is beyond this daemon's maxApproval "auto-edit"/,
    );
    await bus.close();
    await nothingHappened();
  });

  it("2. nobody but the host can turn the pending record into an approval, or pre-approve a call", async () => {
    const bus = await as("approver");
    const approvals = await bus.kv("approvals");
    const key = approvalKey({ runId, agentId, callId: "call_touch" });
    const entry = await approvals.get<ApprovalRecord>(key);
    expect(entry?.value.status).toBe("pending");
    const forged = { ...entry?.value, status: "approved", by: "alice (troupe approve)" };
    await expect(approvals.put(key, forged, { expectedRevision: entry?.revision })).rejects.toThrow(
      /Permissions Violation/,
    );
    await expect(
      approvals.create(approvalKey({ runId, agentId, callId: "call_next" }), forged),
    ).rejects.toThrow(/Permissions Violation/);
    // The same, as an answer: unsigned, and signed by a key nobody trusts under another's name.
    const answers = await bus.kv("answers");
    const requestId = entry?.value.requestId as string;
    await answers.create(answerKey(key, requestId, "unsigned"), {
      approved: true,
      by: "alice (troupe approve)",
    });
    await answers.create(
      answerKey(key, requestId, "impostor"),
      signAnswer({ ...mallory, name: "alice" }, { runId, callId: "call_touch", requestId, approved: true }),
    );
    await waitFor(
      "both answers refused",
      async () => ((await findApproval(bus, "call_touch"))?.rejected ?? []).length >= 2,
    );
    expect((await findApproval(bus, "call_touch"))?.status).toBe("pending");
    await bus.close();
    await nothingHappened();
  });

  it("3. an observer reads the event log, but not the runs, snapshots or approvals buckets", async () => {
    const bus = await as("observer");
    for (const bucket of ["runs", "snapshots", "journal", "approvals"])
      await expect(bus.kv(bucket).then((kv) => kv.keys())).rejects.toThrow(/Permissions Violation/);
    await bus.close();
  });

  it("4. an observer's push consumer aimed at the run's control subjects changes nothing", async () => {
    const bus = await as("observer");
    const jsm = await jetstreamManager(bus.connection, { checkAPI: false });
    for (const command of ["abort", "steer"] as const)
      await jsm.consumers
        .add(bus.subjects.eventStream, {
          deliver_subject: bus.subjects.control(runId, agentId, command),
          ack_policy: "none" as never,
        })
        .catch(() => undefined);
    await bus.close();
    await nothingHappened();
    expect(client.stdout()).not.toContain('"agent.stopped"');
  });

  it("5. a worker can't start runs, answer approvals or write the run index", async () => {
    const bus = await as("worker");
    const started = await bus
      .request(bus.subjects.api("runs.start"), startRequest({ task: "id > pwned" }), { timeoutMs: 1000 })
      .catch((error) => error);
    expect(started).toBeInstanceOf(Error);
    await expect(bus.kv("runs").then((kv) => kv.put(runId, { status: "done" }))).rejects.toThrow(
      /Permissions/,
    );
    await expect((await bus.kv("answers")).create("x.y.z", {})).rejects.toThrow(/Permissions Violation/);
    await bus.close();
    await nothingHappened();
  });

  it("and a trusted approver's answer still goes through", async () => {
    const approve = await runTroupe(["--config", join(dir, "config"), "approve", "call_touch", "--allow"], {
      cwd: dir,
      env: env(),
    });
    expect(approve.code).toBe(0);
    expect(await client.exit).toBe(0);
    expect(existsSync(join(dir, "approved.txt"))).toBe(true);
  });
});
