import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { describe, expect, inject, it } from "vitest";
import { BusApprover } from "../../src/approvals/bus-approver.js";
import { RemoteError } from "../../src/bus/bus.js";
import { answersNats, freePort } from "../../src/bus/embedded-nats.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { KV_BUCKETS } from "../../src/bus/permissions.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { silentLogger } from "../../src/log.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { ApproverTrust } from "../../src/trust/approvers.js";
import { removePrefix } from "../support/buses.js";
import { runTroupe, tempTree } from "../support/cli.js";
import { daemonProcesses, exited } from "../support/daemon-process.js";
import { waitFor } from "../support/wait.js";

const { cleanups, startDaemon, follow } = daemonProcesses();

/** A plain connection to the shared server, closed after the test. */
async function connectRaw(url: string) {
  const nc = await connect({ servers: url });
  cleanups.push(() => nc.close());
  return nc;
}

describe("troupe daemon", () => {
  it("runs tasks for troupe run, serves the API, refuses malformed requests unharmed, and stops cleanly on SIGTERM", async () => {
    const url = inject("natsUrl");
    const prefix = uniquePrefix();
    cleanups.push(() => removePrefix(url, prefix));
    const model = await ScriptedModelServer.start([
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] } },
      { match: { turn: 2 }, reply: { text: "The notes say: daemon notes." } },
    ]);
    cleanups.push(() => model.close());
    const env = { NATS_URL: url, OPENAI_BASE_URL: model.baseURL, OPENAI_API_KEY: "" };
    const { dir, daemon, stderr } = await startDaemon(env, prefix);
    await waitFor("the open-bus warning", () => stderr().includes("warning: bus: open to anyone"), 5000);
    expect(stderr()).toContain(`troupe: warning: bus: open to anyone who reaches ${url}`);

    const run = await runTroupe(
      ["--config", join(dir, "config"), "run", "--json", "What do the notes say?"],
      { cwd: dir, env },
    );
    expect(run.code).toBe(0);
    const events = run.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(events.at(-1)).toMatchObject({
      type: "agent.stopped",
      data: { reason: "done", result: "The notes say: daemon notes." },
    });
    expect(events.map((e: { seq: number }) => e.seq)).toEqual(events.map((_: unknown, i: number) => i));

    const bus = await NatsBus.connect({ url, prefix });
    cleanups.push(() => bus.close());
    const ask = (verb: string, data: unknown) =>
      bus.request(
        bus.subjects.api(verb),
        makeEnvelope({ runId: "x", agentId: "test", seq: 0, type: verb, data }),
        { timeoutMs: 5000 },
      );
    const runId = events[0].runId as string;
    expect((await ask("runs.list", {})).data).toMatchObject({
      runs: [{ runId, status: "done", agent: "worker" }],
    });
    expect((await ask("runs.get", { runId })).data).toMatchObject({
      status: "done",
      result: "The notes say: daemon notes.",
    });
    // troupe runs shows a daemon run's task and what it spent, as it does a local run's.
    const listed = await runTroupe(["--config", join(dir, "config"), "runs"], { cwd: dir, env });
    const row = listed.stdout.split("\n").find((line) => line.startsWith(runId)) ?? "";
    expect(row).toMatch(/ daemon +worker +done +\d+ tokens \$\d+\.\d{4} +\d+m +What do the notes say\?$/);
    expect(row).not.toMatch(/ 0 tokens/);
    expect((await ask("agents.list", {})).data).toMatchObject({
      agents: [{ name: "worker", tools: ["read_file"] }],
    });
    // A finished run has no host for commands: the daemon says so at once.
    const late = await ask("runs.abort", { runId }).catch((error) => error);
    expect(late).toBeInstanceOf(RemoteError);
    expect(late.message).toContain(`run ${runId} is done; it takes no commands`);
    const malformed = await ask("runs.start", { task: 42 }).catch((error) => error);
    expect(malformed).toBeInstanceOf(RemoteError);
    expect(malformed.message).toContain("invalid runs.start request: task:");
    // troupe run chose the run's id itself (to follow it from before it started); only fresh ids of that form are taken.
    expect(runId).toMatch(/^run-[0-9a-z]{26}$/);
    const badId = await ask("runs.start", { task: "t", runId: "run-1.>" }).catch((error) => error);
    expect(badId.message).toContain(
      "invalid runs.start request: runId: a run id is run- and a lower-case ULID",
    );
    // A request is of its subject's verb: a stored message a consumer delivers onto an API subject (an
    // event, a record) is no request, whatever its data would pass for.
    const other = await bus
      .request(
        bus.subjects.api("runs.abort"),
        makeEnvelope({ runId, agentId: "x", seq: 0, type: "runs.get", data: { runId } }),
      )
      .catch((error) => error);
    expect(other.message).toContain('a runs.abort request has type "runs.abort", not "runs.get"');
    await bus.connection.publish(bus.subjects.api("runs.list"), new TextEncoder().encode("not an envelope"));
    expect((await ask("runs.list", {})).data).toMatchObject({ runs: [{ runId }] });
    const chosen = `run-${"0".repeat(10)}${"a".repeat(16)}`;
    // Five at once with one id: one run starts, the others are told it exists (none orphaned).
    const racing = await Promise.all(
      Array.from({ length: 5 }, () =>
        ask("runs.start", { task: "t", runId: chosen }).catch((error) => error),
      ),
    );
    expect(racing.filter((reply) => !(reply instanceof Error))).toHaveLength(1);
    expect(racing.filter((reply) => reply instanceof Error).map((e) => e.message)).toEqual(
      Array(4).fill(expect.stringContaining(`run ${chosen} exists`)),
    );
    // One that asks anything else under that id is refused, never told to follow that run.
    for (const asked of [{ task: "u" }, { task: "t", approval: "ask" }]) {
      const differing = await ask("runs.start", { ...asked, runId: chosen }).catch((error) => error);
      expect(differing.message).toContain(`run ${chosen} was started with another task or options`);
    }
    // A typo in troupe steer is the steerer's to hear, in one line; the daemon's terminal stays quiet.
    const before = stderr();
    const typo = await runTroupe(["--config", join(dir, "config"), "steer", "run-typo", "go on"], {
      cwd: dir,
      env,
    });
    expect(typo.stderr.trim().split("\n")).toHaveLength(1);
    expect(typo.stderr).toContain("no run run-typo");
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(stderr().slice(before.length)).toBe("");

    daemon.kill("SIGTERM");
    expect(await exited(daemon)).toBe(0);
  });

  it("takes approvals from any terminal: troupe approve answers, the first answer wins, a late one is told so", async () => {
    const url = inject("natsUrl");
    const prefix = uniquePrefix();
    cleanups.push(() => removePrefix(url, prefix));
    const model = await ScriptedModelServer.start([
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ name: "shell", arguments: { command: "make deploy" }, id: "call_deploy" }] },
      },
      { match: { turn: 2 }, reply: { text: "Not deployed: denied." } },
    ]);
    cleanups.push(() => model.close());
    const env = { NATS_URL: url, OPENAI_BASE_URL: model.baseURL, OPENAI_API_KEY: "" };
    const { dir } = await startDaemon(env, prefix, "tools: [shell]");
    const client = follow(
      ["--config", join(dir, "config"), "run", "--json", "--approval", "ask", "Deploy"],
      dir,
      env,
    );
    await waitFor("the approval request", () => client.stdout().includes('"approval.requested"'), 15_000);
    const requested = client
      .stdout()
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line))
      .find((e) => e.type === "approval.requested");
    expect(requested.data).toMatchObject({ callId: "call_deploy", name: "shell", detail: "make deploy" });

    const deny = await runTroupe(
      ["--config", join(dir, "config"), "approve", "call_deploy", "--deny", "--reason", "not on a Friday"],
      { cwd: dir, env },
    );
    expect(deny.stdout).toMatch(/^denied shell \(call_deploy\) as \S+\n$/);
    expect(deny.stderr).toContain('shell (execute) wants to:\n  command (1 line): "make deploy"\n');
    expect(deny.code).toBe(0);
    const late = await runTroupe(["--config", join(dir, "config"), "approve", "call_deploy", "--allow"], {
      cwd: dir,
      env,
    });
    expect(late.stderr).toMatch(
      /^troupe: too late: call_deploy was already denied by .* \(not on a Friday\)\n$/,
    );
    expect(late.code).toBe(1);

    expect(await client.exit).toBe(0);
    const toolResult = model.requests[1]?.body.messages.find((m) => m.role === "tool")?.content;
    expect(toolResult).toContain("the user denied shell: not on a Friday");
  });

  it("is watched by several observers at once, replayed from the start, inspected, listed, steered and aborted from other terminals", async () => {
    const url = inject("natsUrl");
    const prefix = uniquePrefix();
    cleanups.push(() => removePrefix(url, prefix));
    const model = await ScriptedModelServer.start([
      { match: { lastUser: "quick" }, reply: { text: "Quick answer." } },
      { match: { lastUser: "slow" }, reply: { text: "slow ".repeat(100), chunks: 100, chunkDelayMs: 50 } },
      {
        match: { lastUser: "Continue the task where you left off." },
        reply: { text: "Resumed on the daemon." },
      },
      { match: { lastUser: "steered" }, reply: { text: "And the steering, kept through the abort." } },
    ]);
    cleanups.push(() => model.close());
    const env = { NATS_URL: url, OPENAI_BASE_URL: model.baseURL, OPENAI_API_KEY: "" };
    const { dir } = await startDaemon(env, prefix);
    const config = ["--config", join(dir, "config")];
    const observe = () => follow([...config, "observe", "--json"], dir, env).stdout;
    const [first, second] = [observe(), observe()];
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const run = await runTroupe([...config, "run", "--json", "quick"], { cwd: dir, env });
    expect(run.code).toBe(0);
    const expected = run.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line).id);
    for (const watcher of [first, second]) {
      await waitFor(
        "the observer to see the run",
        () => expected.every((id) => watcher().includes(id)),
        5000,
      );
    }
    const runId = JSON.parse(run.stdout.split("\n")[0] ?? "{}").runId as string;

    const replay = await runTroupe([...config, "observe", runId, "--from-start", "--json"], {
      cwd: dir,
      env,
    });
    expect(replay.code).toBe(0);
    expect(
      replay.stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line).id),
    ).toEqual(expected);

    const inspect = await runTroupe([...config, "inspect", runId], { cwd: dir, env });
    expect(inspect.stdout).toContain("stateDiagram-v2");
    expect(inspect.stdout).toContain("class stopped current");
    expect(inspect.stdout).toMatch(/idle → callingModel\n.*callingModel → stopped/);

    const status = await runTroupe([...config, "status", "--json"], { cwd: dir, env });
    expect(JSON.parse(status.stdout).runs).toEqual([expect.objectContaining({ runId, status: "done" })]);
    // The shared test server takes anyone: the daemon warned at start, and status says so too.
    expect(JSON.parse(status.stdout).bus).toEqual({ open: true });
    const plain = await runTroupe([...config, "status"], { cwd: dir, env });
    expect(plain.stdout).toContain(`bus: open to anyone who reaches ${env.NATS_URL}`);

    // A slow run, aborted from another terminal: its client ends with 130.
    const slow = follow([...config, "run", "--json", "slow"], dir, env);
    await waitFor("the slow run to stream", () => slow.stdout().includes('"model.delta"'), 10_000);
    const slowRun = JSON.parse(slow.stdout().split("\n")[0] ?? "{}").runId as string;
    const steer = await runTroupe([...config, "steer", slowRun, "steered"], { cwd: dir, env });
    expect(steer.stdout).toBe(`steering sent to ${slowRun}\n`);
    const abort = await runTroupe([...config, "abort", slowRun], { cwd: dir, env });
    expect(abort.stdout).toBe(`abort sent to ${slowRun}\n`);
    expect(await slow.exit).toBe(130);
    const stopped = slow
      .stdout()
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line))
      .at(-1);
    expect(stopped).toMatchObject({ type: "agent.stopped", data: { reason: "aborted" } });

    // troupe runs lists the daemon's runs too; troupe resume asks the daemon to go on with the aborted one.
    const runs = JSON.parse(
      (await runTroupe([...config, "runs", "--json"], { cwd: dir, env })).stdout,
    ) as Array<{ runId: string; where: string; state: string }>;
    expect(runs.find((r) => r.runId === slowRun)).toMatchObject({ where: "daemon", state: "aborted" });
    const resumed = await runTroupe([...config, "resume", slowRun, "--json"], { cwd: dir, env });
    expect(resumed.code).toBe(0);
    const resumedLast = resumed.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line))
      .at(-1);
    // The steering sent before the abort was kept in the snapshot and delivered after the resume.
    expect(resumedLast).toMatchObject({
      type: "agent.stopped",
      data: { reason: "done", result: "And the steering, kept through the abort." },
    });
  });

  it("troupe run asks on the first Ctrl-C and aborts the run on the second", async () => {
    const url = inject("natsUrl");
    const prefix = uniquePrefix();
    cleanups.push(() => removePrefix(url, prefix));
    const model = await ScriptedModelServer.start([
      { reply: { text: "slow ".repeat(200), chunks: 200, chunkDelayMs: 50 } },
    ]);
    cleanups.push(() => model.close());
    const env = { NATS_URL: url, OPENAI_BASE_URL: model.baseURL, OPENAI_API_KEY: "" };
    const { dir } = await startDaemon(env, prefix);
    const client = follow(["--config", join(dir, "config"), "run", "--json", "talk"], dir, env);
    await waitFor("streaming", () => client.stdout().includes('"model.delta"'), 10_000);
    client.child.kill("SIGINT");
    await waitFor("the question", () => client.stderr().includes("press Ctrl-C again to abort the run"));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(client.child.exitCode).toBeNull();
    client.child.kill("SIGINT");
    expect(await client.exit).toBe(130);
    const last = client
      .stdout()
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line))
      .at(-1);
    expect(last).toMatchObject({ type: "agent.stopped", data: { reason: "aborted" } });
  });

  it("troupe run says in one line how to go on when no daemon answers, with exit 4", async () => {
    const url = inject("natsUrl");
    const prefix = uniquePrefix();
    const { dir, dispose } = tempTree({
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\n`,
      "config/agents/a.yaml": "name: a\ndescription: A.\n",
    });
    cleanups.push(dispose, () => removePrefix(url, prefix));
    const result = await runTroupe(["--config", join(dir, "config"), "run", "--wait-daemon", "0", "hello"], {
      cwd: dir,
      env: { NATS_URL: url },
    });
    expect(result.stderr).toMatch(
      /^troupe: no daemon answers on nats:\/\/.* \(prefix t[0-9a-z]+\): start one with "troupe daemon", or run with --local\n$/,
    );
    // Not a usage error: the daemon was not there (exit 4, what a wrapper may retry).
    expect(result.code).toBe(4);
  });

  it("--nats URL is a global option, and a NATS that is not there says what to do, in one line", async () => {
    const url = inject("natsUrl");
    const prefix = uniquePrefix();
    const { dir, dispose } = tempTree({
      "config/troupe.yaml": `nats:\n  url: nats://127.0.0.1:1\n  prefix: ${prefix}\n`,
      "config/agents/a.yaml": "name: a\ndescription: A.\n",
    });
    cleanups.push(dispose, () => removePrefix(url, prefix));
    const config = ["--config", join(dir, "config")];
    const down = await runTroupe([...config, "status"], { cwd: dir });
    expect(down.stderr).toBe(
      "troupe: cannot connect to NATS at nats://127.0.0.1:1: connection refused: start one with troupe daemon (it starts NATS here), or point --nats (or NATS_URL) at yours\n",
    );
    // No NATS and no daemon alike: exit 4, nothing done, worth trying again (docs/daemon.md).
    expect(down.code).toBe(4);
    // The same config with --nats reaches the server named, where no daemon answers.
    const chosen = await runTroupe(["--nats", url, ...config, "status"], { cwd: dir });
    expect(chosen.stderr).toMatch(/^troupe: no daemon answers on nats:\/\/\S+ \(prefix t[0-9a-z]+\)/);
    expect(chosen.code).toBe(4);
  });

  it("--id runs once per key: a second submission, while the first runs and after it finished, follows the same run", async () => {
    const url = inject("natsUrl");
    const prefix = uniquePrefix();
    cleanups.push(() => removePrefix(url, prefix));
    const model = await ScriptedModelServer.start([
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [{ name: "shell", arguments: { command: "echo once >> ledger.txt" }, id: "call_l" }],
        },
      },
      { match: { turn: 2 }, reply: { text: "Written once." } },
    ]);
    cleanups.push(() => model.close());
    const env = { NATS_URL: url, OPENAI_BASE_URL: model.baseURL, OPENAI_API_KEY: "" };
    const { dir } = await startDaemon(env, prefix, "tools: [shell]");
    const run = () =>
      follow(
        [
          "--config",
          join(dir, "config"),
          "run",
          "--json",
          "--approval",
          "ask",
          "--id",
          "nightly-42",
          "Write",
        ],
        dir,
        env,
      );
    const first = run();
    await waitFor("the approval request", () => first.stdout().includes('"approval.requested"'), 15_000);
    const second = run();
    await waitFor("the second following", () => second.stdout().includes('"approval.requested"'), 15_000);
    const approve = await runTroupe(["--config", join(dir, "config"), "approve", "--allow"], {
      cwd: dir,
      env,
    });
    expect(approve.code).toBe(0);
    expect(await first.exit).toBe(0);
    expect(await second.exit).toBe(0);
    const third = run();
    expect(await third.exit).toBe(0);
    const last = (client: { stdout: () => string }) =>
      JSON.parse(client.stdout().trim().split("\n").at(-1) as string);
    for (const client of [first, second, third])
      expect(last(client)).toMatchObject({
        type: "agent.stopped",
        data: { reason: "done", result: "Written once." },
      });
    expect(new Set([first, second, third].map((c) => last(c).runId)).size).toBe(1);
    expect(readFileSync(join(dir, "ledger.txt"), "utf8")).toBe("once\n");
    expect(model.requests).toHaveLength(2);
  });

  it("-w DIR travels with the run: the file lands in that workspace; one outside the daemon's workspaces is refused", async () => {
    const url = inject("natsUrl");
    const prefix = uniquePrefix();
    cleanups.push(() => removePrefix(url, prefix));
    const model = await ScriptedModelServer.start([
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ name: "write_file", arguments: { path: "made.txt", content: "here\n" } }] },
        times: 2,
      },
      { match: { turn: 2 }, reply: { text: "Made." }, times: 2 },
    ]);
    cleanups.push(() => model.close());
    const env = { NATS_URL: url, OPENAI_BASE_URL: model.baseURL, OPENAI_API_KEY: "" };
    const { dir } = await startDaemon(env, prefix, "tools: [write_file]");
    mkdirSync(join(dir, "project"));
    const inside = await runTroupe(
      ["--config", join(dir, "config"), "run", "--approval", "auto-edit", "-w", "project", "Make it"],
      { cwd: dir, env },
    );
    expect(inside.code).toBe(0);
    expect(readFileSync(join(dir, "project", "made.txt"), "utf8")).toBe("here\n");
    expect(existsSync(join(dir, "made.txt"))).toBe(false);
    const elsewhere = tempTree({ "x.txt": "" });
    cleanups.push(elsewhere.dispose);
    const outside = await runTroupe(
      ["--config", join(dir, "config"), "run", "--approval", "auto-edit", "-w", elsewhere.dir, "Make it"],
      { cwd: dir, env },
    );
    expect(outside.code).toBe(2);
    expect(outside.stderr).toMatch(
      /^troupe: workspace \S+ is outside the daemon's workspaces \(\S+\): add it to daemon.workspaces in its troupe.yaml\n$/,
    );
    expect(existsSync(join(elsewhere.dir, "made.txt"))).toBe(false);
  });

  it("starts a nats-server of its own when nothing answers, with its store in the data dir, and stops it on exit", async () => {
    const port = await freePort();
    const prefix = uniquePrefix();
    const { daemon, stderr } = await startDaemon(
      { NATS_URL: `nats://127.0.0.1:${port}`, OPENAI_BASE_URL: "http://127.0.0.1:1/v1" },
      prefix,
    );
    expect(stderr()).toMatch(/nats-server pid \d+/);
    expect(await answersNats("127.0.0.1", port)).toBe(true);
    daemon.kill("SIGTERM");
    expect(await exited(daemon)).toBe(0);
    await waitFor("the embedded server to stop", async () => !(await answersNats("127.0.0.1", port)), 5000);
  });

  it("makes every bucket at start, closes an aborted run's approvals, and refuses an answer to a run that has ended", async () => {
    const url = inject("natsUrl");
    const prefix = uniquePrefix();
    cleanups.push(() => removePrefix(url, prefix));
    const model = await ScriptedModelServer.start([
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "shell", arguments: { command: "echo hi" } }] } },
      { match: { turn: 2 }, reply: { text: "ran it" } },
    ]);
    cleanups.push(() => model.close());
    const env = { NATS_URL: url, OPENAI_BASE_URL: model.baseURL, OPENAI_API_KEY: "" };
    const { dir } = await startDaemon(env, prefix, "tools: [shell]");
    const config = ["--config", join(dir, "config")];

    // Every bucket is there before anything is asked: a watcher of approvals finds its bucket.
    const jsm = await jetstreamManager(await connectRaw(url));
    const streams: string[] = [];
    for await (const name of jsm.streams.names()) if (name.startsWith(`KV_${prefix}_`)) streams.push(name);
    expect(streams.sort()).toEqual(KV_BUCKETS.map((bucket) => `KV_${prefix}_${bucket}`).sort());

    const client = follow([...config, "run", "--json", "--approval", "ask", "run a command"], dir, env);
    await waitFor("the request", () => client.stdout().includes('"approval.requested"'), 10_000);
    const requested = JSON.parse(
      client
        .stdout()
        .split("\n")
        .find((line) => line.includes('"approval.requested"')) ?? "{}",
    ) as { runId: string; data: { callId: string } };
    const { runId } = requested;
    const callId = requested.data.callId;
    await waitFor("the request listed", async () =>
      (await runTroupe([...config, "approvals"], { cwd: dir, env })).stdout.includes(callId),
    );
    expect((await runTroupe([...config, "abort", runId], { cwd: dir, env })).code).toBe(0);
    expect(await client.exit).toBe(130);

    // Closed with the run: nothing waits, and an answer to it says so and counts for nothing.
    const left = await runTroupe([...config, "approvals"], { cwd: dir, env });
    expect(left.stdout).toBe("no approval waits\n");
    const late = await runTroupe([...config, "approve", callId, "--allow"], { cwd: dir, env });
    expect(late.code).toBe(1);
    expect(late.stderr).toBe(
      `troupe: too late: ${callId} was already closed: the agent stopped (aborted) before anyone answered\n`,
    );
    expect(model.requests).toHaveLength(1);

    // A request its host never closed (the host died first) is not answered once its run has ended.
    const bus = await NatsBus.connect({ url, prefix });
    cleanups.push(() => bus.close());
    const asking = new AbortController();
    const stray = new BusApprover(bus, 60_000, new ApproverTrust({}, join(dir, ".data")), silentLogger)
      .decide(
        {
          runId,
          agentId: "root",
          callId: "stray",
          tool: "shell",
          arguments: "{}",
          effect: "execute",
          detail: "true",
          paths: [],
        },
        asking.signal,
      )
      .catch(() => {});
    await waitFor("the stray request listed", async () =>
      (await runTroupe([...config, "approvals"], { cwd: dir, env })).stdout.includes("stray"),
    );
    asking.abort();
    await stray;
    const refused = await runTroupe([...config, "approve", "stray", "--allow"], { cwd: dir, env });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `troupe: run ${runId} has ended (aborted); nothing waits for an answer to stray\n`,
    );
  });
});
