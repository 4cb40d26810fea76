import { describe, expect, it } from "vitest";
import { MAX_TEXT, MAX_UNREAD } from "../../src/limits.js";
import { unreadRefusal } from "../../src/machines/agent-rules.js";
import type { ChatMessage } from "../../src/model/types.js";
import type { PlannedCall } from "../../src/tools/plan.js";
import { calls, finished, hang, harness, okResults, reach, text } from "../support/machine-harness.js";

const roles = (messages: ChatMessage[]) => messages.map((m) => m.role);

describe("agent machine: the loop", () => {
  it("answers without tools: idle → callingModel → stopped(done)", async () => {
    const { actor, states, seen } = harness({ model: [text("Hi there.")] });
    actor.start();
    actor.send({ type: "START", task: "Say hi" });
    const output = await finished(actor);
    expect(output).toMatchObject({ reason: "done", result: "Hi there.", turns: 1, toolCalls: 0 });
    expect(output.usage).toMatchObject({ inputTokens: 10, outputTokens: 5 });
    expect(states).toEqual(["idle", "callingModel", "stopped"]);
    expect(seen.modelInputs[0]?.withTools).toBe(true);
    expect(seen.modelInputs[0]?.messages).toEqual([
      { role: "system", content: "You test." },
      { role: "user", content: "Say hi" },
    ]);
  });

  it("runs a tool batch and writes results back in the order the model asked", async () => {
    const turn = calls({ name: "read_file", args: { path: "a" } }, { name: "grep", args: { q: "b" } });
    const { actor, states, seen } = harness({
      model: [turn, text("Done.")],
      // The batch returns its results in reverse order.
      tools: (batch) =>
        Object.fromEntries([...batch].reverse().map((c) => [c.id, { ok: true, output: `out of ${c.name}` }])),
    });
    actor.start();
    actor.send({ type: "START", task: "Look" });
    const output = await finished(actor);
    expect(output).toMatchObject({ reason: "done", result: "Done.", turns: 2, toolCalls: 2 });
    expect(states).toEqual(["idle", "callingModel", "executingTools", "callingModel", "stopped"]);
    const second = seen.modelInputs[1]?.messages ?? [];
    expect(roles(second)).toEqual(["system", "user", "assistant", "tool", "tool"]);
    expect(second.slice(3)).toEqual([
      { role: "tool", tool_call_id: turn.plan[0]?.id, content: "out of read_file" },
      { role: "tool", tool_call_id: turn.plan[1]?.id, content: "out of grep" },
    ]);
  });

  it("asks for approval of calls whose policy says ask; a denial becomes an error result", async () => {
    const turn = calls(
      { name: "read_file", effect: "read" },
      { name: "write_file", effect: "write", decision: "ask" },
      { name: "shell", effect: "execute", decision: "ask" },
    );
    const { actor, states, seen } = harness({
      model: [turn, text("ok")],
      approve: (asked) =>
        asked.map((c) => ({ id: c.id, approved: c.name === "write_file", reason: "not now" })),
    });
    actor.start();
    actor.send({ type: "START", task: "Change things" });
    const output = await finished(actor);
    expect(states).toEqual([
      "idle",
      "callingModel",
      "awaitingApproval",
      "executingTools",
      "callingModel",
      "stopped",
    ]);
    expect(seen.approvals[0]?.map((c) => c.name)).toEqual(["write_file", "shell"]);
    expect(seen.batches[0]?.map((c) => c.name)).toEqual(["read_file", "write_file"]);
    const shellResult = seen.modelInputs[1]?.messages.at(-1);
    expect(shellResult).toMatchObject({ role: "tool", tool_call_id: turn.plan[2]?.id });
    expect(shellResult?.content).toContain("the user denied shell: not now");
    expect(output.toolCalls).toBe(2);
  });

  it("denies every asked call when the approval wait fails", async () => {
    const turn = calls({ name: "shell", effect: "execute", decision: "ask" });
    const { actor, seen } = harness({
      model: [turn, text("ok")],
      approve: () => {
        throw new Error("no approver");
      },
    });
    actor.start();
    actor.send({ type: "START", task: "x" });
    await finished(actor);
    expect(seen.batches[0]).toEqual([]);
    expect(seen.modelInputs[1]?.messages.at(-1)?.content).toContain("was not approved");
  });

  it("gives calls that were refused at planning their error result without running them", async () => {
    const turn = calls({ name: "read_file" }, { name: "nope" });
    const refused = turn.plan[1];
    if (refused)
      Object.assign(refused, {
        decision: "deny",
        result: { ok: false, output: "", error: 'unknown tool "nope"' },
      });
    const { actor, seen } = harness({ model: [turn, text("ok")] });
    actor.start();
    actor.send({ type: "START", task: "x" });
    const output = await finished(actor);
    expect(seen.batches[0]?.map((c) => c.name)).toEqual(["read_file"]);
    expect(seen.modelInputs[1]?.messages.at(-1)?.content).toContain('unknown tool "nope"');
    expect(output.toolCalls).toBe(1);
  });

  it("stops without another model call when every result of a batch says terminate", async () => {
    const { actor, seen } = harness({
      model: [calls({ name: "finish" }, { name: "finish" })],
      tools: (batch) =>
        Object.fromEntries(batch.map((c) => [c.id, { ok: true, output: "final word", terminate: true }])),
    });
    actor.start();
    actor.send({ type: "START", task: "x" });
    const output = await finished(actor);
    expect(output).toMatchObject({ reason: "done", result: "final word\nfinal word", toolCalls: 2 });
    expect(seen.modelInputs).toHaveLength(1);
  });

  describe("onToolError", () => {
    const failing = (batch: PlannedCall[]) =>
      Object.fromEntries(
        batch.map((c) =>
          c.name === "flaky"
            ? [c.id, { ok: false, output: "", error: "disk full" }]
            : [c.id, { ok: true, output: "fine" }],
        ),
      );

    it("stop: the first call that ran and failed stops the agent as failed, before another model call", async () => {
      const { actor, seen, states } = harness(
        { model: [calls({ name: "read_file" }, { name: "flaky" }, { name: "flaky" })], tools: failing },
        { onToolError: "stop" },
      );
      actor.start();
      actor.send({ type: "START", task: "x" });
      const output = await finished(actor);
      expect(output).toMatchObject({
        reason: "failed",
        result: "",
        error: "flaky failed (onToolError: stop): disk full",
        turns: 1,
        toolCalls: 0,
      });
      expect(states).toEqual(["idle", "callingModel", "executingTools", "stopped"]);
      expect(seen.modelInputs).toHaveLength(1);
    });

    it("stop: a call refused at run time is not a tool error", async () => {
      const turn = calls({ name: "flaky", id: "refused_1" }, { name: "read_file" });
      const { actor, seen } = harness(
        { model: [turn, text("went on")], tools: failing, refused: ["refused_1"] },
        { onToolError: "stop" },
      );
      actor.start();
      actor.send({ type: "START", task: "x" });
      expect(await finished(actor)).toMatchObject({ reason: "done", result: "went on" });
      expect(seen.modelInputs).toHaveLength(2);
    });

    it("continue (the default): the model reads the error and goes on", async () => {
      const { actor, seen } = harness({
        model: [calls({ name: "flaky" }), text("recovered")],
        tools: failing,
      });
      actor.start();
      actor.send({ type: "START", task: "x" });
      expect(await finished(actor)).toMatchObject({ reason: "done", result: "recovered", toolCalls: 1 });
      expect(seen.modelInputs[1]?.messages.at(-1)).toMatchObject({ role: "tool" });
    });
  });

  it("goes on when only some results say terminate", async () => {
    const { actor, seen } = harness({
      model: [calls({ name: "finish" }, { name: "other" }), text("end")],
      tools: (batch) =>
        Object.fromEntries(
          batch.map((c) => [c.id, { ok: true, output: "x", terminate: c.name === "finish" }]),
        ),
    });
    actor.start();
    actor.send({ type: "START", task: "x" });
    expect((await finished(actor)).result).toBe("end");
    expect(seen.modelInputs).toHaveLength(2);
  });

  it("tells the model its answer was cut when a tool call was truncated, and asks again", async () => {
    const cut = { ...calls(), truncatedToolCalls: true, finishReason: "length" as const };
    const { actor, seen } = harness({ model: [cut, text("shorter")] });
    actor.start();
    actor.send({ type: "START", task: "x" });
    expect((await finished(actor)).result).toBe("shorter");
    expect(seen.modelInputs[1]?.messages.at(-1)?.content).toMatch(/cut off by the output length limit/);
    expect(seen.batches).toHaveLength(0);
  });

  it("stops `refused` on a refusal, its words the result, even when the content filter ended it or on a last call", async () => {
    const refusal = (finishReason: "stop" | "content_filter") => ({
      ...text(""),
      message: { role: "assistant" as const, content: null, refusal: "I can't help with that." },
      finishReason,
    });
    for (const turn of [refusal("stop"), refusal("content_filter")]) {
      const { actor, seen } = harness({ model: [turn, text("never asked")] });
      actor.start();
      actor.send({ type: "START", task: "x" });
      expect(await finished(actor)).toMatchObject({
        reason: "refused",
        result: "I can't help with that.",
        turns: 1,
      });
      expect(seen.modelInputs).toHaveLength(1);
    }
    const last = harness(
      { model: [calls({ name: "read_file" }), refusal("stop")] },
      { budget: { maxTurns: 1 } },
    );
    last.actor.start();
    last.actor.send({ type: "START", task: "x" });
    expect(await finished(last.actor)).toMatchObject({
      reason: "refused",
      result: "I can't help with that.",
    });
    expect(last.seen.modelInputs[1]?.withTools).toBe(false);
  });

  it("never stops `done` on a lost answer: cut off with no call to make, or failed by the server even with calls", async () => {
    const lost = [
      { ...text("Half an ans"), finishReason: "length" as const },
      {
        ...text(""),
        message: { role: "assistant" as const, content: null },
        finishReason: "content_filter" as const,
      },
      { ...calls({ name: "read_file" }), finishReason: "error" as const },
    ];
    for (const turn of lost) {
      const { actor, seen } = harness({ model: [turn, text("never asked")] });
      actor.start();
      actor.send({ type: "START", task: "x" });
      const output = await finished(actor);
      expect(output).toMatchObject({ reason: "failed", turns: 1, result: turn.message.content ?? "" });
      expect(output.error).toMatch(/finish_reason (length|content_filter|error)/);
      expect(seen.modelInputs).toHaveLength(1);
      expect(seen.batches).toHaveLength(0);
    }
  });

  it("fails with the error when the model call fails", async () => {
    const { actor } = harness({
      model: [
        () => {
          throw new Error("server on fire");
        },
      ],
    });
    actor.start();
    actor.send({ type: "START", task: "x" });
    expect(await finished(actor)).toMatchObject({ reason: "failed", error: "server on fire" });
  });
});

describe("agent machine: steering and follow-ups", () => {
  it("injects steering after the current batch, before the next model call", async () => {
    let steer: () => void = () => {};
    const { actor, seen } = harness({
      model: [calls({ name: "read_file" }), text("steered")],
      tools: (batch) => {
        steer();
        return okResults(batch);
      },
    });
    steer = () => actor.send({ type: "STEER", text: "Focus on tests." });
    actor.start();
    actor.send({ type: "START", task: "x" });
    await finished(actor);
    const messages = seen.modelInputs[1]?.messages ?? [];
    expect(roles(messages)).toEqual(["system", "user", "assistant", "tool", "user"]);
    expect(messages.at(-1)?.content).toBe("Focus on tests.");
  });

  it("calls the model again for steering that arrives while it answers", async () => {
    const { actor, seen } = harness({
      model: [
        async () => {
          actor.send({ type: "STEER", text: "also this" });
          return text("first");
        },
        text("second"),
      ],
    });
    actor.start();
    actor.send({ type: "START", task: "x" });
    expect((await finished(actor)).result).toBe("second");
    expect(seen.modelInputs[1]?.messages.at(-1)).toEqual({ role: "user", content: "also this" });
  });

  it("takes follow-ups one at a time, only when the agent would otherwise stop", async () => {
    const { actor, seen } = harness({
      model: [calls({ name: "read_file" }), text("one"), text("two"), text("three")],
    });
    actor.start();
    actor.send({ type: "START", task: "x" });
    actor.send({ type: "FOLLOW_UP", text: "then A" });
    actor.send({ type: "FOLLOW_UP", text: "then B" });
    expect((await finished(actor)).result).toBe("three");
    // The follow-up did not jump in after the tool batch.
    expect(seen.modelInputs[1]?.messages.at(-1)?.role).toBe("tool");
    expect(seen.modelInputs[2]?.messages.at(-1)).toEqual({ role: "user", content: "then A" });
    expect(seen.modelInputs[3]?.messages.at(-1)).toEqual({ role: "user", content: "then B" });
  });

  it("holds no more unread than MAX_UNREAD, in number and in characters, each queue apart; its host refuses past it with why", async () => {
    const { actor } = harness({ model: [async (_input, signal) => hang(signal)] });
    actor.start();
    actor.send({ type: "START", task: "x" });
    await reach(actor, "callingModel");
    const big = "s".repeat(MAX_TEXT);
    for (let n = 0; n < 3; n++) actor.send({ type: "STEER", text: big });
    for (let n = 0; n < MAX_UNREAD.messages + 1; n++) actor.send({ type: "FOLLOW_UP", text: `f${n}` });
    const context = actor.getSnapshot().context;
    expect(context.unread.steering).toHaveLength(2);
    expect(context.unread.followUps).toHaveLength(MAX_UNREAD.messages);
    expect(unreadRefusal(context, { type: "STEER", text: "s" })).toBe(
      `run ${context.runId} has 2 unread steering messages (65536 characters; it holds at most 16, or 65536 characters): wait for it to take them`,
    );
    expect(unreadRefusal(context, { type: "FOLLOW_UP", text: "f" })).toMatch(/ has 16 unread follow-ups \(/);
    expect(unreadRefusal(context, { type: "ABORT" })).toBeUndefined();
    actor.send({ type: "ABORT" });
    await finished(actor);
  });
});

describe("agent machine: budgets", () => {
  const forever = () => Array.from({ length: 10 }, (_, i) => calls({ name: "read_file", args: { i } }));

  it("turns: one last call without tools at exhaustion, then budget_exhausted", async () => {
    const { actor, seen } = harness(
      { model: [...forever().slice(0, 2), text("best I can do")] },
      { budget: { maxTurns: 2 } },
    );
    actor.start();
    actor.send({ type: "START", task: "x" });
    const output = await finished(actor);
    expect(output).toMatchObject({ reason: "budget_exhausted", result: "best I can do", turns: 3 });
    expect(seen.modelInputs.map((i) => i.withTools)).toEqual([true, true, false]);
    expect(seen.modelInputs[2]?.messages.at(-1)?.content).toMatch(/budget is used up \(2 turns\)/);
  });

  it("tokens: stops asking for tools once the token budget is spent", async () => {
    const { actor, seen } = harness(
      { model: [...forever().slice(0, 3), text("final")] },
      { budget: { maxTokens: 30 } },
    );
    actor.start();
    actor.send({ type: "START", task: "x" });
    const output = await finished(actor);
    expect(output.reason).toBe("budget_exhausted");
    // 15 tokens per turn: after 2 turns the budget of 30 is spent.
    expect(seen.modelInputs.map((i) => i.withTools)).toEqual([true, true, false]);
  });

  it("cost: stops once the spend reaches maxCostUsd", async () => {
    const expensive = {
      ...calls({ name: "read_file" }),
      usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, costUsd: 0.6 },
    };
    const { actor } = harness(
      { model: [expensive, { ...expensive }, text("done")] },
      { budget: { maxCostUsd: 1 } },
    );
    actor.start();
    actor.send({ type: "START", task: "x" });
    expect(await finished(actor)).toMatchObject({ reason: "budget_exhausted", turns: 3 });
  });

  it("tool calls: runs only what is left of the budget, and refuses the rest with a result", async () => {
    const big = calls(
      { name: "read_file", args: { n: 1 } },
      { name: "read_file", args: { n: 2 } },
      { name: "read_file", args: { n: 3 } },
    );
    const { actor, seen } = harness({ model: [big, text("done")] }, { budget: { maxToolCalls: 2 } });
    actor.start();
    actor.send({ type: "START", task: "x" });
    const output = await finished(actor);
    expect(seen.batches[0]).toHaveLength(2);
    expect(seen.modelInputs[1]?.messages.at(-3)?.content).toBe("read_file ok");
    expect(seen.modelInputs[1]?.messages.at(-2)?.content).toContain("the tool-call budget of 2 is used up");
    expect(output).toMatchObject({ reason: "budget_exhausted", toolCalls: 2, turns: 2 });
    expect(seen.modelInputs[1]?.withTools).toBe(false);
  });

  it("wall time: told the wall is reached, cancels the call in flight and asks for a final answer", async () => {
    const { actor, seen } = harness(
      { model: [(_input, signal) => hang(signal), text("out of time")] },
      { budget: { maxWallMs: 1000 } },
    );
    actor.start();
    actor.send({ type: "START", task: "x" });
    await reach(actor, "callingModel");
    actor.send({ type: "WALL_REACHED" });
    const output = await finished(actor);
    expect(output).toMatchObject({ reason: "budget_exhausted", result: "out of time" });
    expect(seen.signals[0]?.aborted).toBe(true);
    expect(seen.modelInputs[1]?.withTools).toBe(false);
  });

  it("wall time: a tool batch cut short leaves no call without a result", async () => {
    const turn = calls({ name: "slow" });
    const { actor, seen } = harness(
      { model: [turn, text("final")], tools: (_c, signal) => hang(signal) },
      { budget: { maxWallMs: 500 } },
    );
    actor.start();
    actor.send({ type: "START", task: "x" });
    await reach(actor, "executingTools");
    actor.send({ type: "WALL_REACHED" });
    await finished(actor);
    const messages = seen.modelInputs[1]?.messages ?? [];
    expect(roles(messages)).toEqual(["system", "user", "assistant", "tool", "user"]);
    expect(messages[3]?.content).toMatch(/outcome is unknown/);
  });
});

describe("agent machine: the hard wall", () => {
  it("gives the final answer until the wall is passed, then stops with what the model had streamed", async () => {
    const { actor, seen } = harness(
      { model: [(_i, signal) => hang(signal), (_i, signal) => hang(signal)], partial: () => "half an ans" },
      { budget: { maxWallMs: 1000 } },
    );
    actor.start();
    actor.send({ type: "START", task: "x" });
    await reach(actor, "callingModel");
    actor.send({ type: "WALL_REACHED" });
    await reach(actor, "callingModel");
    expect(seen.modelInputs[1]?.withTools).toBe(false);
    // Told again (a clock that went on after a wait): the final call it is making is not asked again.
    actor.send({ type: "WALL_REACHED" });
    expect(actor.getSnapshot().value).toBe("callingModel");
    actor.send({ type: "WALL_PASSED" });
    const output = await finished(actor);
    expect(output).toMatchObject({
      reason: "budget_exhausted",
      limit: "maxWallMs 1000",
      result: "half an ans",
    });
    expect(seen.signals[1]?.aborted).toBe(true);
    expect(seen.modelInputs).toHaveLength(2);
  });

  it("bounds a final answer begun before the wall (another budget spent) the same way", async () => {
    const { actor } = harness(
      { model: [calls({ name: "read_file" }), (_i, signal) => hang(signal)] },
      { budget: { maxTurns: 1, maxWallMs: 1000 } },
    );
    actor.start();
    actor.send({ type: "START", task: "x" });
    await reach(actor, "executingTools");
    await reach(actor, "callingModel");
    actor.send({ type: "WALL_REACHED" });
    expect(actor.getSnapshot().value).toBe("callingModel");
    actor.send({ type: "WALL_PASSED" });
    expect(await finished(actor)).toMatchObject({ reason: "budget_exhausted", limit: "maxWallMs 1000" });
  });

  it("cuts tools still running at the wall; past it, without streamed text the last said is kept", async () => {
    const turn = { ...calls({ name: "slow" }) };
    turn.message = { ...turn.message, content: "Looking into it." };
    const { actor, seen } = harness(
      { model: [turn, (_i, signal) => hang(signal)], tools: (_c, signal) => hang(signal) },
      { budget: { maxWallMs: 60_000 } },
    );
    actor.start();
    actor.send({ type: "START", task: "x" });
    await reach(actor, "executingTools");
    actor.send({ type: "WALL_REACHED" });
    await reach(actor, "callingModel");
    expect(seen.signals[1]?.aborted).toBe(true);
    actor.send({ type: "WALL_PASSED" });
    expect(await finished(actor)).toMatchObject({ reason: "budget_exhausted", result: "Looking into it." });
  });
});

describe("agent machine: loop detection", () => {
  it("nudges after the same call three times, then forces a final answer", async () => {
    const same = () => calls({ name: "read_file", args: { path: "a" } });
    const { actor, seen } = harness({
      model: [same(), same(), same(), same(), same(), same(), text("giving up")],
    });
    actor.start();
    actor.send({ type: "START", task: "x" });
    const output = await finished(actor);
    expect(output).toMatchObject({ reason: "loop_detected", result: "giving up" });
    expect(seen.modelInputs[3]?.messages.at(-1)?.content).toMatch(
      /repeating yourself \(the same call three times: read_file\(\{"path":"a"\}\)\)/,
    );
    expect(seen.modelInputs.map((i) => i.withTools)).toEqual([true, true, true, true, true, true, false]);
    expect(seen.modelInputs[6]?.messages.at(-1)?.content).toMatch(/still repeating yourself/);
  });

  it("spots a cycle of two different calls", async () => {
    const a = () => calls({ name: "read_file", args: { path: "a" } });
    const b = () => calls({ name: "read_file", args: { path: "b" } });
    const { actor, seen } = harness({ model: [a(), b(), a(), b(), text("ok")] });
    actor.start();
    actor.send({ type: "START", task: "x" });
    await finished(actor);
    expect(seen.modelInputs[4]?.messages.at(-1)?.content).toMatch(/a cycle of 2 calls repeated/);
  });

  it("forgets the history after a write", async () => {
    const same = () => calls({ name: "read_file", args: { path: "a" } });
    const write = calls({ name: "write_file", args: { path: "a" }, effect: "write" });
    const { actor, seen } = harness({ model: [same(), same(), write, same(), same(), text("ok")] });
    actor.start();
    actor.send({ type: "START", task: "x" });
    expect((await finished(actor)).reason).toBe("done");
    expect(
      seen.modelInputs.every(
        (i) => !i.messages.some((m) => m.role === "user" && m.content.includes("repeating")),
      ),
    ).toBe(true);
  });
});

describe("agent machine: context", () => {
  it("compacts before a model call when the host says the context is too full", async () => {
    let full = true;
    const { actor, states, seen } = harness({
      model: [text("after compaction")],
      needsCompaction: () => {
        const answer = full;
        full = false;
        return answer;
      },
    });
    actor.start();
    actor.send({ type: "START", task: "x" });
    const output = await finished(actor);
    expect(states).toEqual(["idle", "compacting", "callingModel", "stopped"]);
    expect(seen.compactions[0]?.reason).toBe("threshold");
    expect(seen.modelInputs[0]?.messages.at(-1)?.content).toBe("summary");
    expect(output.usage.inputTokens).toBe(110);
  });

  it("compacts and retries once when the provider says the context is too long", async () => {
    const tooLong = () => {
      const error = new Error("maximum context length");
      error.name = "ContextLengthExceededError";
      throw error;
    };
    const { actor, seen } = harness({ model: [tooLong, text("fits now")] });
    actor.start();
    actor.send({ type: "START", task: "x" });
    expect((await finished(actor)).result).toBe("fits now");
    expect(seen.compactions.map((c) => c.reason)).toEqual(["context_length"]);

    const twice = harness({ model: [tooLong, tooLong] });
    twice.actor.start();
    twice.actor.send({ type: "START", task: "x" });
    expect(await finished(twice.actor)).toMatchObject({ reason: "failed", error: "maximum context length" });
  });
});
