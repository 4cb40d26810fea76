import { Redactor } from "../../src/safety/redact.js";
import { type CallOutcome, plainOutcome } from "../../src/tools/call-outcome.js";
import { planCalls } from "../../src/tools/plan.js";
import { type BatchObserver, runBatch } from "../../src/tools/run-batch.js";
import type { ToolRegistry } from "../../src/tools/tool.js";

/** Runs one call through the whole pipeline under yolo, as an agent's batch would: plan, run, finish. */
export async function runThroughPipeline(
  registry: ToolRegistry,
  workspace: string,
  name: string,
  args: Record<string, unknown>,
  observer?: BatchObserver,
): Promise<CallOutcome> {
  const [planned] = planCalls(
    [{ id: "c1", type: "function", function: { name, arguments: JSON.stringify(args) } }],
    registry,
    new Set(registry.names()),
    "yolo",
    { workspace },
  );
  if (!planned) throw new Error("no plan");
  if (planned.result) return plainOutcome(planned.result);
  const results = await runBatch([planned], {
    registry,
    context: { runId: "r", agentId: "a", workspace },
    signal: new AbortController().signal,
    redactor: new Redactor(),
    observer,
  });
  return results.c1 as CallOutcome;
}
