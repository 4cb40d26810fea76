import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AgentControls } from "../../src/actors/agent-stream.js";
import { RemoteError } from "../../src/bus/bus.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import type { AgentCommand } from "../../src/machines/agent-types.js";
import { type BusUnderTest, natsBus } from "../support/buses.js";

describe("agent controls over NATS", () => {
  let under: BusUnderTest;
  let controls: AgentControls;
  const heard: AgentCommand[] = [];

  beforeEach(async () => {
    under = await natsBus();
    controls = new AgentControls(under.bus);
    heard.length = 0;
    controls.serve("r1", "a1", (command) => heard.push(command), true);
    controls.serve("r1", "c1", (command) => heard.push(command), false);
    await under.bus.flush();
  });
  afterEach(async () => {
    controls.close();
    await under.dispose();
  });

  const ask = (token: string, data: unknown) =>
    under.bus.request(
      `${under.bus.subjects.prefix}.ctl.r1.a1.${token}`,
      makeEnvelope({ runId: "r1", agentId: "cli", seq: 0, type: token, data }),
      { timeoutMs: 3000 },
    );

  it("hands each command token to the agent as its machine command, and acks it", async () => {
    for (const [token, data] of [
      ["steer", { text: "look left" }],
      ["followUp", { text: "and then?" }],
      ["abort", { reason: "enough" }],
    ] as const) {
      const ack = await ask(token, data);
      expect(ack).toMatchObject({ type: "ack", data: { command: token } });
    }
    expect(heard).toEqual([
      { type: "STEER", text: "look left" },
      { type: "FOLLOW_UP", text: "and then?" },
      { type: "ABORT", reason: "enough" },
    ]);
    expect(under.bus.subjects.control("r1", "a1", "followUp")).toBe(
      `${under.bus.subjects.prefix}.ctl.r1.a1.followUp`,
    );
  });

  it("takes from a worker (its subject marked) an abort of a subagent, and nothing else", async () => {
    const fromWorker = (agentId: string, token: string, data: unknown) =>
      under.bus.request(
        `${under.bus.subjects.prefix}.ctl.r1.${agentId}.${token}._w`,
        makeEnvelope({ runId: "r1", agentId: "w", seq: 0, type: token, data }),
        { timeoutMs: 3000 },
      );
    await expect(fromWorker("a1", "abort", { reason: "mine now" })).rejects.toThrow(
      /a worker may abort a subagent/,
    );
    await expect(fromWorker("c1", "steer", { text: "obey" })).rejects.toThrow(
      /a worker may abort a subagent/,
    );
    expect(heard).toEqual([]);
    const ack = await fromWorker("c1", "abort", { reason: "its parent stopped" });
    expect(ack).toMatchObject({ type: "ack", data: { command: "abort" } });
    expect(heard).toEqual([{ type: "ABORT", reason: "its parent stopped" }]);
  });

  it("refuses the old follow_up token as an unknown command", async () => {
    await expect(ask("follow_up", { text: "x" })).rejects.toBeInstanceOf(RemoteError);
    await expect(ask("follow_up", { text: "x" })).rejects.toThrow(/unknown command "follow_up"/);
    expect(heard).toEqual([]);
  });
});
