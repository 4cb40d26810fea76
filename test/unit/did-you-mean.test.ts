import { describe, expect, it } from "vitest";
import { closest, editDistance } from "../../src/util/did-you-mean.js";

describe("did you mean", () => {
  it("counts edits, with a transposition as one", () => {
    expect(editDistance("edit_file", "edit_file")).toBe(0);
    expect(editDistance("edt_file", "edit_file")).toBe(1);
    expect(editDistance("reda_file", "read_file")).toBe(1);
    expect(editDistance("", "abc")).toBe(3);
  });

  it("suggests only close names", () => {
    const tools = ["read_file", "write_file", "edit_file", "shell"];
    expect(closest("edt_file", tools)).toBe("edit_file");
    expect(closest("SHELL", tools)).toBe("shell");
    expect(closest("deploy_to_production", tools)).toBeUndefined();
  });
});
