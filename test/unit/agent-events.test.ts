import { describe, expect, expectTypeOf, it } from "vitest";
import type { Budget } from "../../src/config/budget-schema.js";
import type { ToolEffect } from "../../src/config/tool-catalog.js";
import {
  type AgentEventMap,
  checkEventData,
  isAgentEvent,
  isEvent,
  type SubagentStopReason,
} from "../../src/events/agent-events.js";
import { type Envelope, makeEnvelope } from "../../src/events/envelope.js";
import type { AgentOutput } from "../../src/machines/agent-types.js";
import type { FinishReason, Usage } from "../../src/model/types.js";

const envelope = (type: string, data: unknown): Envelope =>
  makeEnvelope({ runId: "run-1", agentId: "lead", seq: 0, type, data });

const requested = {
  callId: "c1",
  name: "read_file",
  arguments: '{"path":"a.md"}',
  effect: "read",
  decision: "allow",
};

describe("agent events", () => {
  it("isEvent narrows an envelope to its type's payload, and is false for any other type", () => {
    const event = envelope("tool.requested", requested);
    expect(isEvent(event, "tool.requested")).toBe(true);
    expect(isEvent(event, "tool.finished")).toBe(false);
    expect(isEvent(envelope("tool.requested.v2", requested), "tool.requested")).toBe(false);
    if (isEvent(event, "tool.requested")) {
      expectTypeOf(event.data).toEqualTypeOf<AgentEventMap["tool.requested"]>();
      expectTypeOf(event.type).toEqualTypeOf<"tool.requested">();
      expect(event.data.name).toBe("read_file");
    }
  });

  it("isAgentEvent knows this build's types only", () => {
    expect(isAgentEvent(envelope("model.delta", { text: "hi" }))).toBe(true);
    expect(isAgentEvent(envelope("tool.frobbed", {}))).toBe(false);
    expect(isAgentEvent(envelope("constructor", {}))).toBe(false);
  });

  it("checkEventData says where a payload does not fit its type, and passes types it does not know", () => {
    expect(checkEventData("tool.requested", requested)).toBeUndefined();
    expect(checkEventData("tool.requested", { ...requested, arguments: 42 })).toMatch(/^data\.arguments: /);
    expect(checkEventData("tool.requested", { ...requested, effect: "delete" })).toMatch(/^data\.effect: /);
    // Keys a newer build adds are no reason to drop an event.
    expect(checkEventData("tool.requested", { ...requested, sandboxed: true })).toBeUndefined();
    expect(checkEventData("model.delta", { text: "hi" })).toBeUndefined();
    expect(checkEventData("model.delta", { text: 1 })).toMatch(/^data\.text: /);
    expect(checkEventData("model.reasoning", null)).toMatch(/^data: /);
    expect(checkEventData("agent.stopped", { reason: "done" })).toMatch(/^data\.result: /);
    expect(checkEventData("tool.frobbed", 42)).toBeUndefined();
  });

  it("the schemas' types are the ones the rest of Troupe uses", () => {
    expectTypeOf<AgentEventMap["agent.stopped"]>().toEqualTypeOf<AgentOutput>();
    expectTypeOf<AgentEventMap["usage.updated"]["usage"]>().toEqualTypeOf<Usage>();
    expectTypeOf<AgentEventMap["agent.started"]["budget"]>().toEqualTypeOf<Budget>();
    expectTypeOf<AgentEventMap["tool.requested"]["effect"]>().toEqualTypeOf<ToolEffect>();
    expectTypeOf<AgentEventMap["model.completed"]["finishReason"]>().toEqualTypeOf<FinishReason>();
    expectTypeOf<AgentEventMap["subagent.finished"]["reason"]>().toEqualTypeOf<SubagentStopReason>();
  });
});
