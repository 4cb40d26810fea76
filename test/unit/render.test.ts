import { describe, expect, it } from "vitest";
import { humanRenderer } from "../../src/cli/render.js";
import { makeEnvelope } from "../../src/events/envelope.js";

/** A stream that keeps what is written to it, a terminal or not. */
function sink(isTTY: boolean) {
  let written = "";
  const stream = {
    isTTY,
    columns: 80,
    write: (text: string) => {
      written += text;
      return true;
    },
  } as unknown as typeof process.stdout & typeof process.stderr;
  return { stream, text: () => written };
}

let seq = 0;
const event = (type: string, data: unknown, agentId = "lead") => ({
  envelope: makeEnvelope({ runId: "run-1", agentId, seq: seq++, type, data }),
});

const stopped = {
  reason: "done",
  result: "It says alpha.",
  usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, costUsd: 0 },
  turns: 2,
  toolCalls: 1,
  total: { usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, costUsd: 0 }, toolCalls: 1 },
};

/** A two-turn run whose model reasons before each answer, and a subagent that reasons too. */
function play(colour: boolean, tty: boolean) {
  const out = sink(tty);
  const err = sink(tty);
  const renderer = humanRenderer(() => "lead", out.stream, err.stream, colour);
  for (const e of [
    event("model.reasoning", { text: "The user wants a.txt. " }),
    event("model.reasoning", { text: "I will read it." }),
    event("model.delta", { text: "Looking." }),
    event("tool.requested", { callId: "c1", name: "read_file", arguments: '{"path":"a.txt"}' }),
    event("model.reasoning", { text: "A child thinks." }, "child"),
    event("model.reasoning", { text: "It says alpha.\n" }),
    event("model.reasoning", { text: "Answer now." }),
    event("model.delta", { text: "It says alpha." }),
    event("agent.stopped", stopped),
  ])
    renderer.event(e);
  renderer.close();
  return { out: out.text(), err: err.text() };
}

describe("troupe run's human output", () => {
  it("shows the root agent's reasoning dimmed on stderr when colours are on, its answer alone on stdout", () => {
    const { out, err } = play(true, true);
    expect(out).toBe('Looking.\n▸ read_file {"path":"a.txt"}\nIt says alpha.\n');
    expect(err).toBe(
      [
        "\x1b[2mThe user wants a.txt. \x1b[22m\x1b[2mI will read it.\x1b[22m\n",
        "\x1b[2mIt says alpha.\n\x1b[22m\x1b[2mAnswer now.\x1b[22m\n",
        "✓ done · 2 turns · 1 tool call · 2 tokens\n",
      ].join(""),
    );
    expect(err).not.toContain("A child thinks");
  });

  it("without colours, begins each stretch of reasoning with `thinking: ` instead", () => {
    const { out, err } = play(false, false);
    expect(out).toBe('Looking.\n▸ read_file {"path":"a.txt"}\nIt says alpha.\n');
    expect(err).toBe(
      "thinking: The user wants a.txt. I will read it.\nthinking: It says alpha.\nAnswer now.\n✓ done · 2 turns · 1 tool call · 2 tokens\n",
    );
  });

  it("shows a loaded skill in one line: how, its files and what it pre-approves", () => {
    const out = sink(false);
    const err = sink(false);
    const renderer = humanRenderer(() => "lead", out.stream, err.stream, false);
    renderer.event(
      event("skill.loaded", { name: "deploy", by: "model", files: 2, preApproved: ["write_file"] }),
    );
    renderer.event(event("skill.loaded", { name: "notes", by: "user", files: 1 }, "child"));
    renderer.close();
    expect(out.text()).toBe(
      "· skill deploy loaded · 2 files · pre-approves write_file\n[child] · skill notes loaded as asked · 1 file\n",
    );
  });

  it("says when the context crosses a level, what compaction cost, and shows the context while it thinks", async () => {
    const out = sink(true);
    const err = sink(true);
    const renderer = humanRenderer(() => "lead", out.stream, err.stream, false);
    renderer.event(event("state.changed", { from: "idle", to: "callingModel" }));
    renderer.event(event("context.usage", { tokens: 3000, contextWindow: 4000, percent: 75 }));
    renderer.event(
      event("context.warning", { level: "warning", tokens: 3000, contextWindow: 4000, percent: 75 }),
    );
    // The spinner draws on a timer: a frame or two.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(err.text()).toContain("thinking… · ctx [████████░░] 75%");
    renderer.event(
      event("context.compacted", {
        tokensBefore: 3400,
        tokensAfter: 900,
        pruned: 1,
        summarized: 3,
        usage: { inputTokens: 200, outputTokens: 20, cachedInputTokens: 0, costUsd: 0.00024 },
      }),
    );
    renderer.event(
      event("context.warning", { level: "critical", tokens: 33, contextWindow: 40, percent: 83 }, "kid"),
    );
    renderer.close();
    expect(out.text()).toBe(
      [
        "· context warning: ctx [████████░░] 75% (3000 of 4000 tokens)",
        "· context compacted: 3400 → 900 tokens (the summary took 220 tokens, $0.0002)",
        "[kid] · context critical: ctx [████████░░] 83% (33 of 40 tokens)",
        "",
      ].join("\n"),
    );
  });

  it("shows a running call's progress on the spinner line, the server's message with its control characters visible", async () => {
    const out = sink(true);
    const err = sink(true);
    const renderer = humanRenderer(() => "lead", out.stream, err.stream, false);
    renderer.event(event("state.changed", { from: "callingModel", to: "executingTools" }));
    renderer.event(event("tool.started", { callId: "c1", name: "everything__index" }));
    renderer.event(
      event("tool.progress", {
        callId: "c1",
        name: "everything__index",
        progress: 3,
        total: 6,
        message: "indexing\x1b[2J\nsrc/",
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(err.text()).toContain("everything__index 3/6 · indexing\\e[2J\\nsrc/");
    expect(err.text()).not.toContain("\x1b[2J");
    renderer.event(
      event("tool.finished", { callId: "c1", name: "everything__index", ok: true, durationMs: 5 }),
    );
    const drawn = err.text().length;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(err.text().length).toBe(drawn);
    renderer.close();
  });
});
