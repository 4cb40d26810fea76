import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, TROUPE_BIN, tempTree } from "../support/cli.js";
import { waitFor } from "../support/wait.js";

/*
 * A local run interrupted (SIGINT, as Ctrl-C sends) while its subagent still worked, then resumed
 * by `troupe resume` in another process: the subagent goes on from where it was and its answer
 * reaches the lead, instead of "outcome unknown".
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

it("SIGINT during a subagent's work, then troupe resume: the lead gets the subagent's answer", async () => {
  const model = await ScriptedModelServer.start([
    {
      match: { system: '"lead"', turn: 1 },
      reply: {
        toolCalls: [{ id: "call_review", name: "subagent_reviewer", arguments: { task: "review it" } }],
      },
    },
    {
      match: { system: '"reviewer"', turn: 1 },
      reply: { toolCalls: [{ name: "read_file", arguments: { path: "README.md" } }] },
    },
    { match: { system: '"reviewer"', turn: 2 }, reply: { text: "Too late.", delayMs: 30_000 } },
    { match: { system: '"reviewer"', turn: 2 }, reply: { text: "Reviewed: the README is fine." } },
    { match: { system: '"lead"', turn: 2 }, reply: { text: "Done after the review." } },
  ]);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultAgent: lead\ndefaultModel: scripted\n",
    "config/agents/lead.yaml": "name: lead\ndescription: Leads.\ntools: []\nsubagents: [reviewer]\n",
    "config/agents/reviewer.yaml":
      "name: reviewer\ndescription: Reviews.\ntools: [read_file]\nreadOnly: true\n",
    "ws/README.md": "# a project\n",
  });
  cleanups.push(dispose);
  const env = {
    ...process.env,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  };
  const config = ["--config", join(dir, "config")];
  const first = spawn(process.execPath, [TROUPE_BIN, ...config, "run", "--local", "-w", "ws", "Review it"], {
    cwd: dir,
    env,
    stdio: ["ignore", "ignore", "ignore"],
  });
  cleanups.push(() => void first.kill("SIGKILL"));
  const exited = new Promise((resolve) => first.once("exit", resolve));
  const reviewing = () =>
    model.requests.some(
      (r) =>
        String(r.body.messages[0]?.content).includes('"reviewer"') &&
        r.body.messages.some((m) => m.role === "tool"),
    );
  await waitFor("the reviewer's second model call", reviewing, 20_000);
  first.kill("SIGINT");
  await exited;
  const runs = JSON.parse(
    (await runTroupe([...config, "runs", "--json"], { cwd: dir, env })).stdout,
  ) as Array<{
    runId: string;
    state: string;
  }>;
  expect(runs.map((run) => run.state)).toEqual(["aborted"]);

  const resumed = await runTroupe([...config, "resume", runs[0]?.runId as string, "--json"], {
    cwd: dir,
    env,
  });
  expect(resumed.code).toBe(0);
  const events = resumed.stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { type: string; agentId: string; data: Record<string, unknown> });
  expect(events.filter((e) => e.type === "agent.started")).toEqual([]);
  expect(events.at(-1)).toMatchObject({
    type: "agent.stopped",
    data: { reason: "done", result: "Done after the review." },
  });
  const lead = model.requests.at(-1)?.body.messages ?? [];
  const review = lead.find((m) => m.role === "tool" && m.tool_call_id === "call_review")?.content;
  expect(review).toContain("Reviewed: the README is fine.");
  // The reviewer's read had finished before the interrupt: it went on from its result, not reading again.
  const reviewer = model.requests.filter((r) => String(r.body.messages[0]?.content).includes('"reviewer"'));
  expect(reviewer).toHaveLength(3);
  expect(reviewer.at(-1)?.body.messages.filter((m) => m.role === "tool")).toHaveLength(1);
}, 90_000);
