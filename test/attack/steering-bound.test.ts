import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Kvm } from "@nats-io/kv";
import { afterEach, expect, it } from "vitest";
import { MAX_TEXT, MAX_UNREAD } from "../../src/limits.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe } from "../support/cli.js";
import { apiRequest, coderDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (outside review, client seed): each runs.steer was held to 32 KiB, but an agent queued any
 * number of them: 400 steers into another's run made its snapshot too big for the server ("snapshot
 * not saved") and sent 13 MB to the model on its account. Now an agent holds at most MAX_UNREAD
 * steering messages, and apart from them follow-ups, unread; past that a steer or follow-up is
 * refused, in one line the client sees, until the agent takes them. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("steering and follow-ups past what a run holds unread are refused in one line; its snapshot stays small and is saved", async () => {
  // The run's one command waits for `go` while it is steered; every later turn answers at once.
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [
          { name: "shell", arguments: { command: "touch waiting; until [ -e go ]; do sleep 0.1; done" } },
        ],
      },
    },
    { reply: { text: "done" }, times: Number.POSITIVE_INFINITY },
  ]);
  cleanups.push(() => model.close());
  const prefix = "steerb";
  const h = await coderDaemon(prefix, model.baseURL, cleanups);
  await h.start();
  const client = await h.connectAs("client", prefix);
  const ask = (verb: string, data: unknown) => apiRequest(client, prefix, verb, data);
  const started = await ask("runs.start", { task: "wait for go", approval: "auto-edit" });
  const { runId, agentId } = started.data as { runId: string; agentId: string };
  await waitFor("its command waiting", () => existsSync(join(h.dir, "waiting")), 20_000);

  // As in the review, steers of the largest size, many: the first two fit, every other is refused.
  const outcomes: string[] = [];
  for (let n = 0; n < 40; n++) {
    const text = `steer ${n} `.padEnd(MAX_TEXT, "x");
    const reply = await ask("runs.steer", { runId, text });
    outcomes.push(reply.type === "error" ? (reply.data as { message: string }).message : reply.type);
  }
  expect(outcomes.slice(0, 2)).toEqual(["runs.steer.reply", "runs.steer.reply"]);
  expect(new Set(outcomes.slice(2))).toEqual(
    new Set([
      `run ${runId} has 2 unread steering messages (65536 characters; it holds at most 16, or 65536 characters): wait for it to take them`,
    ]),
  );
  // `troupe steer` says it in one line, a usage error.
  const steer = await runTroupe([...h.cfg, "steer", runId, "and one more"], { cwd: h.dir, env: h.env });
  expect(steer.stderr).toBe(`troupe: ${outcomes[2]}\n`);
  expect(steer.code).toBe(2);
  // Follow-ups are held apart, and bounded in number too.
  for (let n = 0; n < MAX_UNREAD.messages; n++)
    expect((await ask("runs.followUp", { runId, text: `follow-up ${n}` })).type).toBe("runs.followUp.reply");
  const past = await ask("runs.followUp", { runId, text: "one more" });
  expect(past.type).toBe("error");
  expect((past.data as { message: string }).message).toMatch(
    new RegExp(
      `^run ${runId} has 16 unread follow-ups \\(\\d+ characters; it holds at most 16, or 65536 characters\\): wait for it to take them$`,
    ),
  );

  // Let go, it reads the two steers after its command, then each follow-up, and is done.
  writeFileSync(join(h.dir, "go"), "");
  await waitFor(
    "the run done",
    async () => ((await ask("runs.get", { runId })).data as { status?: string }).status === "done",
    30_000,
  );
  // Its snapshot, with the steering and follow-ups it took, was stored each time (the server takes
  // none past 1 MiB).
  const kv = await new Kvm(await h.connectAs("daemon", prefix)).open(`${prefix}_snapshots`);
  const entry = await kv.get(`${runId}.${agentId}`);
  const record = entry?.json() as {
    done: boolean;
    snapshot: { context: { messages: { content?: unknown }[] } };
  };
  expect(record.done).toBe(true);
  const steered = record.snapshot.context.messages.filter((m) => String(m.content).startsWith("steer "));
  expect(steered).toHaveLength(2);
  expect(entry?.value.length).toBeLessThan(200_000);
  expect(h.stderr()).not.toContain("snapshot not saved");
  const second = model.requests[1]?.body.messages ?? [];
  expect(second.filter((m) => m.role === "user" && String(m.content).startsWith("steer "))).toHaveLength(2);
  expect(model.requests).toHaveLength(2 + MAX_UNREAD.messages);
}, 120_000);
