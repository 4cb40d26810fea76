import { existsSync } from "node:fs";
import { userInfo } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, inject, it } from "vitest";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { removePrefix } from "../support/buses.js";
import { onTerminal, runTroupe, spawnTroupe, TROUPE_BIN, tempTree } from "../support/cli.js";
import { Tmux } from "../support/tmux.js";
import { waitFor } from "../support/wait.js";

/*
 * A daemon, clients, an observer and `troupe approve` in panes of their own, as a person runs them:
 * the observer on a real terminal of a given size (tmux), the client's prompt on a pty.
 */
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const COMMAND = "touch approved.txt\necho two\necho three\necho four\necho five\necho six\necho seven";

async function project(replies: ConstructorParameters<typeof Object>[0][] = []) {
  const model = await ScriptedModelServer.start(
    replies.length
      ? (replies as never)
      : [
          {
            match: { turn: 1 },
            reply: { toolCalls: [{ name: "shell", arguments: { command: COMMAND } }] },
            times: 10,
          },
          { match: { turn: 2 }, reply: { text: "Done." }, times: 10 },
        ],
  );
  cleanups.push(() => model.close());
  const url = inject("natsUrl");
  const prefix = uniquePrefix();
  cleanups.push(() => removePrefix(url, prefix));
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: worker\ndefaultModel: scripted\nproviders:\n  openai:\n    baseURL: ${model.baseURL}\n`,
    "config/agents/worker.yaml": "name: worker\ndescription: Works.\ntools: [shell]\n",
  });
  cleanups.push(dispose);
  const env = { ...process.env, NATS_URL: url, OPENAI_API_KEY: "", TROUPE_DATA_DIR: join(dir, ".data") };
  const config = ["--config", join(dir, "config")];
  const follow = (args: string[]) => {
    const running = spawnTroupe([...config, ...args], { cwd: dir, env });
    cleanups.push(() => void running.child.kill("SIGKILL"));
    return running;
  };
  const daemon = follow(["daemon"]);
  await waitFor("the daemon to be ready", () => daemon.stderr().includes("troupe daemon ready"), 15_000);
  const troupe = (args: string[]) => runTroupe([...config, ...args], { cwd: dir, env });
  return { dir, env, config, follow, troupe, model };
}

const width = (line: string) => [...line].length;

describe("living with the daemon", () => {
  it("an observer started while a run waits on a person shows that run at once, its spend in view at 60 columns, and answers it", async () => {
    const s = await project([
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ name: "shell", arguments: { command: "touch approved.txt" } }] },
      },
      { match: { turn: 2 }, reply: { text: "Done." } },
    ]);
    const run = s.follow(["run", "--json", "--approval", "ask", "Touch it"]);
    await waitFor("an approval request", () => run.stdout().includes('"approval.requested"'), 15_000);
    // Following from now (no --from-start): the run said its last word before the observer began.
    const tmux = Tmux.start([process.execPath, TROUPE_BIN, ...s.config, "observe"], {
      cwd: s.dir,
      env: s.env,
      columns: 60,
      rows: 20,
    });
    cleanups.push(() => tmux.kill());
    await waitFor("the approval panel", () => tmux.screen().includes("[a] allow"), 10_000);
    const row = tmux
      .screen()
      .split("\n")
      .find((line) => line.includes("worker ("));
    expect(row).toMatch(/worker \(worker-\w+\) asking t1\/50 \d+ tok \$0\.0000/);
    tmux.keys("a");
    expect(await run.exit).toBe(0);
    expect(existsSync(join(s.dir, "approved.txt"))).toBe(true);
  });

  it("the observer fits its terminal at 60 and 200 columns and 12 rows, with three runs, and redraws in place", async () => {
    const s = await project();
    const runs = [1, 2, 3].map((i) => s.follow(["run", "--json", "--approval", "ask", `Task ${i}`]));
    for (const run of runs)
      await waitFor("an approval request", () => run.stdout().includes('"approval.requested"'), 15_000);
    const tmux = Tmux.start([process.execPath, TROUPE_BIN, ...s.config, "observe", "--from-start"], {
      cwd: s.dir,
      env: s.env,
      columns: 60,
      rows: 12,
    });
    cleanups.push(() => tmux.kill());
    await waitFor("the approval panel", () => tmux.screen().includes("[d] deny"), 10_000);
    // Redrawn ten times a second while runs move: the frame is replaced, never scrolled up.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    for (const [columns, rows] of [
      [60, 12],
      [200, 12],
    ] as const) {
      if (columns !== 60) {
        tmux.resize(columns, rows);
        // An agent's row, cut at 60 columns before its spend, is whole again.
        await waitFor("the frame redrawn at the new width", () => tmux.screen().includes("tokens"));
      }
      const screen = tmux.screen();
      const lines = screen.split("\n");
      expect(lines.length).toBeLessThanOrEqual(rows + 1);
      for (const line of lines) expect(width(line)).toBeLessThanOrEqual(columns);
      expect(tmux.history().split("troupe observe ·")).toHaveLength(2);
      // The approval to answer: who, what (tool, call id, paths, the command's first lines, quoted), and the keys.
      expect(screen).toMatch(/approval \(1 of 3 waiting\): worker wants shell \(call_\d_0\)/);
      expect(screen).toContain("paths: approved.txt");
      expect(screen).toContain('│ "touch approved.txt');
      expect(screen).toContain("↑/↓ pick an agent · a/d answer · q quit");
      // Seven lines do not fit in twelve rows: the panel says where to see them all, and offers no allow.
      expect(screen).toContain("not all shown: see it whole with troupe approve");
      expect(screen).not.toContain("[a] allow");
    }
    // Tall enough for the whole command, the panel offers allow.
    tmux.resize(200, 30);
    await waitFor("the whole command and allow", () => tmux.screen().includes("[a] allow"), 5000);
    expect(tmux.screen()).toContain('│ echo seven"');
    // The arrow keys pick an agent; its approval is the one a/d answers.
    tmux.keys("Down", "Down", "Down");
    await waitFor("an agent picked", () => tmux.screen().includes("›"));
    // The frame settled (it is redrawn ten times a second): the panel is the picked agent's.
    let screen = "";
    await waitFor("the frame to settle", async () => {
      const before = tmux.screen();
      await new Promise((resolve) => setTimeout(resolve, 300));
      screen = tmux.screen();
      return before === screen;
    });
    const picked = /approval \(1 of 3 waiting\): worker wants shell \((call_\d_0)\)/.exec(screen)?.[1];
    tmux.keys("a");
    const answered = await Promise.race(
      runs.map(async (run) => {
        await run.exit;
        return run;
      }),
    );
    expect(answered.stdout()).toContain(`"callId":"${picked}"`);
    expect(answered.stdout()).toContain('"approved":true');
  });

  it("troupe approvals lists what waits; troupe approve with no id answers it; the client's prompt is cleared and the next shown", async () => {
    const s = await project([
      {
        match: { turn: 1 },
        reply: { toolCalls: [{ name: "shell", arguments: { command: "touch one.txt" }, id: "call_one" }] },
      },
      {
        match: { turn: 2 },
        reply: { toolCalls: [{ name: "shell", arguments: { command: "touch two.txt" }, id: "call_two" }] },
      },
      { match: { turn: 3 }, reply: { text: "Done." } },
    ]);
    const run = onTerminal([...s.config, "run", "--approval", "ask", "Touch both"], {
      cwd: s.dir,
      env: s.env,
    });
    cleanups.push(() => void run.child.kill("SIGKILL"));
    await waitFor("the first question", () => run.output().includes("allow shell (call_one)?"), 15_000);

    const listed = await s.troupe(["approvals"]);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(
      /^CALL +RUN +AGENT +TOOL +AGE +WHAT\ncall_one +run-\S+ +worker-\S+ +shell +\d+s +"touch one.txt" \(one.txt\)\n$/,
    );
    const approved = await s.troupe(["approve", "--allow"]);
    expect(approved.stdout).toBe(`allowed shell (call_one) as ${userInfo().username}\n`);
    expect(approved.code).toBe(0);

    // The question withdrawn (its line cleared), who answered it, then the next one, asked once.
    await waitFor("the second question", () => run.output().includes("allow shell (call_two)?"), 15_000);
    const after = run.output().slice(run.output().indexOf("allow shell (call_one)?"));
    expect(after).toMatch(
      new RegExp(
        `^allow shell \\(call_one\\)\\? y = yes, n \\[reason\\] = no, a = always: \\r\\x1b\\[K[^]*✓ allowed by ${userInfo().username} \\(troupe approve\\)[^]*allow shell \\(call_two\\)\\?`,
      ),
    );
    run.child.stdin.write("what\n");
    await waitFor("asked again", () => run.output().includes('"what" is not an answer'), 5000);
    run.child.stdin.write("y\n");
    expect(await run.exit).toBe(0);
    expect(run.output().split("allow shell (call_one)?")).toHaveLength(2);
    expect(run.output().split("allow shell (call_two)?")).toHaveLength(2);
    expect((await s.troupe(["approvals"])).stdout).toBe("no approval waits\n");

    // Replayed on a terminal, the daemon's run reads as it did live, not as JSON.
    const { runs } = JSON.parse((await s.troupe(["status", "--json"])).stdout) as {
      runs: Array<{ runId: string }>;
    };
    const replay = onTerminal([...s.config, "replay", runs[0]?.runId as string], { cwd: s.dir, env: s.env });
    cleanups.push(() => void replay.child.kill("SIGKILL"));
    expect(await replay.exit).toBe(0);
    expect(replay.output()).toContain('▸ shell {"command":"touch one.txt"}');
    expect(replay.output()).toMatch(/✓ done · 3 turns · 2 tool calls/);
    expect(replay.output()).not.toContain('{"v":1');
  });
});
