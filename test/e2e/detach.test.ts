import { join } from "node:path";
import { expect, inject, it } from "vitest";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { removePrefix } from "../support/buses.js";
import { runTroupe } from "../support/cli.js";
import { daemonProcesses } from "../support/daemon-process.js";

const { cleanups, startDaemon } = daemonProcesses();

it("troupe run --detach leaves the run to the daemon and prints its id; troupe run --id follows it to its end", async () => {
  const model = await ScriptedModelServer.start([
    { match: { turn: 1 }, reply: { text: "Done in the background.", delayMs: 1500 } },
  ]);
  cleanups.push(() => model.close());
  const url = inject("natsUrl");
  const prefix = uniquePrefix();
  cleanups.push(() => removePrefix(url, prefix));
  const env = { NATS_URL: url, OPENAI_BASE_URL: model.baseURL, OPENAI_API_KEY: "" };
  const { dir } = await startDaemon(env, prefix);
  const cfg = ["--config", join(dir, "config")];

  const detached = await runTroupe([...cfg, "run", "--detach", "Take your time."], { cwd: dir, env });
  expect(detached.code, detached.stderr).toBe(0);
  const runId = detached.stdout.trim();
  expect(runId).toMatch(/^run-[0-9a-z]{26}$/);
  expect(detached.stderr).toBe(
    `troupe: run ${runId} goes on in the daemon: troupe run --id ${runId} with the same task and options follows it again (and answers its approvals), troupe observe ${runId} watches\n`,
  );

  const followed = await runTroupe([...cfg, "run", "--id", runId, "--json", "Take your time."], {
    cwd: dir,
    env,
  });
  expect(followed.code, followed.stderr).toBe(0);
  const last = JSON.parse(followed.stdout.trim().split("\n").at(-1) ?? "{}") as {
    type: string;
    data: unknown;
  };
  expect(last).toMatchObject({
    type: "agent.stopped",
    data: { reason: "done", result: "Done in the background." },
  });
  expect(model.requests).toHaveLength(1);

  const local = await runTroupe([...cfg, "run", "--local", "--detach", "x"], { cwd: dir, env });
  expect(local.code).toBe(2);
});
