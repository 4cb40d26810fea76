import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { REBUILT_NOTE } from "../../src/actors/log-history.js";
import { MISSING_RESULT } from "../../src/context/repair.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { embeddedDaemon, runToCommand } from "../support/embedded-daemon.js";

/* ATTACK (worker seed, the one besides the daemon's that reaches the snapshots): a stream API's
 * answer sent over the snapshot of an agent while it runs a command. The next daemon could not read
 * it ("written by another version of Troupe (record vundefined…)"): the run stayed `running` for
 * good. Now the snapshot is a cache and the event log the record: the agent is rebuilt from its
 * events (its turns, its calls, their results from the journal or the log) and goes on to the end,
 * told what happened; the command cut short is not run again. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("an agent whose snapshot was overwritten with junk is rebuilt from the event log after a restart and finishes, running nothing twice", async () => {
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: { text: "Reading first.", toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] },
      times: 10,
    },
    {
      match: { turn: 2 },
      reply: { toolCalls: [{ name: "shell", arguments: { command: "echo ran >> ledger.txt; sleep 5" } }] },
      times: 10,
    },
    { match: { turn: 3 }, reply: { text: "all done" }, times: 10 },
  ]);
  cleanups.push(() => model.close());
  const prefix = "junksnap";
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: coder\ndefaultModel: scripted\n`,
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell, read_file]\n",
    },
    model.baseURL,
    cleanups,
  );
  const { dir } = h;
  writeFileSync(join(dir, "notes.txt"), "the secret word is marmalade\n");
  await h.start();
  const run = await runToCommand(
    h,
    cleanups,
    (o) => o.includes('"name":"shell"') && o.includes('"tool.started"'),
  );
  await new Promise((r) => setTimeout(r, 300)); // its snapshot in executingTools stored
  const { runId, agentId, exit } = run;

  const nc = await h.connectAs("worker", prefix);
  nc.publish(`$JS.API.STREAM.MSG.GET.${prefix.toUpperCase()}_EVENTS`, JSON.stringify({ seq: 1 }), {
    reply: `$KV.${prefix}_snapshots.${runId}.${agentId}`,
  });
  await nc.flush();
  await new Promise((r) => setTimeout(r, 300));

  h.kill();
  const requestsBefore = model.requests.length;
  await h.start();
  expect(await exit).toBe(0);
  expect(run.out()).toContain("all done");
  expect(run.out()).toMatch(/"type":"agent\.resumed"[^\n]*"rebuilt":true/);
  expect(readFileSync(join(dir, "ledger.txt"), "utf8")).toBe("ran\n");

  // What the rebuilt agent was given: its turns and calls from the log, the read's output from its
  // tool.finished, the command cut short as unknown, and a note saying what happened.
  const after = model.requests.slice(requestsBefore);
  expect(after).toHaveLength(1);
  const messages = after[0]?.body.messages as Array<{
    role: string;
    content?: string | null;
    tool_calls?: Array<{ function: { name: string } }>;
  }>;
  expect(messages.map((m) => m.role)).toEqual([
    "system",
    "user",
    "assistant",
    "tool",
    "assistant",
    "tool",
    "user",
  ]);
  expect(messages[2]?.content).toBe("Reading first.");
  expect(messages[2]?.tool_calls?.[0]?.function.name).toBe("read_file");
  expect(messages[3]?.content).toContain("marmalade");
  expect(messages[4]?.tool_calls?.[0]?.function.name).toBe("shell");
  expect(messages[5]?.content).toBe(MISSING_RESULT);
  expect(messages[6]?.content).toBe(REBUILT_NOTE);
  expect(h.stderr()).toMatch(/rebuilt from the event log: its snapshot cannot be read/);
}, 90_000);
