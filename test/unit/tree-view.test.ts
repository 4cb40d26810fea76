import { describe, expect, it } from "vitest";
import { RunTreeBuilder } from "../../src/actors/run-tree.js";
import { renderFrame, type ViewState } from "../../src/cli/tree-view.js";
import { makeEnvelope } from "../../src/events/envelope.js";

const event = (agentId: string, seq: number, type: string, data: unknown, parentId?: string) =>
  makeEnvelope({ runId: "run-1", agentId, seq, type, data, ...(parentId ? { parentId } : {}) });

function tree(children: number) {
  const builder = new RunTreeBuilder();
  builder.apply(
    event("lead", 0, "agent.started", {
      name: "lead",
      model: "m",
      task: "Find the port",
      budget: { maxTurns: 10 },
      depth: 0,
    }),
  );
  for (let i = 0; i < children; i++)
    builder.apply(
      event(
        `child-${i}`,
        0,
        "agent.started",
        { name: `child${i}`, model: "m", task: "t", budget: {}, depth: 1 },
        "lead",
      ),
    );
  const lead = builder.apply(
    event("lead", 1, "model.delta", {
      text: "The port is set in app.js on line one, and it needs root to bind",
    }),
  );
  return { builder, lead };
}

describe("the observer's frame", () => {
  it("fits the screen: no line wider, no more lines, the keys kept, and the text cut at a word", () => {
    const { builder, lead } = tree(30);
    const view = {
      header: "troupe observe · test",
      selected: undefined,
      speaker: lead,
      status: "warning: slow",
    };
    const frame = renderFrame(builder, view, { columns: 40, rows: 12 });
    expect(frame.length).toBeLessThanOrEqual(12);
    for (const line of frame) expect([...line].length).toBeLessThanOrEqual(40);
    expect(frame.at(-1)).toContain("q quit");
    expect(frame).toContain("warning: slow");
    // The tree scrolled: the rest is said to be out of view.
    expect(frame.some((line) => /↓ \d+ more/.test(line))).toBe(true);
    const said = frame.find((line) => line.startsWith("lead: "));
    expect(said).toBe("lead: …one, and it needs root to bind");
    expect(said?.endsWith("to bind")).toBe(true);
  });

  it("keeps each agent's tokens and cost in view at 60 columns: the short row, no bars", () => {
    const builder = new RunTreeBuilder();
    builder.apply(
      event("coder-41954jf7", 0, "agent.started", {
        name: "coder",
        model: "m",
        task: "What is in this project?",
        budget: { maxTurns: 50, maxTokens: 50_000 },
        depth: 0,
      }),
    );
    builder.apply(
      event("coder-41954jf7", 1, "usage.updated", {
        usage: { inputTokens: 300, outputTokens: 8, cachedInputTokens: 0, costUsd: 0.0012 },
        toolCalls: 0,
        turns: 1,
      }),
    );
    const view = { header: "troupe observe", selected: undefined, speaker: undefined, status: undefined };
    const narrow = renderFrame(builder, view, { columns: 60, rows: 12 });
    const row = narrow.find((line) => line.includes("coder (coder-41954jf7)"));
    expect(row).toBe("› coder (coder-41954jf7) idle t1/50 308/50k tok $0.0012".replace("› ", "  "));
    // Wide enough, the bars and aligned columns as before.
    const wide = renderFrame(builder, view, { columns: 120, rows: 12 });
    expect(wide.find((line) => line.includes("coder ("))).toContain("tokens [");
  });

  it("shows the speaking agent's reasoning above what it says, and forgets it when its next turn starts", () => {
    const builder = new RunTreeBuilder();
    builder.apply(
      event("lead", 0, "agent.started", { name: "lead", model: "m", task: "t", budget: {}, depth: 0 }),
    );
    builder.apply(event("lead", 1, "state.changed", { from: "idle", to: "callingModel" }));
    builder.apply(event("lead", 2, "model.reasoning", { text: "The port must be in app.js; " }));
    const lead = builder.apply(event("lead", 3, "model.reasoning", { text: "read it first." }));
    const view = { header: "h", selected: undefined, speaker: lead, status: undefined };
    const thinking = renderFrame(builder, view, { columns: 80, rows: 12 });
    expect(thinking).toContain("lead: The port must be in app.js; read it first.");

    builder.apply(event("lead", 4, "model.delta", { text: "Reading app.js." }));
    const speaking = renderFrame(builder, view, { columns: 80, rows: 12 });
    const at = speaking.indexOf("lead: The port must be in app.js; read it first.");
    expect(at).toBeGreaterThan(0);
    expect(speaking[at + 1]).toBe("lead: Reading app.js.");

    builder.apply(event("lead", 5, "state.changed", { from: "executingTools", to: "callingModel" }));
    expect(lead?.reasoning).toBe("");
    expect(renderFrame(builder, view, { columns: 80, rows: 12 }).some((l) => l.startsWith("lead: "))).toBe(
      false,
    );
  });

  it("shows each agent's context as a bar, from its events alone, and its fall after compaction", () => {
    const { builder } = tree(1);
    builder.apply(event("lead", 2, "context.usage", { tokens: 65_000, contextWindow: 100_000, percent: 65 }));
    builder.apply(
      event("child-0", 1, "context.usage", { tokens: 800, contextWindow: 8000, percent: 10 }, "lead"),
    );
    const view = { header: "h", selected: undefined, speaker: undefined, status: undefined };
    const lineOf = (name: string) =>
      renderFrame(builder, view, { columns: 200, rows: 20 }).find((line) => line.includes(`${name} (`));
    expect(lineOf("lead")).toContain("ctx [███████░░░] 65%");
    expect(lineOf("child0")).toContain("ctx [█░░░░░░░░░] 10%");
    builder.apply(
      event("lead", 3, "context.compacted", {
        tokensBefore: 65_000,
        tokensAfter: 20_000,
        pruned: 2,
        summarized: 4,
        usage: { inputTokens: 900, outputTokens: 100, cachedInputTokens: 0, costUsd: 0.001 },
      }),
    );
    expect(lineOf("lead")).toContain("ctx [██░░░░░░░░] 20%");
  });

  it("shows a running call's progress beside its name, the server's words on one line, and drops it when the call ends", () => {
    const { builder } = tree(0);
    builder.apply(event("lead", 2, "tool.started", { callId: "c1", name: "docs__index" }));
    builder.apply(
      event("lead", 3, "tool.progress", {
        callId: "c1",
        name: "docs__index",
        progress: 2,
        total: 5,
        message: "reading\nsrc/\x1b[31m",
      }),
    );
    const view = { header: "h", selected: undefined, speaker: undefined, status: undefined };
    const lineOf = () =>
      renderFrame(builder, view, { columns: 200, rows: 20 }).find((line) => line.includes("lead ("));
    expect(lineOf()).toContain("▸ docs__index 2/5 · reading\\nsrc/\\e[31m");
    builder.apply(
      event("lead", 4, "tool.finished", { callId: "c1", name: "docs__index", ok: true, durationMs: 9 }),
    );
    expect(lineOf()).not.toContain("docs__index");
  });
});

describe("the observer's approval panel", () => {
  /** The lead waiting on a shell command, and the record `a` would answer. */
  function waiting(command: string) {
    const { builder, lead } = tree(0);
    builder.apply(
      event("lead", 2, "approval.requested", { callId: "call_1", name: "shell", detail: command }),
    );
    const record = {
      v: 1 as const,
      request: {
        runId: "run-1",
        agentId: "lead",
        callId: "call_1",
        tool: "shell",
        arguments: "{}",
        effect: "execute" as const,
        detail: command,
        paths: [],
      },
      requestId: "r1",
      nonce: "n",
      createdAt: 0,
      status: "pending" as const,
      expiresAt: 0,
    };
    const view: ViewState = {
      header: "troupe observe · test",
      selected: undefined,
      speaker: lead,
      status: undefined,
    };
    return { builder, view, requests: { record: () => record, watchOnly: false } };
  }

  it("wraps a long line whole, blanks counted, and offers allow for what it showed whole", () => {
    const line = `echo ${"x".repeat(150)}; echo end`;
    const { builder, view, requests } = waiting(`ls${" ".repeat(300)}; ${line}`);
    const frame = renderFrame(builder, view, { columns: 60, rows: 30 }, requests);
    for (const shown of frame) expect([...shown].length).toBeLessThanOrEqual(60);
    const body = frame.filter((shown) => shown.startsWith("  │ ")).map((shown) => shown.slice(4));
    expect(body.join("")).toBe(`"ls␠×300; ${line}"`);
    expect(frame).toContain("  [a] allow  [d] deny");
    expect(view.allowable).toBe("run-1.lead.call_1");
  });

  it("shows the first lines of a request taller than the screen, without allow, and says where to see it whole", () => {
    const command = Array.from({ length: 40 }, (_, i) => `echo ${i + 1}`).join("\n");
    const { builder, view, requests } = waiting(command);
    const frame = renderFrame(builder, view, { columns: 80, rows: 24 }, requests);
    expect(frame.length).toBeLessThanOrEqual(24);
    expect(frame.join("\n")).not.toContain("[a] allow");
    expect(
      frame.some((shown) => shown.includes("not all shown: see it whole with troupe approve call_1")),
    ).toBe(true);
    expect(frame.some((shown) => /… \d+ more lines on this screen/.test(shown))).toBe(true);
    expect(view.allowable).toBeUndefined();
  });
});

describe("an agent resumed after it stopped", () => {
  it("is shown moving again, not stopped for its old reason, and its new approval is pending", () => {
    const { builder } = tree(0);
    const node = builder.apply(
      event("lead", 2, "agent.stopped", {
        reason: "aborted",
        result: "",
        usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, costUsd: 0 },
        turns: 1,
        toolCalls: 0,
        total: { usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, costUsd: 0 }, toolCalls: 0 },
      }),
    );
    expect(node?.reason).toBe("aborted");
    builder.apply(event("lead", 3, "state.changed", { from: "stopped", to: "callingModel" }));
    builder.apply(event("lead", 4, "state.changed", { from: "callingModel", to: "awaitingApproval" }));
    expect(node?.reason).toBeUndefined();
    expect(node?.state).toBe("awaitingApproval");
  });
});
