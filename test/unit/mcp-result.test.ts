import { describe, expect, it } from "vitest";
import { mcpResult } from "../../src/tools/mcp/mcp-result.js";

describe("mcpResult", () => {
  it("names a binary embedded resource with its type and size, and an audio clip, and keeps an unknown item's type", () => {
    const blob = Buffer.from("x".repeat(2000)).toString("base64");
    const result = mcpResult({
      content: [
        {
          type: "resource",
          resource: { uri: "file:///r.gz", name: "r.gz", mimeType: "application/gzip", blob },
        },
        { type: "audio", mimeType: "audio/wav", data: Buffer.from("abc").toString("base64") },
        { type: "resource_link", uri: "file:///a.txt", name: "a.txt" },
        { type: "hologram" },
      ],
    });
    expect(result).toEqual({
      ok: true,
      output: [
        '[resource "r.gz" file:///r.gz: application/gzip, 2.0 KB, binary, not shown]',
        "[audio: audio/wav, 3 bytes, not shown to the model]",
        '[resource link "a.txt": file:///a.txt]',
        "[hologram]",
      ].join("\n"),
    });
  });

  it("gives the structured content as JSON when there is no other, and an error's text as the error", () => {
    expect(mcpResult({ structuredContent: { n: 1 } })).toEqual({ ok: true, output: '{"n":1}' });
    expect(mcpResult({ isError: true, content: [{ type: "text", text: "no such id" }] })).toMatchObject({
      ok: false,
      error: "no such id",
    });
  });
});
