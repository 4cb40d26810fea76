import { describe, expect, it } from "vitest";
import { mcpServerSchema } from "../../src/config/mcp-server-schema.js";
import { answeringCall, samplingRequestOf } from "../../src/tools/mcp/mcp-sampling.js";

const sample = async () => ({ text: "", model: "m", stopReason: "endTurn" as const });

describe("which agent answers an MCP server's sampling request", () => {
  it("the one whose call of the server runs; none with no call, or with calls of two agents", () => {
    expect(answeringCall([])).toEqual({
      refused: expect.stringContaining("only while one of this server's tools runs"),
    });
    const one = { agentId: "a", sample };
    expect(answeringCall([one])).toBe(one);
    expect(answeringCall([one, { agentId: "a", sample }])).toBe(one);
    expect(answeringCall([one, { agentId: "b", sample }])).toEqual({
      refused: expect.stringContaining("2 agents at once"),
    });
    expect(answeringCall([{ agentId: "a" }])).toEqual({
      refused: expect.stringContaining("does not answer"),
    });
  });

  it("takes each message as text, what is not text described by type and size; autoApprove's `sampling` lets it through", () => {
    const config = mcpServerSchema.parse({ command: "x", autoApprove: ["sampling"] });
    const request = samplingRequestOf("srv", config, {
      messages: [
        { role: "user", content: { type: "text", text: "hi" } },
        { role: "user", content: { type: "image", data: "AAAA", mimeType: "image/png" } },
      ],
      maxTokens: 9,
    });
    expect(request).toEqual({
      server: "srv",
      autoApproved: expect.stringContaining('"srv"'),
      messages: [
        { role: "user", text: "hi" },
        { role: "user", text: "[image image/png, 3 bytes, not shown to the model]" },
      ],
      maxTokens: 9,
    });
    const plain = samplingRequestOf("srv", mcpServerSchema.parse({ command: "x" }), {
      messages: [],
      maxTokens: 1,
    });
    expect(plain.autoApproved).toBeUndefined();
  });
});
