import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { onTerminal, runTroupe, spawnTroupe } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/*
 * A daemon run that waits on a person, aborted, then `troupe resume`d: its client printed the call
 * and nothing more, no question and no hint that the run waited. On the default embedded,
 * credentialed NATS: a resumed run asks on the terminal it is resumed in, as `troupe run` does, and
 * with no terminal says in one line what it waits on and how to answer it.
 */
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}, 60_000);

const writeNotes = {
  toolCalls: [{ name: "write_file", arguments: { path: "notes.md", content: "hello\n" } }],
};

/** A daemon whose run asked to write notes.md and was aborted while it waited: its id. */
async function abortedWhileAsking(prefix: string) {
  const model = await ScriptedModelServer.start([
    { match: { lastUser: "Write the notes", turn: 1 }, reply: writeNotes },
    // Resumed: told to go on, it asks for the same call again; then it answers.
    { match: { where: (r) => r.messages.at(-1)?.role === "user" }, reply: writeNotes },
    { match: { where: (r) => r.messages.at(-1)?.role === "tool" }, reply: { text: "wrote it" } },
  ]);
  cleanups.push(() => model.close());
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: scribe\ndefaultModel: scripted\n`,
      "config/agents/scribe.yaml": "name: scribe\ndescription: Writes notes.\ntools: [write_file]\n",
    },
    model.baseURL,
    cleanups,
  );
  await h.start();
  const started = await runTroupe([...h.cfg, "run", "--detach", "--approval", "ask", "Write the notes"], {
    cwd: h.dir,
    env: h.env,
  });
  expect(started.code, started.stderr).toBe(0);
  const runId = started.stdout.trim();
  const waiting = async () =>
    (await runTroupe([...h.cfg, "approvals", runId], { cwd: h.dir, env: h.env })).stdout.includes(
      "write_file",
    );
  await waitFor("the run waiting on its approval", waiting, 15_000);
  const abort = await runTroupe([...h.cfg, "abort", runId], { cwd: h.dir, env: h.env });
  expect(abort.code, abort.stderr).toBe(0);
  const aborted = async () => {
    const runs = JSON.parse(
      (await runTroupe([...h.cfg, "runs", "--json"], { cwd: h.dir, env: h.env })).stdout,
    );
    return (runs as Array<{ runId: string; state: string }>).some(
      (r) => r.runId === runId && r.state === "aborted",
    );
  };
  await waitFor("the run aborted", aborted, 15_000);
  return { h, model, runId };
}

it("troupe resume with no terminal says what the resumed run waits on and how to answer; answered from another terminal, it goes on to the end", async () => {
  const { h, runId } = await abortedWhileAsking("resumeasks");
  const resumed = spawnTroupe([...h.cfg, "resume", runId], { cwd: h.dir, env: h.env });
  cleanups.push(() => resumed.child.kill());
  await waitFor(
    "the line saying what it waits on",
    () => resumed.stderr().includes("waits for approval"),
    20_000,
  );
  const line = resumed
    .stderr()
    .split("\n")
    .find((l) => l.includes("waits for approval")) as string;
  expect(line).toMatch(/^troupe: the run waits for approval of write_file \(call [^)]+\): troupe approve /);
  const callId = /\(call ([^)]+)\)/.exec(line)?.[1] as string;
  expect(line).toContain(`troupe approve ${callId} --run ${runId} --allow`);
  // Said once, and nothing written while it waits.
  expect(resumed.stderr().split("waits for approval")).toHaveLength(2);
  expect(() => readFileSync(join(h.dir, "notes.md"))).toThrow();

  const approve = await runTroupe([...h.cfg, "approve", callId, "--run", runId, "--allow"], {
    cwd: h.dir,
    env: h.env,
  });
  expect(approve.code, approve.stderr).toBe(0);
  expect(await resumed.exit).toBe(0);
  expect(readFileSync(join(h.dir, "notes.md"), "utf8")).toBe("hello\n");
}, 90_000);

it("troupe resume on a terminal asks the resumed run's question there, and the answer given there lets it go on", async () => {
  const { h, runId } = await abortedWhileAsking("resumetty");
  const terminal = onTerminal([...h.cfg, "resume", runId], { cwd: h.dir, env: h.env });
  cleanups.push(() => terminal.child.kill());
  await waitFor("the question", () => /\? allow write_file \([^)]+\)\?/.test(terminal.output()), 20_000);
  expect(() => readFileSync(join(h.dir, "notes.md"))).toThrow();
  terminal.child.stdin.write("y\n");
  expect(await terminal.exit).toBe(0);
  expect(readFileSync(join(h.dir, "notes.md"), "utf8")).toBe("hello\n");
  expect(terminal.output()).toContain("wrote it");
}, 90_000);
