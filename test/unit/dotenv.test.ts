import { describe, expect, it } from "vitest";
import { parseDotenv } from "../../src/config/mcp-env-file.js";

describe("an envFile read as Node's util.parseEnv reads it, on every Node 20", () => {
  it("takes NAME=value lines, export, the three quotes, comments and CRLF", () => {
    const text = [
      "A=1",
      "B = two ",
      'export C="three\\nlines"',
      "# a comment",
      "D='single # not a comment'",
      "E=unquoted # a comment",
      "F=",
      'G="multi',
      'line"',
      "H=`back`",
      "not an assignment",
    ].join("\r\n");
    expect(parseDotenv(text)).toEqual({
      A: "1",
      B: "two",
      C: "three\nlines",
      D: "single # not a comment",
      E: "unquoted",
      F: "",
      G: "multi\nline",
      H: "back",
    });
  });
});
