import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, inject, it } from "vitest";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { ScriptedModelServer, type ScriptRule } from "../../src/testing/scripted-model-server.js";
import { removePrefix } from "../support/buses.js";
import { runTroupe, TROUPE_BIN, tempTree } from "../support/cli.js";
import { waitFor } from "../support/wait.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A project on its own prefix, daemons to start and kill, and a `troupe run` client following throughout. */
async function scenario(
  rules: ScriptRule[],
  approval: string,
  agents: Record<string, string> = { worker: "name: worker\ndescription: Works.\ntools: [shell]\n" },
) {
  const url = inject("natsUrl");
  const prefix = uniquePrefix();
  const model = await ScriptedModelServer.start(rules);
  const files: Record<string, string> = {
    // These runs ask for yolo: the operator lets clients of this daemon ask for it.
    "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: ${Object.keys(agents)[0]}\ndefaultModel: scripted\ndaemon:\n  maxApproval: yolo\n`,
    "notes.txt": "the answer is 42\n",
  };
  for (const [name, yaml] of Object.entries(agents)) files[`config/agents/${name}.yaml`] = yaml;
  const { dir, dispose } = tempTree(files);
  cleanups.push(
    dispose,
    () => model.close(),
    () => removePrefix(url, prefix),
  );
  const env = {
    ...process.env,
    NATS_URL: url,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  };
  const config = ["--config", join(dir, "config")];
  const startDaemon = async (): Promise<ChildProcess> => {
    const daemon = spawn(process.execPath, [TROUPE_BIN, ...config, "daemon"], {
      cwd: dir,
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    daemon.stderr?.on("data", (chunk) => (stderr += chunk));
    cleanups.push(() => void daemon.kill("SIGKILL"));
    await waitFor("the daemon", () => stderr.includes("troupe daemon ready"), 15_000);
    return daemon;
  };
  const daemon = await startDaemon();
  const client = spawn(
    process.execPath,
    [TROUPE_BIN, ...config, "run", "--json", "--approval", approval, "Do it"],
    { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] },
  );
  cleanups.push(() => void client.kill("SIGKILL"));
  const clientExit = new Promise<number | null>((resolve) => client.once("exit", resolve));
  let stdout = "";
  client.stdout.on("data", (chunk) => (stdout += chunk));
  let stderr = "";
  client.stderr.on("data", (chunk) => (stderr += chunk));
  const events = () =>
    stdout
      .trim()
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { seq: number; type: string; data: Record<string, unknown> });
  const crash = async (awayMs = 300) => {
    expect(stdout).not.toContain('"agent.stopped"');
    daemon.kill("SIGKILL");
    await new Promise((resolve) => setTimeout(resolve, awayMs));
    await startDaemon();
  };
  return { dir, model, env, config, events, stdout: () => stdout, stderr: () => stderr, crash, clientExit };
}

it("SIGKILL during a model call: the restarted daemon finishes the run; the client follows throughout; the finished command ran once", async () => {
  const s = await scenario(
    [
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ name: "shell", arguments: { command: "echo ran >> log.txt" } }] },
      },
      {
        match: { turn: 2 },
        reply: { text: "Appended once.", delayMs: 2500 },
        times: Number.POSITIVE_INFINITY,
      },
    ],
    "yolo",
  );
  await waitFor(
    "the next model call",
    () => s.stdout().includes('"tool.finished"') && s.stdout().split('"state.changed"').length > 3,
    15_000,
  );
  await s.crash();
  expect(await s.clientExit).toBe(0);
  expect(s.events().at(-1)).toMatchObject({
    type: "agent.stopped",
    data: { reason: "done", result: "Appended once." },
  });
  expect(s.events().map((e) => e.seq)).toEqual(s.events().map((_, i) => i));
  expect(readFileSync(join(s.dir, "log.txt"), "utf8")).toBe("ran\n");
}, 60_000);

it("SIGKILL before a write: the resumed run keeps the policy it was started with and is not asked", async () => {
  const s = await scenario(
    [
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [{ name: "write_file", arguments: { path: "out.txt", content: "written\n" } }],
          delayMs: 2500,
        },
        times: Number.POSITIVE_INFINITY,
      },
      { match: { turn: 2 }, reply: { text: "Wrote it." } },
    ],
    "yolo",
    { worker: "name: worker\ndescription: Works.\ntools: [write_file]\n" },
  );
  await waitFor("the model call", () => s.stdout().includes('"to":"callingModel"'), 15_000);
  await s.crash();
  expect(await s.clientExit).toBe(0);
  expect(s.events().at(-1)).toMatchObject({
    type: "agent.stopped",
    data: { reason: "done", result: "Wrote it." },
  });
  // Under the config's default policy the write would wait for a person; the run said yolo.
  expect(s.events().filter((e) => e.type === "approval.requested")).toEqual([]);
  expect(s.events().find((e) => e.type === "tool.requested")?.data).toMatchObject({ decision: "allow" });
  expect(readFileSync(join(s.dir, "out.txt"), "utf8")).toBe("written\n");
}, 60_000);

it("SIGKILL during a command: it is not run again, and the model is told its outcome is unknown", async () => {
  const s = await scenario(
    [
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ name: "shell", arguments: { command: "echo started >> log.txt; sleep 2" } }] },
      },
      { match: { turn: 2 }, reply: { text: "I will check log.txt before running it again." } },
    ],
    "yolo",
  );
  await waitFor("the command to start", () => s.stdout().includes('"tool.started"'), 15_000);
  await waitFor("its first line", () => {
    try {
      return readFileSync(join(s.dir, "log.txt"), "utf8").length > 0;
    } catch {
      return false;
    }
  });
  await s.crash();
  expect(await s.clientExit).toBe(0);
  expect(s.events().at(-1)).toMatchObject({ type: "agent.stopped", data: { reason: "done" } });
  expect(s.events().map((e) => e.seq)).toEqual(s.events().map((_, i) => i));
  expect(readFileSync(join(s.dir, "log.txt"), "utf8")).toBe("started\n");
  const toolResult = s.model.requests.at(-1)?.body.messages.find((m) => m.role === "tool")?.content;
  expect(toolResult).toContain("shell was running when its host stopped; its outcome is unknown");
  // The client saw it too: the restarted host says the call finished, and how.
  expect(
    s
      .events()
      .filter((e) => e.type === "tool.finished")
      .at(-1)?.data,
  ).toMatchObject({
    name: "shell",
    ok: false,
    error: "shell was running when its host stopped; its outcome is unknown",
  });
}, 60_000);

it("SIGKILL while an approval is pending: the request is still there after the restart and can be answered", async () => {
  const s = await scenario(
    [
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [
            { name: "shell", arguments: { command: "echo approved >> log.txt" }, id: "call_pending" },
          ],
        },
        // The snapshot may be a step behind the events when the daemon dies (still calling the
        // model): then the model is asked again, and answers the same.
        times: Number.POSITIVE_INFINITY,
      },
      { match: { turn: 2 }, reply: { text: "Done after approval." } },
    ],
    "ask",
  );
  await waitFor("the approval request", () => s.stdout().includes('"approval.requested"'), 15_000);
  await s.crash();
  await new Promise((resolve) => setTimeout(resolve, 500));
  const approve = await runTroupe([...s.config, "approve", "call_pending", "--allow"], {
    cwd: s.dir,
    env: s.env,
  });
  // Decided at once, or recorded for a host still busy coming back: either way it is the answer.
  expect(approve.stdout).toMatch(
    /^allowed shell \(call_pending\) as \S+(: recorded; the run's host acts on it when it is back)?\n$/,
  );
  expect(await s.clientExit, `client: ${s.stderr()}${s.stdout().slice(-3000)}`).toBe(0);
  expect(s.events().at(-1)).toMatchObject({
    type: "agent.stopped",
    data: { reason: "done", result: "Done after approval." },
  });
  expect(s.events().map((e) => e.seq)).toEqual(s.events().map((_, i) => i));
  expect(readFileSync(join(s.dir, "log.txt"), "utf8")).toBe("approved\n");
}, 60_000);

it("SIGKILL while a subagent runs in the daemon: the child is resumed, not spawned again, and its finished read is not repeated", async () => {
  const as = (name: string, turn: number) => ({ system: `"${name}"`, turn });
  const s = await scenario(
    [
      {
        match: as("lead", 1),
        reply: { toolCalls: [{ name: "subagent_explorer", arguments: { task: "What is the answer?" } }] },
      },
      {
        match: as("explorer", 1),
        reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] },
      },
      {
        match: as("explorer", 2),
        reply: { text: "The answer is 42.", delayMs: 2500 },
        times: Number.POSITIVE_INFINITY,
      },
      { match: as("lead", 2), reply: { text: "42." } },
    ],
    "yolo",
    {
      lead: "name: lead\ndescription: Leads.\nsubagents: [explorer]\n",
      explorer: "name: explorer\ndescription: Explores.\nreadOnly: true\ntools: [read_file]\n",
    },
  );
  // The client shows the whole run; wait until the explorer has read and is asking the model again.
  await waitFor("the child's second model call", () => s.stdout().includes('"subagent.spawned"'), 15_000);
  await new Promise((resolve) => setTimeout(resolve, 1200));
  await s.crash();
  expect(await s.clientExit).toBe(0);
  const events = s.events();
  expect(events.at(-1)).toMatchObject({ type: "agent.stopped", data: { reason: "done", result: "42." } });
  expect(events.filter((e) => e.type === "subagent.spawned")).toHaveLength(1);
  const childId = String(events.find((e) => e.type === "subagent.spawned")?.data.childId);
  const child = events.filter((e) => (e as unknown as { agentId: string }).agentId === childId);
  expect(child.filter((e) => e.type === "agent.started")).toHaveLength(1);
  expect(child.filter((e) => e.type === "tool.started")).toHaveLength(1);
  expect(child.map((e) => e.seq)).toEqual(child.map((_, i) => i));
  expect(
    s.model.requests.filter(
      (r) => String(r.body.messages[0]?.content).includes('"explorer"') && r.body.messages.length === 2,
    ),
  ).toHaveLength(1);
}, 60_000);

it("a daemon away: the client says it lost contact within a few seconds, and when the daemon is back", async () => {
  const s = await scenario(
    [
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [{ name: "shell", arguments: { command: "echo ok >> log.txt" }, id: "call_wait" }],
        },
      },
      { match: { turn: 2 }, reply: { text: "Done." } },
    ],
    "ask",
  );
  await waitFor("the approval request", () => s.stdout().includes('"approval.requested"'), 15_000);
  // Its snapshot in awaitingApproval stored: one a step behind (callingModel) would have the restarted
  // daemon call the model again for that turn, and ask the question again.
  await new Promise((resolve) => setTimeout(resolve, 500));
  await s.crash(5000);
  // With no terminal, the client said what the run waits on; then, the daemon gone, that it lost it.
  expect(s.stderr()).toMatch(
    /^troupe: the run waits for approval of shell \(call call_wait\): troupe approve call_wait .*\ntroupe: lost contact with the daemon \(last seen [34] s ago\); waiting…\n/,
  );
  await waitFor("the daemon seen again", () => s.stderr().includes("troupe: the daemon is back\n"), 5000);
  const approve = await runTroupe([...s.config, "approve", "--allow"], { cwd: s.dir, env: s.env });
  expect(approve.code, approve.stderr).toBe(0);
  expect(await s.clientExit, s.stderr()).toBe(0);
}, 60_000);
