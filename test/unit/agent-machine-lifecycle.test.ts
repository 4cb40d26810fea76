import { describe, expect, it } from "vitest";
import type { Snapshot } from "xstate";
import { persistedFacts } from "../../src/machines/agent-persisted.js";
import { NotStoppedError, reopen, reopenToCompact } from "../../src/machines/agent-reopen.js";
import { calls, finished, hang, harness, reach, type Stubs, text } from "../support/machine-harness.js";

/** Stubs that hold the machine in `state` until released, and a way to get there. */
function holdIn(state: string): { stubs: () => Stubs; task: string } {
  const askCall = () => calls({ name: "shell", effect: "execute", decision: "ask" });
  switch (state) {
    case "callingModel":
      return { task: "x", stubs: () => ({ model: [(_i, signal) => hang(signal), text("resumed")] }) };
    case "awaitingApproval":
      return {
        task: "x",
        stubs: () => ({ model: [askCall(), text("resumed")], approve: (_c, signal) => hang(signal) }),
      };
    case "executingTools":
      return {
        task: "x",
        stubs: () => ({
          model: [calls({ name: "read_file" }), text("resumed")],
          tools: (_c, signal) => hang(signal),
        }),
      };
    case "compacting":
      return {
        task: "x",
        stubs: () => ({
          model: [text("resumed")],
          needsCompaction: () => true,
          compact: (_i, signal) => hang(signal),
        }),
      };
    default:
      return { task: "x", stubs: () => ({ model: [text("resumed")] }) };
  }
}

describe("agent machine: ABORT", () => {
  it.each(["idle", "callingModel", "awaitingApproval", "executingTools", "compacting"])(
    "from %s ends in stopped(aborted), cancels the work in flight and keeps the queues",
    async (state) => {
      const setup = holdIn(state);
      const { actor, seen } = harness(setup.stubs());
      actor.start();
      if (state !== "idle") actor.send({ type: "START", task: setup.task });
      await reach(actor, state);
      actor.send({ type: "STEER", text: "kept steering" });
      actor.send({ type: "FOLLOW_UP", text: "kept follow-up" });
      actor.send({ type: "ABORT" });
      const output = await finished(actor);
      expect(output.reason).toBe("aborted");
      // The work in flight was cancelled through its signal.
      if (state !== "idle") expect(seen.signals.at(-1)?.aborted).toBe(true);
      const context = actor.getSnapshot().context;
      expect(context.unread.steering).toEqual(["kept steering"]);
      expect(context.unread.followUps).toEqual(["kept follow-up"]);
      const persisted = JSON.parse(JSON.stringify(actor.getPersistedSnapshot()));
      expect(persisted.context.unread.steering).toEqual(["kept steering"]);
    },
  );
});

describe("agent machine: snapshots", () => {
  it.each(["idle", "callingModel", "awaitingApproval", "executingTools"])(
    "persists in %s and a restored actor carries on to the end",
    async (state) => {
      const setup = holdIn(state);
      const first = harness(setup.stubs(), { budget: { maxTurns: 10 } });
      first.actor.start();
      if (state !== "idle") first.actor.send({ type: "START", task: setup.task });
      await reach(first.actor, state);
      first.actor.send({ type: "FOLLOW_UP", text: "queued" });
      const persisted = JSON.parse(JSON.stringify(first.actor.getPersistedSnapshot())) as Snapshot<unknown>;
      first.actor.stop();

      // A new host: work that was in flight starts again; everything else comes from the snapshot.
      const second = harness(
        {
          model: [text("resumed"), text("follow-up answered")],
          approve: (asked) => asked.map((c) => ({ id: c.id, approved: true })),
        },
        {},
        persisted,
      );
      second.actor.start();
      expect(second.actor.getSnapshot().value).toBe(state);
      if (state === "idle") second.actor.send({ type: "START", task: "x" });
      const output = await finished(second.actor);
      expect(output.reason).toBe("done");
      expect(output.result).toBe("follow-up answered");
      // The budget comes from the snapshot, not from the new host's input.
      expect(second.actor.getSnapshot().context.budget).toEqual({ maxTurns: 10 });
      const messages = second.seen.modelInputs.at(-1)?.messages ?? [];
      expect(messages[0]).toEqual({ role: "system", content: "You test." });
      expect(messages.at(-1)).toEqual({ role: "user", content: "queued" });
    },
  );

  it("persists in compacting and resumes the compaction", async () => {
    const first = harness(holdIn("compacting").stubs());
    first.actor.start();
    first.actor.send({ type: "START", task: "x" });
    await reach(first.actor, "compacting");
    const persisted = JSON.parse(JSON.stringify(first.actor.getPersistedSnapshot())) as Snapshot<unknown>;
    first.actor.stop();
    const second = harness({ model: [text("after")] }, {}, persisted);
    second.actor.start();
    expect(await finished(second.actor)).toMatchObject({ reason: "done", result: "after" });
    expect(second.seen.compactions).toHaveLength(1);
  });

  it("restores a stopped agent as done, with its output", async () => {
    const first = harness({ model: [text("the end")] });
    first.actor.start();
    first.actor.send({ type: "START", task: "x" });
    await finished(first.actor);
    const persisted = JSON.parse(JSON.stringify(first.actor.getPersistedSnapshot())) as Snapshot<unknown>;
    const second = harness({ model: [] }, {}, persisted);
    second.actor.start();
    expect(second.actor.getSnapshot().status).toBe("done");
    expect(second.actor.getSnapshot().output).toMatchObject({ reason: "done", result: "the end" });
  });
});

describe("agent machine: reopen", () => {
  it("takes a stopped agent back to idle with its conversation and spend; a START goes on from there", async () => {
    const first = harness({ model: [text("first answer")] }, { budget: { maxTurns: 10 } });
    first.actor.start();
    first.actor.send({ type: "START", task: "begin" });
    expect(await finished(first.actor)).toMatchObject({ reason: "done", turns: 1 });
    const stopped = JSON.parse(JSON.stringify(first.actor.getPersistedSnapshot()));

    const reopened = JSON.parse(JSON.stringify(reopen(stopped))) as Snapshot<unknown>;
    const second = harness({ model: [text("second answer")] }, {}, reopened);
    second.actor.start();
    expect(second.actor.getSnapshot()).toMatchObject({ status: "active", value: "idle" });
    second.actor.send({ type: "START", task: "go on" });
    const output = await finished(second.actor);
    expect(output).toMatchObject({ reason: "done", result: "second answer", turns: 2 });
    expect(second.seen.modelInputs[0]?.messages.map((m) => m.content)).toEqual([
      "You test.",
      "begin",
      "first answer",
      "go on",
    ]);
    expect(second.actor.getSnapshot().context.budget).toEqual({ maxTurns: 10 });
  });

  it("after an abort in a batch, runs again the reads it cut short, then reads the message after their results; a cut command is not run again", async () => {
    const cut = harness({
      model: [
        calls({ name: "read_file", id: "call_read" }, { name: "shell", effect: "execute", id: "call_shell" }),
      ],
      tools: (_c, signal) => hang(signal),
    });
    cut.actor.start();
    cut.actor.send({ type: "START", task: "look" });
    await reach(cut.actor, "executingTools");
    cut.actor.send({ type: "ABORT" });
    const stopped = JSON.parse(JSON.stringify(cut.actor.getPersistedSnapshot()));

    const second = harness({ model: [text("went on")] }, {}, reopen(stopped) as Snapshot<unknown>);
    second.actor.start();
    second.actor.send({ type: "START", task: "go on" });
    expect(await finished(second.actor)).toMatchObject({ reason: "done", result: "went on" });
    expect(second.seen.batches.map((batch) => batch.map((call) => call.id))).toEqual([["call_read"]]);
    const asked = second.seen.modelInputs[0]?.messages ?? [];
    expect(
      asked.slice(2).map((m) => (m.role === "tool" ? `${m.tool_call_id}: ${m.content}` : m.role)),
    ).toEqual([
      "assistant",
      expect.stringMatching(/^call_read: /),
      expect.stringMatching(/^call_shell: error: no result was recorded/),
      "user",
    ]);
    expect(asked.at(-1)?.content).toBe("go on");
  });

  it("leaves behind what ended it: its stop, the batch cut short and a last call for the answer", async () => {
    const setup = holdIn("executingTools");
    const aborted = harness(setup.stubs(), { budget: { maxTurns: 1 } });
    aborted.actor.start();
    aborted.actor.send({ type: "START", task: setup.task });
    await reach(aborted.actor, "executingTools");
    aborted.actor.send({ type: "ABORT" });
    expect(await finished(aborted.actor)).toMatchObject({ reason: "aborted" });
    const stopped = JSON.parse(JSON.stringify(aborted.actor.getPersistedSnapshot()));
    expect(stopped.context.stop).not.toBeNull();
    expect(stopped.context.batch).not.toEqual([]);

    const reopened = reopen({ ...stopped, context: { ...stopped.context, finalizing: "budget_exhausted" } });
    expect(reopened).toMatchObject({
      status: "active",
      value: "idle",
      // The read the abort cut short is kept, to run again (above); any other stop keeps no batch.
      context: { stop: null, finalizing: null, batch: stopped.context.batch },
    });
    const failed = { ...stopped.context.stop, reason: "failed" };
    expect(reopen({ ...stopped, context: { ...stopped.context, stop: failed } })).toMatchObject({
      context: { batch: [] },
    });
  });

  it("reads a stored snapshot's state, model calls, output and time waited without the machine (persistedFacts)", async () => {
    const { actor } = harness({ model: [text("the answer")] });
    actor.start();
    actor.send({ type: "WAITED", ms: 1200 });
    actor.send({ type: "WAITED", ms: 300 });
    actor.send({ type: "START", task: "begin" });
    const output = await finished(actor);
    const stored = JSON.parse(JSON.stringify(actor.getPersistedSnapshot()));
    expect(persistedFacts(stored)).toEqual({ value: "stopped", turns: 1, output, waitedMs: 1500 });
    expect(persistedFacts(reopen(stored))).toMatchObject({ value: "idle", turns: 1 });
  });

  it("refuses a snapshot of an agent that has not stopped", () => {
    const { actor } = harness({ model: [] });
    actor.start();
    expect(() => reopen(actor.getPersistedSnapshot())).toThrow(NotStoppedError);
  });
});

describe("agent machine: a compaction a person asked for", () => {
  it("reopened to compact, a stopped agent compacts all it holds, asked as requested, and stops again as it had stopped", async () => {
    const first = harness({ model: [text("first answer")] });
    first.actor.start();
    first.actor.send({ type: "START", task: "begin" });
    const had = await finished(first.actor);
    const stopped = JSON.parse(JSON.stringify(first.actor.getPersistedSnapshot()));

    const usage = { inputTokens: 7, outputTokens: 3, cachedInputTokens: 0, costUsd: 0 };
    const second = harness(
      {
        model: [],
        compact: (input) => ({
          messages: [...input.messages.slice(0, 1), { role: "user", content: "summary" }],
          usage,
        }),
      },
      {},
      reopenToCompact(stopped) as Snapshot<unknown>,
    );
    second.actor.start();
    expect(second.actor.getSnapshot()).toMatchObject({ status: "active", value: "idle" });
    second.actor.send({ type: "COMPACT" });
    const output = await finished(second.actor);
    expect(second.seen.compactions).toEqual([
      {
        messages: expect.arrayContaining([expect.objectContaining({ content: "first answer" })]),
        reason: "requested",
      },
    ]);
    expect(second.seen.modelInputs).toHaveLength(0);
    expect(output).toMatchObject({ reason: had.reason, result: had.result, turns: had.turns });
    expect(second.actor.getSnapshot().context.messages.map((m) => m.content)).toEqual([
      "You test.",
      "summary",
    ]);
    expect(second.actor.getSnapshot().context.usage).toMatchObject({
      inputTokens: had.usage.inputTokens + 7,
    });
  });

  it("does not reopen an agent that has not stopped to compact it", () => {
    const running = harness({ model: [(_i, signal) => hang(signal)] });
    running.actor.start();
    running.actor.send({ type: "START", task: "x" });
    expect(() => reopenToCompact(running.actor.getPersistedSnapshot())).toThrow(NotStoppedError);
  });
});
