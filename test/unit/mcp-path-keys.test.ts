import { describe, expect, it } from "vitest";
import { checkPathArguments, isPathKey } from "../../src/tools/mcp/mcp-paths.js";

describe("an MCP argument's name that says it holds paths", () => {
  it("is read as words: camelCase, snake_case, kebab-case and plurals", () => {
    for (const key of [
      "path",
      "filePath",
      "file_path",
      "FILE_PATH",
      "source-dir",
      "paths",
      "destination",
      "root",
      "filename",
      "cwd",
      "roots",
    ])
      expect(isPathKey(key), key).toBe(true);
  });

  it("is not one that only holds the letters of a path word", () => {
    for (const key of [
      "resourceType",
      "profile",
      "sourcery",
      "directive",
      "filer",
      "rootless",
      "type",
      "query",
    ])
      expect(isPathKey(key), key).toBe(false);
  });

  it("leaves a value under such a name to the server, and still holds one under a path word", () => {
    const checked = checkPathArguments({ resourceType: "Text", resourceFile: "notes.md" }, "/tmp", {
      readOnly: true,
    });
    if (!("args" in checked)) throw new Error(`refused: ${checked.refused.error}`);
    expect(checked.args.resourceType).toBe("Text");
    expect(checked.args.resourceFile).not.toBe("notes.md");
  });
});
