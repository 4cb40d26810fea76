import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { runTroupe, tempTree } from "../support/cli.js";

/* ATTACK: a run id that is a path. `troupe inspect` (and resume, replay, export-trace) read a local run from
 * `<data dir>/local/<prefix>/runs/<run id>/events.jsonl`; an id with `..` would read an event log
 * planted anywhere (here beside the data dir), and print what it says, escape sequences and all. */

let dir: string;
let dispose: () => void;
beforeEach(() => {
  ({ dir, dispose } = tempTree({ "config/troupe.yaml": "defaultModel: scripted\n" }));
  const planted = {
    v: 1,
    id: "01",
    runId: "r",
    agentId: "a1",
    seq: 0,
    ts: 1,
    type: "agent.started",
    data: { name: "\u001b]0;PLANTED\u0007planted-agent", model: "m", task: "t", depth: 0, budget: {} },
  };
  mkdirSync(join(dir, "evil"));
  writeFileSync(join(dir, "evil/events.jsonl"), `${JSON.stringify(planted)}\n`);
});
afterEach(() => dispose());

it.each(["inspect", "replay", "resume", "export-trace"])(
  "troupe %s with a run id that climbs out of the data dir reads nothing",
  async (command) => {
    // From <dir>/.data/local/troupe/runs: up four is <dir>.
    const result = await runTroupe([command, "--config", join(dir, "config"), "../../../../evil"], {
      cwd: dir,
    });
    expect(result.stdout).not.toContain("planted");
    expect(result.stderr).not.toContain("planted");
    expect(result.code).toBe(2);
    expect(result.stderr.trim().split("\n")).toEqual([
      'troupe: run id "../../../../evil" is not one: a run id is letters, digits, "_" and "-" (troupe runs lists them)',
    ]);
  },
);
