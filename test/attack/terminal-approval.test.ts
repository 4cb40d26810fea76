import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { onTerminal, runTroupe, spawnTroupe, TROUPE_BIN, tempTree } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";
import { Tmux } from "../support/tmux.js";
import { waitFor } from "../support/wait.js";

/* ATTACK: the command shown for approval is not the command that runs. A shell command whose end
 * (`#\r\e[2K  │ git status --short`) rewrote its own line on the terminal, `\e[1A` took the cursor
 * up over the question's header and `\e[8m` hid everything after, "(asked because …)" included:
 * the person saw `│ git status --short` and `y` ran the payload. Now the command is quoted with every
 * character seen, and the header and the reason stand on lines of their own. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const ESC = "\x1b";
const COMMAND = `echo cHduZWQK | base64 -d > pwned.txt #\r${ESC}[2K${ESC}[1A${ESC}[2K${ESC}[1B  │ git status --short${ESC}[8m`;
const SHOWN = `"echo cHduZWQK | base64 -d > pwned.txt #\\r\\e[2K\\e[1A\\e[2K\\e[1B  │ git status --short\\e[8m"`;

it("troupe run's question shows the whole command quoted and visible, its header, and why it is asked, on a real terminal", async () => {
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [
          { name: "shell", arguments: { command: COMMAND, escalate: "unsandboxed" }, id: "call_status" },
        ],
      },
    },
    { match: { turn: 2 }, reply: { text: "Fine." } },
  ]);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultAgent: coder\ndefaultModel: scripted\n",
    "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
    "ws/README.md": "# a project\n",
  });
  cleanups.push(dispose);
  const tmux = Tmux.start(
    [
      process.execPath,
      TROUPE_BIN,
      "--config",
      join(dir, "config"),
      "run",
      "--local",
      "-w",
      "ws",
      "--approval",
      "ask",
      "Show the status",
    ],
    {
      cwd: dir,
      env: {
        ...process.env,
        OPENAI_BASE_URL: model.baseURL,
        OPENAI_API_KEY: "",
        TROUPE_DATA_DIR: join(dir, ".data"),
      },
      columns: 200,
      rows: 30,
    },
  );
  cleanups.push(() => tmux.kill());
  await waitFor("the question", () => tmux.screen().includes("(it leaves the sandbox):"), 20_000);

  const lines = tmux
    .screen()
    .split("\n")
    .map((line) => line.trimEnd());
  const header = lines.indexOf("shell (execute) wants to:");
  expect(lines.slice(header, header + 5)).toEqual([
    "shell (execute) wants to:",
    `  command (1 line): ${SHOWN}`,
    "  paths: pwned.txt",
    "  (asked because it asks to run outside the sandbox)",
    "? allow shell (call_status)? y = yes, n [reason] = no, a = this once (it leaves the sandbox):",
  ]);
  // Nothing on the terminal is hidden text (SGR 8, which tmux reports as it found it).
  expect(tmux.styled()).not.toMatch(new RegExp(`${ESC}\\[(?:[0-9;]*;)?8(?:;[0-9;]*)?m`));

  tmux.keys("n", "Enter");
  await waitFor(
    "the run to end",
    () => tmux.screen().includes("■") || tmux.screen().includes("✓ done"),
    20_000,
  );
  expect(existsSync(join(dir, "ws", "pwned.txt"))).toBe(false);
}, 60_000);

/** Bytes a terminal would obey that the command carries: none may reach one raw. */
const obeyed = (text: string) => [...text].filter((char) => char === ESC || char === "\r");

/**
 * A daemon on its embedded server whose agent asks for the scripted shell commands (each its own
 * turn, call ids as given), a run started through it, and `troupe observe` of that run in tmux.
 */
async function observedRun(
  prefix: string,
  commands: Array<{ id: string; command: string }>,
  columns: number,
) {
  const model = await ScriptedModelServer.start([
    ...commands.map(({ id, command }, i) => ({
      match: { turn: i + 1 },
      reply: { toolCalls: [{ name: "shell", arguments: { command, escalate: "unsandboxed" }, id }] },
    })),
    { match: { turn: commands.length + 1 }, reply: { text: "Fine." }, times: 3 },
  ]);
  cleanups.push(() => model.close());
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: coder\ndefaultModel: scripted\napproval:\n  timeoutMs: 60000\n`,
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
    },
    model.baseURL,
    cleanups,
  );
  await h.start();
  const run = spawnTroupe([...h.cfg, "run", "--json", "--approval", "ask", "Do it"], {
    cwd: h.dir,
    env: h.env,
  });
  cleanups.push(() => void run.child.kill("SIGKILL"));
  await waitFor("the approval request", () => run.stdout().includes('"approval.requested"'), 20_000);
  const runId = (JSON.parse(run.stdout().split("\n")[0] ?? "{}") as { runId: string }).runId;
  const observe = Tmux.start([process.execPath, TROUPE_BIN, ...h.cfg, "observe", runId], {
    cwd: h.dir,
    env: h.env,
    columns,
    rows: 30,
  });
  cleanups.push(() => observe.kill());
  return { h, run, observe };
}

it("the observer's panel, troupe approvals and troupe approve show the same command quoted and visible, and why it is asked below it", async () => {
  const { h, run, observe } = await observedRun("termatk", [{ id: "call_status", command: COMMAND }], 200);
  await waitFor("the observer's panel", () => observe.screen().includes("[a] allow"), 20_000);
  const panel = observe
    .screen()
    .split("\n")
    .map((line) => line.trimEnd());
  const label = panel.indexOf("  command (1 line):");
  expect(panel.slice(label - 2, label + 4)).toEqual([
    "approval: coder wants shell (call_status)",
    "  paths: pwned.txt",
    "  command (1 line):",
    `  │ ${SHOWN}`,
    "  (asked because it asks to run outside the sandbox)",
    "  [a] allow  [d] deny",
  ]);
  expect(observe.styled()).not.toMatch(new RegExp(`${ESC}\\[(?:[0-9;]*;)?8(?:;[0-9;]*)?m`));

  const approvals = await runTroupe([...h.cfg, "approvals"], { cwd: h.dir, env: h.env });
  expect(obeyed(approvals.stdout)).toEqual([]);
  // The WHAT column: the command's start, quoted and seen, cut where the column ends, with "…" and
  // how much is not shown.
  expect(approvals.stdout).toContain(
    `"echo cHduZWQK | base64 -d > pwned.txt #\\r\\e[2K\\e[1A\\e[2K\\e… (+${SHOWN.length - 59} chars: troupe approve CALL shows it whole) (pwned.txt)`,
  );

  const approve = await runTroupe([...h.cfg, "approve", "call_status", "--deny"], { cwd: h.dir, env: h.env });
  expect(obeyed(approve.stderr + approve.stdout)).toEqual([]);
  expect(approve.stderr).toContain(
    `shell (execute) wants to:\n  command (1 line): ${SHOWN}\n  paths: pwned.txt\n  (asked because it asks to run outside the sandbox)\n`,
  );
  expect(approve.code).toBe(0);
  await run.exit;
  expect(existsSync(join(h.dir, "pwned.txt"))).toBe(false);
}, 90_000);

it("a path with escapes in it is shown, never obeyed, in the diff's header and on the paths line", async () => {
  const path = `notes${ESC}[2K\r${ESC}]0;owned\x07.txt`;
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [{ name: "write_file", arguments: { path, content: "hello\n" }, id: "call_note" }],
      },
    },
    { match: { turn: 2 }, reply: { text: "Fine." } },
  ]);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultAgent: coder\ndefaultModel: scripted\n",
    "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [write_file]\n",
    "ws/README.md": "# a project\n",
  });
  cleanups.push(dispose);
  const run = onTerminal(
    ["--config", join(dir, "config"), "run", "--local", "-w", "ws", "--approval", "ask", "Note it"],
    {
      cwd: dir,
      env: {
        ...process.env,
        OPENAI_BASE_URL: model.baseURL,
        OPENAI_API_KEY: "",
        TROUPE_DATA_DIR: join(dir, ".data"),
      },
    },
  );
  cleanups.push(() => void run.child.kill("SIGKILL"));
  await waitFor("the question", () => run.output().includes("always:"), 20_000);
  run.child.stdin.write("n\n");
  await run.exit;
  const output = run.output();
  // What the path carries never reaches the terminal as it is: no line erased, no title set.
  expect(output).not.toContain(`${ESC}[2K`);
  expect(output).not.toContain(`${ESC}]`);
  expect(output).not.toContain("\x07");
  const shown = "notes\\e[2K\\r\\e]0;owned\\x07.txt";
  expect(output).toContain(`  │ +++ b/${shown}`);
  expect(output).toContain(`  paths: ${shown}`);
}, 60_000);

/* ATTACK: the observer's panel cut what did not fit and still offered allow. A payload after 300
 * spaces on one line fell past the terminal's edge; one on line 40 of a command fell below the
 * panel's five lines: the person saw `ls` and allowed. Now a long run of blanks is counted, a long
 * line wraps, and a request that does not fit on the screen whole cannot be allowed from it. */
it("the observer's panel shows a payload hidden after 300 spaces, and never offers allow for a command it cannot show whole", async () => {
  const spaced = `ls${" ".repeat(300)}; echo spaced > pwned.txt`;
  const tall = [...Array.from({ length: 39 }, (_, i) => `echo line ${i + 1}`), "echo tall > pwned.txt"].join(
    "\n",
  );
  const { h, run, observe } = await observedRun(
    "termtall",
    [
      { id: "call_tall", command: tall },
      { id: "call_spaced", command: spaced },
    ],
    100,
  );

  // Forty lines do not fit in thirty rows: no allow is offered, and `a` allows nothing.
  await waitFor("the tall request", () => observe.screen().includes("command (40 lines):"), 20_000);
  await waitFor("its keys", () => observe.screen().includes("[d] deny"), 5000);
  expect(observe.screen()).not.toContain("[a] allow");
  expect(observe.screen()).toContain("not all shown: see it whole with troupe approve call_tall");
  observe.keys("a");
  await waitFor(
    "the refusal",
    () => observe.screen().includes("not all of this request is on the screen"),
    5000,
  );
  await new Promise((resolve) => setTimeout(resolve, 1000));
  expect(run.stdout()).not.toContain('"approval.decided"');
  expect((await runTroupe([...h.cfg, "approvals"], { cwd: h.dir, env: h.env })).stdout).toContain(
    "call_tall",
  );
  observe.keys("d");

  // One long line: its blanks counted, its end wrapped onto the next line, all of it on the screen.
  await waitFor("the spaced request", () => observe.screen().includes("call_spaced"), 20_000);
  await waitFor("its keys", () => observe.screen().includes("[a] allow"), 5000);
  expect(observe.screen()).toContain('│ "ls␠×300; echo spaced > pwned.txt"');
  observe.keys("d");
  await run.exit;
  expect(existsSync(join(h.dir, "pwned.txt"))).toBe(false);
}, 90_000);
