import type { ApprovalDecision } from "../machines/agent-types.js";
import type { ToolCall } from "../model/types.js";
import type { PlannedCall } from "../tools/plan.js";
import { deniedResult, type ToolResult } from "../tools/tool.js";

/** Plans calls; `withTools` false when the turn had no tools (every call is refused). */
type Plan = (calls: ToolCall[], withTools: boolean) => PlannedCall[];
type Ask = (calls: PlannedCall[], signal: AbortSignal) => Promise<ApprovalDecision[]>;

/**
 * Which calls of a batch may run, decided in this process. A batch this process planned runs as
 * planned once its asked calls are approved here. A call it did not plan (one restored from a
 * snapshot: any host on the bus can write one) is planned again under this agent's policy before it
 * is asked about or run, and asked again when the policy asks: the approval record's signed answer,
 * if there is one, settles it at once. What a snapshot says was allowed is never taken on its word.
 */
export class Clearance {
  #planned = new Map<string, PlannedCall>();
  #decided = new Map<string, ApprovalDecision>();

  constructor(
    private readonly plan: Plan,
    private readonly ask: Ask,
  ) {}

  /** A new batch from the model, planned here: it replaces the last. */
  planBatch(toolCalls: ToolCall[], withTools: boolean): PlannedCall[] {
    this.#planned.clear();
    this.#decided.clear();
    const plan = this.plan(toolCalls, withTools);
    for (const call of plan) this.#planned.set(call.id, call);
    return plan;
  }

  /** Decisions for the calls the machine waits on: asked when the policy asks, else the plan's. */
  async approve(calls: readonly PlannedCall[], signal: AbortSignal): Promise<ApprovalDecision[]> {
    const own = this.#own(calls);
    const asking = own.filter((call) => awaits(call) && !this.#decided.has(call.id));
    for (const decision of asking.length > 0 ? await this.ask(asking, signal) : [])
      this.#decided.set(decision.id, decision);
    return own.map((call) => this.#decided.get(call.id) ?? verdictOf(call));
  }

  /** Of the calls the machine would run, those cleared here; a result for each refused one. */
  async clear(
    calls: readonly PlannedCall[],
    signal: AbortSignal,
  ): Promise<{ run: PlannedCall[]; refused: Record<string, ToolResult> }> {
    const decisions = new Map((await this.approve(calls, signal)).map((d) => [d.id, d]));
    const run: PlannedCall[] = [];
    const refused: Record<string, ToolResult> = {};
    for (const call of this.#own(calls)) {
      const decision = decisions.get(call.id);
      if (call.result) refused[call.id] = call.result;
      else if (decision?.approved) run.push({ ...call, decision: "allow" });
      else refused[call.id] = deniedResult(call.name, decision);
    }
    return { run, refused };
  }

  /** Each call as this process planned it: one it did not plan is planned now. */
  #own(calls: readonly PlannedCall[]): PlannedCall[] {
    const strangers = calls.filter((call) => !this.#isOurs(call));
    if (strangers.length > 0) {
      for (const call of this.plan(strangers.map(asToolCall), true)) {
        this.#planned.set(call.id, call);
        this.#decided.delete(call.id);
      }
    }
    return calls.map((call) => this.#planned.get(call.id) as PlannedCall);
  }

  #isOurs(call: PlannedCall): boolean {
    const ours = this.#planned.get(call.id);
    return ours !== undefined && ours.name === call.name && ours.arguments === call.arguments;
  }
}

const awaits = (call: PlannedCall) => call.decision === "ask" && !call.result;

function verdictOf(call: PlannedCall): ApprovalDecision {
  if (call.decision === "allow" && !call.result) return { id: call.id, approved: true };
  return { id: call.id, approved: false, reason: call.result?.error ?? `${call.name} is not allowed` };
}

const asToolCall = (call: PlannedCall): ToolCall => ({
  id: call.id,
  type: "function",
  function: { name: call.name, arguments: call.arguments },
});
