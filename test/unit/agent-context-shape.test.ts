import { setFlagsFromString } from "node:v8";
import { expect, it } from "vitest";
import { createActor, fromPromise } from "xstate";
import { agentMachine } from "../../src/machines/agent-machine.js";
import type { ModelTurn } from "../../src/machines/agent-types.js";

/*
 * XState's `assign` copies an actor's whole context with `Object.assign({}, context, update)` at
 * every step. V8 makes such a copy of an object with 20 or more properties a dictionary, and copying
 * a dictionary again costs several times as much (6.8 µs a copy against under one, 21,000 copies in
 * the scale bench's 1,000 subagents). The agent's context keeps to fewer fields so that every
 * copy stays an object of fast properties: V8 is asked, at each state an agent goes through.
 */
setFlagsFromString("--allow-natives-syntax");
const hasFastProperties = new Function("object", "return %HasFastProperties(object)") as (
  object: object,
) => boolean;

const turn = (message: ModelTurn["message"], plan: ModelTurn["plan"] = []): ModelTurn => ({
  message,
  finishReason: plan.length > 0 ? "tool_calls" : "stop",
  usage: { inputTokens: 10, outputTokens: 2, cachedInputTokens: 0, costUsd: 0 },
  model: "m",
  truncatedToolCalls: false,
  plan,
});

it("an agent's context stays an object of fast properties through every state it takes, the budget's last call included", async () => {
  let turns = 0;
  const machine = agentMachine.provide({
    actors: {
      callModel: fromPromise(async () => {
        turns++;
        if (turns === 1)
          return turn(
            {
              role: "assistant",
              content: null,
              tool_calls: [{ id: "c1", type: "function", function: { name: "read_file", arguments: "{}" } }],
            },
            [{ id: "c1", name: "read_file", arguments: "{}", effect: "read", decision: "allow" }],
          );
        return turn({ role: "assistant", content: "done" });
      }),
      runTools: fromPromise(async () => ({
        results: [{ id: "c1", outcome: { ok: true, content: "text", details: {} } }],
      })),
    },
  } as never);
  const actor = createActor(machine, {
    input: { runId: "r", agentId: "a", name: "n", systemPrompt: "s", budget: { maxTurns: 2 } },
  });
  const seen: Array<{ state: string; fast: boolean; keys: number }> = [];
  actor.subscribe((snapshot) => {
    const { context } = snapshot;
    seen.push({
      state: String(snapshot.value),
      fast: hasFastProperties(context),
      keys: Object.keys(context).length,
    });
  });
  actor.start();
  actor.send({ type: "START", task: "go" });
  actor.send({ type: "STEER", text: "and this" });
  actor.send({ type: "FOLLOW_UP", text: "then that" });
  await new Promise<void>((resolve) => actor.subscribe({ complete: resolve }));

  const states = new Set(seen.map((s) => s.state));
  expect(states).toContain("executingTools");
  expect(states).toContain("stopped");
  // The budget's two turns ran out: the last call was made with `finalizing`, the fullest context.
  expect(actor.getSnapshot().output?.reason).toBe("budget_exhausted");
  for (const step of seen)
    expect(step, `in ${step.state}, ${step.keys} fields`).toMatchObject({ fast: true });
});
