import { spawn } from "node:child_process";
import { mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Envelope } from "../../src/events/envelope.js";
import { exited, runTroupe, TROUPE_BIN, tempTree } from "../support/cli.js";

describe("troupe demo", () => {
  it("runs the canned scenario with nothing configured: parallel reads and subagents, a write allowed by policy, an approval denied without a terminal", async () => {
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
      const root = events[0]?.agentId;
      const data = (type: string, agent = root) =>
        events
          .filter((e) => e.type === type && e.agentId === agent)
          .map((e) => e.data as Record<string, unknown>);
      expect(data("tool.requested").map((d) => [d.name, d.decision])).toEqual([
        ["list_dir", "allow"],
        ["read_file", "allow"],
        ["subagent_explorer", "allow"],
        ["subagent_reviewer", "allow"],
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
      ).toEqual([
        "list_dir:true",
        "read_file:true",
        "save_note:true",
        "subagent_explorer:true",
        "subagent_reviewer:true",
      ]);

      // Two subagents ran as child actors at the same time, and their answers reached the parent.
      const spawned = data("subagent.spawned");
      expect(spawned.map((d) => d.name)).toEqual(["explorer", "reviewer"]);
      expect(data("subagent.finished").map((d) => d.reason)).toEqual(["done", "done"]);
      const children = spawned.map((d) => String(d.childId));
      const spans = children.map((id) => {
        const times = events.filter((e) => e.agentId === id).map((e) => e.ts);
        return [Math.min(...times), Math.max(...times)] as const;
      });
      const [a, b] = spans;
      expect(a && b && a[0] < b[1] && b[0] < a[1]).toBe(true);
      for (const id of children)
        expect(events.filter((e) => e.agentId === id).every((e) => e.parentId === root)).toBe(true);
      expect(data("agent.stopped")[0]).toMatchObject({
        reason: "done",
        turns: 3,
        toolCalls: 5,
        total: { toolCalls: 7 },
      });
    } finally {
      dispose();
    }
  });

  it("leaves quietly when its reader does (| head), and takes its scratch workspace with it", async () => {
    const { dir, dispose } = tempTree({});
    try {
      const tmp = join(dir, "tmp");
      mkdirSync(tmp);
      const child = spawn(
        "sh",
        ["-c", `'${process.execPath}' '${TROUPE_BIN}' demo --json | head -c 300 >/dev/null`],
        {
          cwd: dir,
          env: {
            ...process.env,
            OPENAI_API_KEY: "",
            OPENAI_BASE_URL: "",
            TMPDIR: tmp,
            TROUPE_DATA_DIR: join(dir, ".data"),
          },
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      let stderr = "";
      child.stderr.on("data", (chunk) => (stderr += chunk));
      expect(await exited(child)).toBe(0);
      expect(stderr).toBe("");
      expect(readdirSync(tmp).filter((name) => name.startsWith("troupe-demo-"))).toEqual([]);
    } finally {
      dispose();
    }
  });
});
