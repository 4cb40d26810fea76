import { describe, expect, it } from "vitest";
import type { Envelope } from "../../src/bus/envelope.js";
import { runTroupe, tempTree } from "../support/cli.js";

describe("troupe demo", () => {
  it("runs the canned scenario with nothing configured: parallel reads, a write allowed by policy, an approval denied without a terminal", async () => {
    const { dir, dispose } = tempTree({});
    try {
      const result = await runTroupe(["demo", "--json"], {
        cwd: dir,
        env: { OPENAI_API_KEY: "", OPENAI_BASE_URL: "" },
      });
      expect(result.code).toBe(0);
      const events = result.stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as Envelope);
      const data = (type: string) =>
        events.filter((e) => e.type === type).map((e) => e.data as Record<string, unknown>);
      expect(data("tool.requested").map((d) => [d.name, d.decision])).toEqual([
        ["list_dir", "allow"],
        ["read_file", "allow"],
        ["save_note", "allow"],
        ["run_checks", "ask"],
      ]);
      expect(data("approval.requested").map((d) => d.name)).toEqual(["run_checks"]);
      expect(data("approval.decided")).toEqual([
        expect.objectContaining({
          approved: false,
          by: "policy",
          reason: expect.stringContaining("no terminal to ask for approval"),
        }),
      ]);
      expect(
        data("tool.finished")
          .map((d) => `${d.name}:${d.ok}`)
          .sort(),
      ).toEqual(["list_dir:true", "read_file:true", "save_note:true"]);
      expect(data("agent.stopped")[0]).toMatchObject({ reason: "done", turns: 3, toolCalls: 3 });
    } finally {
      dispose();
    }
  });
});
