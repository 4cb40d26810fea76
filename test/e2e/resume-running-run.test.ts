import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, TROUPE_BIN } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";
import { Tmux } from "../support/tmux.js";
import { waitFor } from "../support/wait.js";

/*
 * A daemon's run that waited on an approval when its daemon was killed, brought back by the next
 * daemon: `troupe resume` follows it (it is running; it was refused) and shows the question asked
 * before it came, asking it on a terminal, or saying in one line what the run waits on and how to
 * answer it. (daemon-resume-asks.test.ts: a run aborted at its question, then resumed.)
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const QUESTION = "? allow write_file (call_write)? y = yes, n [reason] = no, a = always:";

/** A daemon whose run asks to write notes.md and waits; its daemon is then killed and started again. */
async function waitingRun() {
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [
          { name: "write_file", arguments: { path: "notes.md", content: "hi\n" }, id: "call_write" },
        ],
      },
    },
    { match: { turn: 2 }, reply: { text: "Wrote it." } },
  ]);
  cleanups.push(() => model.close());
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${uniquePrefix()}\ndefaultAgent: coder\ndefaultModel: scripted\n`,
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [write_file]\n",
    },
    model.baseURL,
    cleanups,
  );
  await h.start();
  const run = (...args: string[]) => runTroupe([...h.cfg, ...args], { cwd: h.dir, env: h.env });
  const started = await run("run", "--detach", "--approval", "ask", "Write hi");
  const runId = started.stdout.trim();
  expect(runId).toMatch(/^run-/);
  await waitFor(
    "the question",
    async () => (await run("approvals", runId)).stdout.includes("call_write"),
    20_000,
  );
  h.kill();
  await h.start();
  return { h, runId, run };
}

it("troupe resume of a run the restarted daemon runs already follows it, and with no terminal says the approval it waits on and how to answer it", async () => {
  const { h, runId, run } = await waitingRun();
  const client: ChildProcess = spawn(process.execPath, [TROUPE_BIN, ...h.cfg, "resume", runId], {
    cwd: h.dir,
    env: h.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  cleanups.push(() => void client.kill("SIGKILL"));
  const exit = new Promise<number | null>((resolve) => client.once("exit", resolve));
  let out = "";
  client.stdout?.on("data", (chunk) => (out += chunk));
  client.stderr?.on("data", (chunk) => (out += chunk));
  await waitFor("the line", () => out.includes("waits for approval"), 20_000);
  expect(out).toContain(`troupe: run ${runId} is running on the daemon; following it\n`);
  expect(out).toContain(
    `troupe: the run waits for approval of write_file (call call_write): troupe approve call_write --run ${runId} --allow (or --deny) answers it`,
  );
  expect((await run("approve", "call_write", "--allow", "--run", runId)).code).toBe(0);
  expect(await exit).toBe(0);
  expect(out).toContain("Wrote it.");
  expect(readFileSync(join(h.dir, "notes.md"), "utf8")).toBe("hi\n");
}, 90_000);

it("troupe resume of a run the restarted daemon runs already asks on a terminal the question asked before it came, and the answer given there lets the run go on", async () => {
  const { h, runId } = await waitingRun();
  const tmux = Tmux.start([process.execPath, TROUPE_BIN, ...h.cfg, "resume", runId], {
    cwd: h.dir,
    env: h.env,
    columns: 160,
    rows: 40,
  });
  cleanups.push(() => tmux.kill());
  await waitFor("the question", () => tmux.screen().includes(QUESTION), 20_000);
  expect(existsSync(join(h.dir, "notes.md"))).toBe(false);
  tmux.keys("y", "Enter");
  await waitFor("the answer", () => tmux.history().includes("Wrote it."), 20_000);
  expect(readFileSync(join(h.dir, "notes.md"), "utf8")).toBe("hi\n");
}, 90_000);
