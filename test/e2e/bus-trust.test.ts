import { chmodSync, existsSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { userInfo } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { afterEach, describe, expect, it } from "vitest";
import { findApproval } from "../../src/approvals/answer-approval.js";
import { freePort } from "../../src/bus/embedded-nats.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { roleInbox } from "../../src/bus/permissions.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { ROLES } from "../../src/config/roles.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { roleSeedFile } from "../../src/trust/role-credentials.js";
import { serverTlsFiles } from "../../src/trust/server-tls.js";
import { answerRef, newIdentity } from "../support/approvers.js";
import { onTerminal, runTroupe, spawnTroupe, tempTree, withoutNatsUrl } from "../support/cli.js";
import { waitFor } from "../support/wait.js";

/*
 * The embedded default, as a user meets it: `troupe daemon` with nothing at its NATS URL starts a
 * nats-server of its own that refuses anonymous connections, and every command of the same data
 * dir finds its credentials with no flags.
 */
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function project(model: ScriptedModelServer, extra = "") {
  const port = await freePort();
  const url = `nats://127.0.0.1:${port}`;
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `nats:\n  url: ${url}\n  prefix: ${uniquePrefix()}\ndefaultAgent: worker\ndefaultModel: scripted\n${extra}`,
    "config/agents/worker.yaml": "name: worker\ndescription: Works.\ntools: [shell]\n",
  });
  cleanups.push(dispose);
  const env = { OPENAI_BASE_URL: model.baseURL, OPENAI_API_KEY: "", TROUPE_DATA_DIR: join(dir, ".data") };
  const troupe = (args: string[]) => runTroupe(["--config", join(dir, "config"), ...args], { cwd: dir, env });
  const follow = (args: string[]) => {
    const running = spawnTroupe(["--config", join(dir, "config"), ...args], {
      cwd: dir,
      env: withoutNatsUrl({ ...process.env, ...env }),
    });
    cleanups.push(() => void running.child.kill("SIGKILL"));
    return running;
  };
  const daemon = follow(["daemon"]);
  // SIGTERM first: the daemon stops its nats-server on the way out.
  cleanups.push(async () => {
    daemon.child.kill("SIGTERM");
    await daemon.exit;
  });
  await waitFor("the daemon to be ready", () => daemon.stderr().includes("troupe daemon ready"), 20_000);
  const prefix = /prefix (\S+?)[,)]/.exec(daemon.stderr())?.[1] as string;
  const as = (role: (typeof ROLES)[number]) =>
    NatsBus.connect({
      url,
      prefix,
      nkeySeedFile: roleSeedFile(join(dir, ".data"), role),
      tls: { caFile: serverTlsFiles(join(dir, ".data")).ca },
      inboxPrefix: roleInbox(prefix, role),
      role,
    });
  return { dir, url, prefix, daemon, troupe, follow, as, data: join(dir, ".data") };
}

/** A troupe command of this project on a terminal. */
function terminal(s: { dir: string; data: string }, args: string[]) {
  const running = onTerminal(["--config", join(s.dir, "config"), ...args], {
    cwd: s.dir,
    env: withoutNatsUrl({ ...process.env, OPENAI_API_KEY: "", TROUPE_DATA_DIR: s.data }),
  });
  cleanups.push(() => void running.child.kill("SIGKILL"));
  return running;
}

const jsonLines = (text: string) =>
  text
    .split("\n")
    .filter(Boolean)
    .map(
      (line) =>
        JSON.parse(line) as { type: string; runId: string; agentId: string; data: Record<string, unknown> },
    );

describe("the embedded default", () => {
  it("refuses anonymous clients, keeps its credentials private, and lets run, observe, approve and status work with no flags", async () => {
    const model = await ScriptedModelServer.start([
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [{ name: "shell", arguments: { command: "touch deployed.txt" }, id: "call_deploy" }],
        },
      },
      { match: { turn: 2 }, reply: { text: "Deployed." } },
    ]);
    cleanups.push(() => model.close());
    const s = await project(model);
    expect(s.daemon.stderr()).toMatch(/nats-server pid \d+/);
    expect(s.daemon.stderr()).not.toContain("open to anyone");
    // With the CA (the server's TLS passes) and no credentials: refused.
    await expect(
      connect({ servers: s.url, maxReconnectAttempts: 0, tls: { caFile: serverTlsFiles(s.data).ca } }),
    ).rejects.toThrow(/Authorization/i);
    expect(statSync(join(s.data, "credentials")).mode & 0o777).toBe(0o700);
    for (const role of ROLES) expect(statSync(roleSeedFile(s.data, role)).mode & 0o777).toBe(0o600);

    const run = s.follow(["run", "--json", "--approval", "ask", "Deploy"]);
    await waitFor("the approval request", () => run.stdout().includes('"approval.requested"'), 15_000);
    const first = jsonLines(run.stdout())[0];
    const runId = first?.runId as string;
    const observe = s.follow(["observe", "--json", runId]);

    // Someone with the approver's bus credentials but a key nobody trusts: refused, nothing runs.
    const approverBus = await s.as("approver");
    cleanups.push(() => approverBus.close());
    const forged = await answerRef(
      approverBus,
      newIdentity("mallory"),
      { runId, agentId: first?.agentId as string, callId: "call_deploy" },
      {
        approved: true,
        via: "troupe approve",
      },
    );
    expect(forged).toMatchObject({
      outcome: "rejected",
      why: expect.stringMatching(/not a trusted approver/),
    });
    expect((await findApproval(approverBus, "call_deploy"))?.status).toBe("pending");
    expect(existsSync(join(s.dir, "deployed.txt"))).toBe(false);

    const status = await s.troupe(["status"]);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain("bus: credentials required");

    const approve = await s.troupe(["approve", "call_deploy", "--allow"]);
    // It shows what it signs for: the request as the daemon wrote it.
    expect(approve.stderr).toBe(
      `run ${runId}, agent ${first?.agentId}: shell (execute) wants to:\n  command (1 line): "touch deployed.txt"\n  paths: deployed.txt\n`,
    );
    expect(approve.stdout).toMatch(/^allowed shell \(call_deploy\) as \S+\n$/);
    expect(approve.code).toBe(0);
    expect(await run.exit).toBe(0);
    expect(existsSync(join(s.dir, "deployed.txt"))).toBe(true);

    expect(await observe.exit).toBe(0);
    const events = jsonLines(observe.stdout());
    const user = /as (\S+)\n/.exec(approve.stdout)?.[1];
    expect(events.filter((e) => e.type.startsWith("approval.")).map((e) => [e.type, e.data.by])).toEqual([
      ["approval.requested", undefined],
      ["approval.rejected", "mallory"],
      ["approval.decided", `${user} (troupe approve)`],
    ]);
    // The local user's key was made on first use, private, in the data dir.
    expect(statSync(join(s.data, "keys", `${user}.nk`)).mode & 0o777).toBe(0o600);
  });

  it("gives another host's observer the files to watch with, and nothing more", async () => {
    const model = await ScriptedModelServer.start([{ match: { turn: 1 }, reply: { text: "Hello." } }]);
    cleanups.push(() => model.close());
    const s = await project(model);
    const printed = await s.troupe(["credentials", "observer"]);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toBe(readFileSync(roleSeedFile(s.data, "observer"), "utf8"));
    const server = await s.troupe(["credentials", "--server-config"]);
    // Two accounts: the daemon's and the workers', and the people's.
    expect(server.stdout).toMatch(/^accounts \{\n {2}"\w+_hosts": \{\n/);
    expect(server.stdout).toMatch(/\n {2}"\w+_users": \{\n/);
    expect(server.stdout.match(/nkey: "U[A-Z2-7]{55}"/g)).toHaveLength(ROLES.length);

    const done = await s.troupe(["run", "--json", "Say hello"]);
    expect(done.code).toBe(0);
    const runId = jsonLines(done.stdout)[0]?.runId as string;

    // The other host, as docs/nats-permissions.md sets it up: the printed seed, its role, the CA the
    // server's certificate is checked against, no data dir of the daemon's.
    const ca = (await s.troupe(["credentials", "--ca"])).stdout.trim();
    const other = tempTree({
      "config/troupe.yaml": `nats:\n  url: ${s.url}\n  prefix: ${s.prefix}\n  nkeySeedFile: observer.nk\n  role: observer\n  tls:\n    caFile: nats-ca.pem\n`,
      "config/observer.nk": printed.stdout,
      "config/nats-ca.pem": readFileSync(ca, "utf8"),
    });
    cleanups.push(other.dispose);
    chmodSync(join(other.dir, "config", "observer.nk"), 0o600);
    const observe = () =>
      runTroupe(["--config", join(other.dir, "config"), "observe", "--json", runId], {
        cwd: other.dir,
        env: { TROUPE_DATA_DIR: join(other.dir, ".data") },
      });
    // Without its role, `troupe observe` takes itself for an approver, whose replies these may not read.
    const yaml = join(other.dir, "config", "troupe.yaml");
    const withRole = readFileSync(yaml, "utf8");
    writeFileSync(yaml, withRole.replace("  role: observer\n", ""));
    const roleless = await observe();
    expect(roleless.stderr).toMatch(
      /^troupe: these credentials may not receive replies at \S+: set nats\.role in troupe\.yaml to the role they are of .*\n$/,
    );
    expect(roleless.code).toBe(1);
    writeFileSync(yaml, withRole);
    const watched = await observe();
    expect(watched.stderr).toBe("");
    expect(watched.code).toBe(0);
    expect(jsonLines(watched.stdout).map((e) => e.type)).toContain("agent.stopped");
    const observer = await s.as("observer");
    cleanups.push(() => observer.close());
    const seen: string[] = [];
    for await (const { envelope } of observer.eventLog.read({ runId })) seen.push(envelope.type);
    expect(seen).toContain("agent.stopped");
    const start = await observer
      .request(
        observer.subjects.api("runs.start"),
        makeEnvelope({
          runId: "new",
          agentId: "cli",
          seq: 0,
          type: "runs.start",
          data: { task: "id > pwned" },
        }),
        { timeoutMs: 1000 },
      )
      .catch((error) => error);
    expect(start).toBeInstanceOf(Error);
    await expect(observer.kv("approvals")).rejects.toThrow(/Permissions Violation/);
    const list = await s.troupe(["status", "--json"]);
    expect(JSON.parse(list.stdout).runs).toHaveLength(1);
  });

  it("acts on an approver troupe.yaml lists, from a key made on another machine, and refuses one it does not", async () => {
    const elsewhere = tempTree({});
    cleanups.push(elsewhere.dispose);
    const made = await runTroupe(["keys", "create", "ana"], {
      cwd: elsewhere.dir,
      env: { TROUPE_DATA_DIR: join(elsewhere.dir, "ana-data") },
    });
    expect(made.code).toBe(0);
    const publicKey = made.stdout.trim();
    expect(publicKey).toMatch(/^U[A-Z2-7]{55}$/);
    expect(made.stderr).toContain(`approvers:\n    ana: ${publicKey}`);
    const anaKey = join(elsewhere.dir, "ana-data", "keys", "ana.nk");
    const strangerKey = join(elsewhere.dir, "stranger.nk");
    await runTroupe(["keys", "create", "stranger"], {
      cwd: elsewhere.dir,
      env: { TROUPE_DATA_DIR: join(elsewhere.dir, "stranger-data") },
    });
    renameSync(join(elsewhere.dir, "stranger-data", "keys", "stranger.nk"), strangerKey);

    const model = await ScriptedModelServer.start([
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ name: "shell", arguments: { command: "touch ok.txt" }, id: "call_ok" }] },
      },
      { match: { turn: 2 }, reply: { text: "Done." } },
    ]);
    cleanups.push(() => model.close());
    const s = await project(model, `approvers:\n  ana: ${publicKey}\n`);
    const run = s.follow(["run", "--json", "--approval", "ask", "Touch it"]);
    await waitFor("the approval request", () => run.stdout().includes('"approval.requested"'), 15_000);
    const approveAs = (file: string) =>
      runTroupe(["--config", join(s.dir, "config"), "approve", "call_ok", "--allow"], {
        cwd: s.dir,
        env: { OPENAI_API_KEY: "", TROUPE_DATA_DIR: s.data, TROUPE_APPROVER_KEY: file },
      });
    const refused = await approveAs(strangerKey);
    expect(refused.stderr).toMatch(
      /\ntroupe: the run's host refused this answer: signed by a key that is not a trusted approver's/,
    );
    expect(refused.code).toBe(1);
    expect(existsSync(join(s.dir, "ok.txt"))).toBe(false);
    const allowed = await approveAs(anaKey);
    expect(allowed.stdout).toBe("allowed shell (call_ok) as ana\n");
    expect(await run.exit).toBe(0);
    expect(existsSync(join(s.dir, "ok.txt"))).toBe(true);
    const decided = jsonLines(run.stdout()).find((e) => e.type === "approval.decided");
    expect(decided?.data).toMatchObject({ approved: true, by: "ana (troupe approve)" });
  });

  it("takes answers from the observer's a key and the troupe run prompt, each signed as this user", async () => {
    const model = await ScriptedModelServer.start([
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ name: "shell", arguments: { command: "touch one.txt" }, id: "call_one" }] },
      },
      {
        match: { turn: 2 },
        reply: { toolCalls: [{ name: "shell", arguments: { command: "touch two.txt" }, id: "call_two" }] },
      },
      { match: { turn: 3 }, reply: { text: "Done." } },
    ]);
    cleanups.push(() => model.close());
    const s = await project(model);
    const onTerminal = (args: string[]) => terminal(s, args);
    const run = onTerminal(["run", "--approval", "ask", "Touch both"]);
    await waitFor("the first question", () => run.output().includes("allow shell ("), 15_000);
    // The run's own prompt answers the first request…
    run.child.stdin.write("y\n");
    await waitFor("the first file", () => existsSync(join(s.dir, "one.txt")), 10_000);
    await waitFor("the second question", () => run.output().split("allow shell (").length > 2, 10_000);
    // …and an observer on another terminal the second.
    const listed = JSON.parse((await s.troupe(["status", "--json"])).stdout) as {
      runs: Array<{ runId: string }>;
    };
    const runId = listed.runs[0]?.runId as string;
    const observe = onTerminal(["observe", runId]);
    await waitFor("the observer's approval panel", () => observe.output().includes("wants shell"), 10_000);
    observe.child.stdin.write("a");
    await waitFor("the second file", () => existsSync(join(s.dir, "two.txt")), 10_000);
    await waitFor("the run to finish", async () =>
      (await s.troupe(["status", "--json"])).stdout.includes('"done"'),
    );
    run.child.kill("SIGKILL");
    observe.child.kill("SIGKILL");

    const events = jsonLines((await s.troupe(["replay", "--json", runId])).stdout);
    const user = userInfo().username;
    expect(events.filter((e) => e.type === "approval.decided").map((e) => e.data.by)).toEqual([
      `${user} (troupe run)`,
      `${user} (troupe observe)`,
    ]);
  });

  it("asks about the request its host wrote, not an event's copy: fake approval.requested events ask nothing", async () => {
    const model = await ScriptedModelServer.start([
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ name: "shell", arguments: { command: "touch one.txt" }, id: "call_one" }] },
      },
      { match: { turn: 2 }, reply: { text: "Done." } },
    ]);
    cleanups.push(() => model.close());
    const s = await project(model);
    const run = terminal(s, ["run", "--approval", "ask", "Touch it"]);
    await waitFor("the question", () => run.output().includes("allow shell ("), 15_000);
    const listed = JSON.parse((await s.troupe(["status", "--json"])).stdout) as {
      runs: Array<{ runId: string; agentId: string }>;
    };
    const { runId, agentId } = listed.runs[0] as { runId: string; agentId: string };
    // A worker's seed may put events on the run's subjects (hosts do): a request with no record
    // behind it, and the real call again with a harmless-looking command.
    const worker = await s.as("worker");
    cleanups.push(() => worker.close());
    const fake = (callId: string, seq: number) =>
      makeEnvelope({
        runId,
        agentId,
        seq,
        type: "approval.requested",
        data: {
          callId,
          name: "shell",
          arguments: "{}",
          effect: "execute",
          detail: "echo harmless",
          paths: [],
        },
      });
    await worker.eventLog.append(fake("call_fake", 900));
    await worker.eventLog.append(fake("call_one", 901));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    run.child.stdin.write("y\n");
    await waitFor("the file", () => existsSync(join(s.dir, "one.txt")), 10_000);
    await waitFor("the run to finish", async () =>
      (await s.troupe(["status", "--json"])).stdout.includes('"done"'),
    );
    const asked = run.output().split("allow shell (").length - 1;
    expect(asked).toBe(1);
    expect(run.output()).toContain('command (1 line): "touch one.txt"');
    expect(run.output()).not.toContain("echo harmless");
  });

  it("troupe approve asks which run when a call id waits in two, and answers the one named", async () => {
    const model = await ScriptedModelServer.start([
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ name: "shell", arguments: { command: "touch same.txt" }, id: "call_same" }] },
        times: 2,
      },
      { match: { turn: 2 }, reply: { text: "Done." }, times: 2 },
    ]);
    cleanups.push(() => model.close());
    const s = await project(model);
    const runs = [
      s.follow(["run", "--json", "--approval", "ask", "One"]),
      s.follow(["run", "--json", "--approval", "ask", "Two"]),
    ];
    for (const run of runs)
      await waitFor("the approval request", () => run.stdout().includes('"approval.requested"'), 15_000);
    const [one, two] = runs.map((run) => jsonLines(run.stdout())[0]?.runId as string);
    const ambiguous = await s.troupe(["approve", "call_same", "--deny"]);
    expect(ambiguous.code).toBe(2);
    expect(ambiguous.stderr).toMatch(
      /^troupe: call call_same waits in 2 runs \(.*\): say which with --run RUN_ID\n$/,
    );
    expect(ambiguous.stderr).toContain(one);
    expect(ambiguous.stderr).toContain(two);
    const named = await s.troupe(["approve", "call_same", "--deny", "--run", two as string]);
    expect(named.code).toBe(0);
    expect(named.stderr).toMatch(
      new RegExp(
        `^run ${two}, agent \\S+: shell \\(execute\\) wants to:\n  command \\(1 line\\): "touch same.txt"\n`,
      ),
    );
    expect(await runs[1]?.exit).toBe(0);
    // The other run still waits, and is the only one left to answer.
    const rest = await s.troupe(["approve", "call_same", "--deny"]);
    expect(rest.code).toBe(0);
    expect(rest.stderr).toContain(`run ${one}, agent`);
    expect(await runs[0]?.exit).toBe(0);
  });

  it("refuses a run asking for more than daemon.maxApproval, and takes it when troupe.yaml raises the ceiling", async () => {
    const model = await ScriptedModelServer.start([
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ name: "shell", arguments: { command: "touch yolo.txt" } }] },
      },
      { match: { turn: 2 }, reply: { text: "Done." } },
    ]);
    cleanups.push(() => model.close());
    const strict = await project(model);
    for (const flags of [
      ["--approval", "yolo"],
      ["--sandbox", "off"],
    ]) {
      const refused = await strict.troupe(["run", ...flags, "Touch it"]);
      expect(refused.stderr).toMatch(
        /is beyond (this daemon's maxApproval "auto-edit"|what maxApproval "auto-edit" allows).*raise daemon\.maxApproval in troupe\.yaml/,
      );
      expect(refused.stderr.trim().split("\n")).toHaveLength(1);
      expect(refused.code).not.toBe(0);
    }
    expect(existsSync(join(strict.dir, "yolo.txt"))).toBe(false);
    expect(JSON.parse((await strict.troupe(["status", "--json"])).stdout).runs).toEqual([]);

    const loose = await project(model, "daemon:\n  maxApproval: yolo\n");
    const taken = await loose.troupe(["run", "--approval", "yolo", "Touch it"]);
    expect(taken.code).toBe(0);
    expect(existsSync(join(loose.dir, "yolo.txt"))).toBe(true);
  });
});
