import { describe, expect, it } from "vitest";
import { z } from "zod";
import { decideCall } from "../../src/approvals/decide-call.js";
import { mcpServerSchema } from "../../src/config/mcp-server-schema.js";
import { MISSING_RESULT, repairToolPairs } from "../../src/context/repair.js";
import { callSignature, detectLoop } from "../../src/machines/loop-detection.js";
import type { ChatMessage } from "../../src/model/types.js";
import { Redactor } from "../../src/safety/redact.js";
import { resultContent } from "../../src/tools/call-outcome.js";
import { mcpTool } from "../../src/tools/mcp/mcp-tool.js";
import { planCalls } from "../../src/tools/plan.js";
import { type BatchJournal, runBatch } from "../../src/tools/run-batch.js";
import { defineTool, ToolRegistry } from "../../src/tools/tool.js";

const log: string[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const registry = new ToolRegistry([
  defineTool({
    name: "read",
    description: "Reads a path.",
    effect: "read",
    parameters: z.object({ path: z.string(), limit: z.number().int().optional() }),
    async execute({ path }) {
      log.push(`start read ${path}`);
      await sleep(50);
      log.push(`end read ${path}`);
      return { ok: true, output: `contents of ${path}` };
    },
  }),
  defineTool({
    name: "write",
    description: "Writes.",
    effect: "write",
    parameters: z.object({ path: z.string() }),
    async execute({ path }) {
      log.push(`start write ${path}`);
      await sleep(20);
      log.push(`end write ${path}`);
      return { ok: true, output: "written" };
    },
  }),
  defineTool({
    name: "boom",
    description: "Throws.",
    effect: "read",
    parameters: z.object({}),
    execute() {
      throw new Error("disk on fire");
    },
  }),
  defineTool({
    name: "slow",
    description: "Takes long.",
    effect: "read",
    parameters: z.object({}),
    timeoutMs: 50,
    execute: (_args, { signal }) =>
      new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error("stopped")))),
  }),
]);
const all = new Set(registry.names());
const call = (name: string, args: unknown, id = `${name}-${JSON.stringify(args)}`) => ({
  id,
  type: "function" as const,
  function: { name, arguments: typeof args === "string" ? args : JSON.stringify(args) },
});

describe("planCalls", () => {
  it("refuses an unknown tool, listing the tools available", () => {
    const [planned] = planCalls([call("delete_everything", {})], registry, all, "yolo");
    expect(planned?.decision).toBe("deny");
    expect(resultContent(planned?.result ?? { ok: true, output: "" })).toBe(
      'error: unknown tool "delete_everything"\nhow to recover: call one of the tools available: boom, read, slow, write',
    );
  });

  it("refuses a registered tool this agent is not allowed, at invoke time", () => {
    const [planned] = planCalls([call("write", { path: "a" })], registry, new Set(["read"]), "yolo");
    expect(planned?.result?.error).toBe('unknown tool "write"');
    expect(planned?.result?.recoveryHint).toContain("read");
  });

  it("names the field and the expected shape when arguments are invalid", () => {
    const [bad, notJson] = planCalls(
      [call("read", { path: 7 }), call("read", "{path:")],
      registry,
      all,
      "ask",
    );
    expect(bad?.result?.error).toBe(
      "invalid arguments for read: path: Invalid input: expected string, received number",
    );
    expect(bad?.result?.recoveryHint).toContain('"path":{"type":"string"}');
    expect(bad?.result?.recoveryHint).toContain('"required":["path"]');
    expect(notJson?.result?.error).toBe("invalid arguments for read: the arguments are not valid JSON");
  });

  it.each([
    ["ask", "read", "allow"],
    ["ask", "write", "ask"],
    ["ask", "execute", "ask"],
    ["auto-edit", "write", "allow"],
    ["auto-edit", "execute", "ask"],
    ["never-ask", "write", "deny"],
    ["never-ask", "read", "allow"],
    ["yolo", "execute", "allow"],
  ] as const)("policy %s on a %s tool: %s", (policy, effect, expected) => {
    const decided = decideCall(
      { tool: "t", effect, sandboxed: false },
      { policy, sandbox: { network: false, readOnly: false } },
    );
    expect(decided.decision).toBe(expected);
  });

  it("plans a denial under never-ask as an error result", () => {
    const [planned] = planCalls([call("write", { path: "a" })], registry, all, "never-ask");
    expect(planned).toMatchObject({ decision: "deny", effect: "write" });
    expect(planned?.result?.error).toContain('under the "never-ask" policy');
  });
});

describe("runBatch", () => {
  const context = { runId: "r", agentId: "a", workspace: "/tmp" };

  it("runs consecutive reads in parallel and writes alone, in order", async () => {
    log.length = 0;
    const planned = planCalls(
      [
        call("read", { path: "a" }),
        call("read", { path: "b" }),
        call("write", { path: "c" }),
        call("read", { path: "d" }),
      ],
      registry,
      all,
      "yolo",
    );
    const started = Date.now();
    const results = await runBatch(planned, { registry, context, signal: new AbortController().signal });
    expect(Date.now() - started).toBeLessThan(50 + 20 + 50 + 60);
    expect(log).toEqual([
      "start read a",
      "start read b",
      "end read a",
      "end read b",
      "start write c",
      "end write c",
      "start read d",
      "end read d",
    ]);
    expect(Object.keys(results)).toHaveLength(4);
    expect(results[planned[0]?.id ?? ""]).toEqual({
      content: '<tool_output source="read">\ncontents of a\n</tool_output>',
      shown: "contents of a",
      details: { ok: true },
    });
  });

  it("gives the model the output wrapped with its tags escaped, and people what the tool said", async () => {
    const said = 'the file holds <tool_output source="x">hi</tool_output>';
    const journaled: unknown[] = [];
    const journal: BatchJournal = {
      get: async () => undefined,
      started: async () => {},
      finished: async (_call, result) => void journaled.push(result),
    };
    const planned = planCalls([call("read", { path: "x" })], registry, all, "yolo");
    const tools = new ToolRegistry([
      defineTool({
        name: "read",
        description: "Reads a path.",
        effect: "read",
        parameters: z.object({ path: z.string() }),
        execute: async () => ({ ok: true, output: said }),
      }),
    ]);
    const results = await runBatch(planned, {
      registry: tools,
      context,
      journal,
      signal: new AbortController().signal,
    });
    const outcome = results[planned[0]?.id ?? ""];
    expect(outcome?.content).toContain('the file holds &lt;tool_output source="x">hi&lt;/tool_output>');
    expect(outcome?.shown).toBe(said);
    // The journal keeps the model's copy only: the text is not stored twice.
    expect(journaled).toEqual([{ content: outcome?.content, details: { ok: true } }]);
  });

  it("turns a throw and a timeout into error results, and reports start and finish", async () => {
    const events: string[] = [];
    const planned = planCalls([call("boom", {}), call("slow", {})], registry, all, "yolo");
    const results = await runBatch(planned, {
      registry,
      context,
      signal: new AbortController().signal,
      observer: {
        onStart: (c) => events.push(`start ${c.name}`),
        onFinish: (c, r) => events.push(`finish ${c.name} ${r.details.ok}`),
      },
    });
    expect(results[planned[0]?.id ?? ""]?.details.error).toBe("boom failed: disk on fire");
    expect(results[planned[1]?.id ?? ""]?.details.error).toBe("slow timed out after 50 ms");
    expect(events.sort()).toEqual(["finish boom false", "finish slow false", "start boom", "start slow"]);
  });

  it("a call's progress restarts its timeout up to its total, and observers hear of it at most every 250 ms", async () => {
    /** Reports progress every 30 ms for `ms`, the last report reaching its total. */
    const ticking = (name: string, ms: number, maxTotalTimeoutMs?: number) =>
      defineTool({
        name,
        description: "Reports progress.",
        effect: "read",
        parameters: z.object({}),
        timeoutMs: 100,
        maxTotalTimeoutMs,
        async execute(_args, { progress, signal }) {
          const steps = Math.ceil(ms / 30);
          for (let step = 1; step <= steps && !signal.aborted; step++) {
            await sleep(30);
            progress?.({
              progress: step,
              total: steps,
              message: `step ${step} with s3cret-pass-phrase ${"x".repeat(300)}`,
            });
          }
          return { ok: true, output: "done" };
        },
      });
    const tools = new ToolRegistry([
      ticking("resets", 400, 1000),
      ticking("fixed", 400),
      ticking("endless", 5000, 300),
    ]);
    const reports: Array<{ name: string; progress: number; message?: string | undefined; at: number }> = [];
    const planned = planCalls(
      [call("resets", {}), call("fixed", {}), call("endless", {})],
      tools,
      new Set(tools.names()),
      "yolo",
    );
    const results = await runBatch(planned, {
      registry: tools,
      context,
      signal: new AbortController().signal,
      redactor: new Redactor(["s3cret-pass-phrase"]),
      observer: {
        onProgress: (c, { progress, message }) =>
          reports.push({ name: c.name, progress, message, at: performance.now() }),
      },
    });
    expect(results["resets-{}"]?.details.ok).toBe(true);
    expect(results["fixed-{}"]?.details.error).toBe("fixed timed out after 100 ms");
    expect(results["endless-{}"]?.details.error).toBe("endless timed out after 300 ms in all");
    const resets = reports.filter((r) => r.name === "resets");
    // Of 14 reports in 420 ms: the first, then one per 250 ms at most, and the last (its total).
    expect(resets.at(0)?.progress).toBe(1);
    expect(resets.at(-1)?.progress).toBe(14);
    expect(resets.length).toBeLessThan(6);
    const told = resets.slice(0, -1);
    for (const [i, report] of told.entries())
      if (i > 0) expect(report.at - (told[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(249);
    expect(resets[0]?.message).toMatch(/^step 1 with \[REDACTED\] x+…$/);
    expect(resets[0]?.message?.length).toBeLessThanOrEqual(201);
  });

  it("after a crash, runs again a started call of an idempotent tool (MCP's idempotentHint) and of no other", async () => {
    const calls: string[] = [];
    const server = {
      server: "store",
      config: mcpServerSchema.parse({ command: "store", timeoutMs: 1000 }),
      call: async (name: string) => {
        calls.push(name);
        return { content: [{ type: "text", text: `${name} done` }] };
      },
    };
    const mcp = new ToolRegistry([
      mcpTool(server, { name: "put", inputSchema: {}, annotations: { idempotentHint: true } }, "/tmp"),
      mcpTool(server, { name: "append", inputSchema: {} }, "/tmp"),
    ]);
    // Both were started by a host that then died.
    const journal: BatchJournal = {
      get: async () => ({ status: "started" }),
      started: async () => {},
      finished: async () => {},
    };
    const planned = planCalls(
      [call("store__put", {}), call("store__append", {})],
      mcp,
      new Set(mcp.names()),
      "yolo",
    );
    const results = await runBatch(planned, {
      registry: mcp,
      context,
      signal: new AbortController().signal,
      journal,
    });
    expect(calls).toEqual(["put"]);
    expect(results["store__put-{}"]?.details.ok).toBe(true);
    expect(results["store__append-{}"]?.details.error).toMatch(/outcome is unknown/);
  });

  it("holds an MCP tool that only reads to at most once: journaled as remote, a started call not made again", async () => {
    const calls: string[] = [];
    const server = {
      server: "meter",
      config: mcpServerSchema.parse({ command: "meter", timeoutMs: 1000, readOnly: true }),
      call: async (name: string) => {
        calls.push(name);
        return { content: [{ type: "text", text: `${name} done` }] };
      },
    };
    const mcp = new ToolRegistry([mcpTool(server, { name: "quote", inputSchema: {} }, "/tmp")]);
    const planned = planCalls([call("meter__quote", {})], mcp, new Set(mcp.names()), "never-ask");
    expect(planned[0]).toMatchObject({ effect: "read", remote: true, decision: "allow" });
    const journal: BatchJournal = {
      get: async () => ({ status: "started" }),
      started: async () => {},
      finished: async () => {},
    };
    const results = await runBatch(planned, {
      registry: mcp,
      context,
      signal: new AbortController().signal,
      journal,
    });
    expect(calls).toEqual([]);
    expect(results["meter__quote-{}"]?.details.error).toMatch(/outcome is unknown/);
  });

  it("aborts running tools through their signal", async () => {
    const controller = new AbortController();
    const planned = planCalls([call("slow", {})], registry, all, "yolo");
    const slowTool = registry.get("slow");
    if (slowTool) slowTool.timeoutMs = 10_000;
    setTimeout(() => controller.abort(), 30);
    const started = Date.now();
    const results = await runBatch(planned, { registry, context, signal: controller.signal });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(results[planned[0]?.id ?? ""]?.details.error).toContain("stopped");
  });

  it("aborts a dozen reads running at once, with no listener warning on the turn's signal", async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on("warning", onWarning);
    try {
      const controller = new AbortController();
      const planned = planCalls(
        Array.from({ length: 12 }, (_, i) => call("slow", {}, `slow-${i}`)),
        registry,
        all,
        "yolo",
      );
      const slowTool = registry.get("slow");
      if (slowTool) slowTool.timeoutMs = 10_000;
      setTimeout(() => controller.abort(), 30);
      const results = await runBatch(planned, { registry, context, signal: controller.signal });
      expect(Object.values(results).map((outcome) => outcome.details.error)).toEqual(
        Array.from({ length: 12 }, () => "slow failed: stopped"),
      );
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
      expect(warnings).toEqual([]);
    } finally {
      process.off("warning", onWarning);
    }
  });
});

describe("repairToolPairs", () => {
  const assistant = (...ids: string[]): ChatMessage => ({
    role: "assistant",
    content: null,
    tool_calls: ids.map((id) => ({ id, type: "function", function: { name: "read", arguments: "{}" } })),
  });
  const tool = (id: string): ChatMessage => ({ role: "tool", tool_call_id: id, content: `result ${id}` });

  it("leaves a sound history alone (the same array)", () => {
    const messages: ChatMessage[] = [
      { role: "user", content: "x" },
      assistant("a", "b"),
      tool("a"),
      tool("b"),
    ];
    expect(repairToolPairs(messages)).toBe(messages);
  });

  it("adds an outcome-unknown result for a call that has none, and drops a result with no call", () => {
    const messages: ChatMessage[] = [
      { role: "user", content: "x" },
      tool("ghost"),
      assistant("a", "b"),
      tool("b"),
      { role: "user", content: "next" },
    ];
    expect(repairToolPairs(messages)).toEqual([
      { role: "user", content: "x" },
      assistant("a", "b"),
      { role: "tool", tool_call_id: "a", content: MISSING_RESULT },
      tool("b"),
      { role: "user", content: "next" },
    ]);
  });
});

describe("loop detection", () => {
  it("counts the same call with its keys in any order as the same", () => {
    expect(callSignature("read", '{"b":1,"a":2}')).toBe(callSignature("read", '{"a":2,"b":1}'));
  });

  it.each([
    [["A", "A", "A"], true],
    [["A", "B", "A", "C", "A"], true],
    [["A", "B", "A", "B"], true],
    [["A", "B", "C", "A", "B", "C"], true],
    [["A", "B", "C", "D", "A", "B", "C", "D"], true],
    [["A", "B", "C", "D", "E"], false],
    [["A", "A", "B", "B"], false],
    [["A", "B", "A"], false],
  ])("%j is a loop: %s", (history, expected) => {
    expect(detectLoop(history) !== undefined).toBe(expected);
  });
});
