import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { onTerminal, runTroupe, tempTree } from "../support/cli.js";
import { waitFor } from "../support/wait.js";

/* `troupe resume` of a local run on a terminal asks there, as the first run did: it used to deny
 * every approval ("no terminal to ask for approval in a resumed run"). */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it("a local run stopped at its question asks again on the terminal it is resumed in", async () => {
  const write = { name: "write_file", arguments: { path: "out.txt", content: "written\n" } };
  const model = await ScriptedModelServer.start([
    { match: { turn: 1 }, reply: { toolCalls: [write] } },
    { match: { turn: 2 }, reply: { toolCalls: [write] } },
    { match: { turn: 3 }, reply: { text: "Written." } },
  ]);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultAgent: coder\ndefaultModel: scripted\n",
    "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [write_file]\n",
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
  const first = onTerminal([...config, "run", "--local", "-w", "ws", "--approval", "ask", "Write it"], {
    cwd: dir,
    env,
  });
  cleanups.push(() => void first.child.kill("SIGKILL"));
  await waitFor("the question", () => first.output().includes("allow write_file"), 20_000);
  first.child.stdin.write("\x03");
  await first.exit;
  const runs = JSON.parse(
    (await runTroupe([...config, "runs", "--json"], { cwd: dir, env })).stdout,
  ) as Array<{
    runId: string;
    state: string;
  }>;
  const stopped = runs.find((run) => run.state === "aborted");
  expect(stopped).toBeDefined();

  const resumed = onTerminal([...config, "resume", stopped?.runId as string], { cwd: dir, env });
  cleanups.push(() => void resumed.child.kill("SIGKILL"));
  await waitFor("the question again", () => resumed.output().includes("allow write_file"), 20_000);
  expect(resumed.output()).not.toContain("denied");
  resumed.child.stdin.write("y\n");
  expect(await resumed.exit).toBe(0);
  expect(existsSync(join(dir, "ws/out.txt")) && readFileSync(join(dir, "ws/out.txt"), "utf8")).toBe(
    "written\n",
  );
}, 60_000);
