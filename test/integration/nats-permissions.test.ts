import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { makeEnvelope } from "../../src/bus/envelope.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { BusUnavailableError } from "../../src/bus/nats-connect.js";
import { authorizationBlock } from "../../src/bus/permissions.js";
import { silentLogger } from "../../src/log.js";
import { answerApproval, BusApprover } from "../../src/safety/bus-approver.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { testConfig } from "../support/config.js";
import { collect, waitFor } from "../support/wait.js";

const prefix = "troupe";
let dir: string;
let server: NatsServerProcess;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "troupe-perms-"));
  const users = [
    { user: "daemon", password: "daemon-pw", role: "daemon" as const },
    { user: "observer", password: "observer-pw", role: "observer" as const },
    { user: "approver", password: "approver-pw", role: "approver" as const },
  ];
  writeFileSync(join(dir, "auth.conf"), authorizationBlock(users, prefix));
  server = await NatsServerProcess.start({
    storeDir: join(dir, "store"),
    args: ["-c", join(dir, "auth.conf")],
  });
});
afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const as = (user: string) =>
  NatsBus.connect({ url: server.url, prefix, user, password: `${user}-pw`, log: silentLogger });
const event = (seq: number) => makeEnvelope({ runId: "r1", agentId: "a1", seq, type: "tick", data: { seq } });

describe("NATS roles", () => {
  it("let an observer watch the event log, and refuse its publishes to control, approval and runs.start subjects", async () => {
    const daemon = await as("daemon");
    await daemon.log.append(event(0));
    await daemon.log.append(event(1));
    const heard: string[] = [];
    for (const pattern of [`${prefix}.ctl.>`, `${prefix}.approval.>`, `${prefix}.api.>`])
      daemon.subscribe(pattern, (_e, subject) => void heard.push(subject));
    daemon.reply(daemon.subjects.api("runs.start"), (request) => request);
    await daemon.flush();

    const observer = await as("observer");
    const seen = await collect(observer.log.read({ runId: "r1" }));
    expect(seen.map((e) => e.envelope.seq)).toEqual([0, 1]);

    const errors: string[] = [];
    void (async () => {
      for await (const status of observer.connection.status())
        if (status.type === "error") errors.push(String(status.error));
    })();
    observer.publish(observer.subjects.control("r1", "a1", "abort"), event(2));
    observer.publish(observer.subjects.approval("r1", "c1"), event(3));
    const started = await observer
      .request(observer.subjects.api("runs.start"), event(4), { timeoutMs: 500 })
      .catch((error) => error);
    await observer.flush();
    expect(started).toBeInstanceOf(Error);
    await waitFor("the permission violations", () => errors.length >= 3);
    expect(errors.every((e) => /Permissions Violation for Publish/.test(e))).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(heard).toEqual([]);
    await observer.close();
    await daemon.close();
  });

  it("refuse an observer's append to the event log at once, not after the append timeout", async () => {
    const observer = await as("observer");
    await expect(observer.log.append(event(0))).rejects.toThrow(
      /not allowed to append tick.*Permissions Violation/,
    );
    await observer.close();
  });

  it("let an approver answer approvals, and refuse the same to an observer", async () => {
    const daemon = await as("daemon");
    const pending = new BusApprover(daemon, 10_000, silentLogger).decide(
      {
        runId: "r2",
        agentId: "a",
        callId: "c9",
        tool: "shell",
        arguments: "{}",
        effect: "execute",
        detail: "make",
        paths: [],
      },
      new AbortController().signal,
    );
    await waitFor(
      "the pending record",
      async () => (await (await daemon.kv("approvals")).get("r2.c9")) !== null,
    );

    const observer = await as("observer");
    await expect(answerApproval(observer, "r2", "c9", { approved: true, by: "observer" })).rejects.toThrow();
    await observer.close();

    const approver = await as("approver");
    expect((await answerApproval(approver, "r2", "c9", { approved: true, by: "approver" })).outcome).toBe(
      "decided",
    );
    expect(await pending).toEqual({ approved: true, by: "approver" });
    await approver.close();
    await daemon.close();
  });

  it("are enough for a runtime connected as the daemon: a run with a subagent completes", async () => {
    const model = await ScriptedModelServer.start([
      {
        match: { system: '"lead"', turn: 1 },
        reply: { toolCalls: [{ name: "subagent_helper", arguments: { task: "help" } }] },
      },
      { match: { system: '"helper"' }, reply: { text: "helped" } },
      { match: { system: '"lead"', turn: 2 }, reply: { text: "done with help" } },
    ]);
    const bus = await as("daemon");
    const config = testConfig(
      {
        defaultModel: "scripted",
        providers: { openai: { baseURL: model.baseURL, models: { scripted: {} } } },
      },
      [
        { name: "lead", description: "Leads.", subagents: ["helper"] },
        { name: "helper", description: "Helps.", readOnly: true },
      ],
    );
    const runtime = await new Runtime({ config, bus, workspace: dir, env: {} }).open();
    const output = await runtime.start({ task: "go", agent: "lead" }).done;
    expect(output).toMatchObject({ reason: "done", result: "done with help" });
    await runtime.close();
    await bus.close();
    await model.close();
  });

  it("refuse an anonymous connection", async () => {
    const failure = await NatsBus.connect({ url: server.url, prefix, connectTimeoutMs: 2000 }).catch(
      (error) => error,
    );
    expect(failure).toBeInstanceOf(BusUnavailableError);
    expect(failure.message).toMatch(/Authorization|authoriz/i);
    // And the plain client agrees.
    await expect(connect({ servers: server.url, maxReconnectAttempts: 0 })).rejects.toThrow(/Authorization/i);
  });
});
